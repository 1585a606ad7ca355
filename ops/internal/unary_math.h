// The unary math family (ops/unary_math_ops.cc): its functions by number and its ops by name,
// one table that the schemas, the host kernels (ops/cpu/unary_math_kernels.cc) and the cuda
// kernels (ops/cuda/unary_math_op_kernels.cc, device code in ops/cuda/unary_math_kernels.cu)
// all walk, so an op cannot be registered on one path and missing on another. Plain C++ with
// no dependencies: nvcc compiles it too. Constants only; thread-safe.
#ifndef SLUICE_OPS_INTERNAL_UNARY_MATH_H_
#define SLUICE_OPS_INTERNAL_UNARY_MATH_H_

namespace sluice::ops::internal {

// The functions, in the order of kUnaryMathOps. The first kNumDifferentiableUnaryMath have a
// derivative kernel; floor, ceil and round are piecewise constant (their gradient is zero).
enum class UnaryMathFn : int {
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kFloor,
  kCeil,
  kRound,
};
inline constexpr int kNumUnaryMath = 14;
inline constexpr int kNumDifferentiableUnaryMath = 11;

struct UnaryMathOp {
  UnaryMathFn fn;
  const char* name;  // the op
  const char* grad;  // its derivative op, nullptr for the piecewise-constant ones
};

inline constexpr UnaryMathOp kUnaryMathOps[kNumUnaryMath] = {
    {UnaryMathFn::kSin, "sin", "sin_grad"},       {UnaryMathFn::kCos, "cos", "cos_grad"},
    {UnaryMathFn::kTan, "tan", "tan_grad"},       {UnaryMathFn::kAsin, "asin", "asin_grad"},
    {UnaryMathFn::kAcos, "acos", "acos_grad"},    {UnaryMathFn::kAtan, "atan", "atan_grad"},
    {UnaryMathFn::kSinh, "sinh", "sinh_grad"},    {UnaryMathFn::kCosh, "cosh", "cosh_grad"},
    {UnaryMathFn::kAsinh, "asinh", "asinh_grad"}, {UnaryMathFn::kAcosh, "acosh", "acosh_grad"},
    {UnaryMathFn::kAtanh, "atanh", "atanh_grad"}, {UnaryMathFn::kFloor, "floor", nullptr},
    {UnaryMathFn::kCeil, "ceil", nullptr},        {UnaryMathFn::kRound, "round", nullptr},
};

// The kernels index the table by function: row i is function i, and only the first
// kNumDifferentiableUnaryMath rows have a grad op.
constexpr bool UnaryMathTableInOrder() {
  for (int i = 0; i < kNumUnaryMath; ++i) {
    if (static_cast<int>(kUnaryMathOps[i].fn) != i) return false;
    if ((kUnaryMathOps[i].grad != nullptr) != (i < kNumDifferentiableUnaryMath)) return false;
  }
  return true;
}
static_assert(UnaryMathTableInOrder());

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_UNARY_MATH_H_
