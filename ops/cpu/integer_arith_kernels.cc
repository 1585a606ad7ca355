// Host kernels (cpu and sim) of the integer forms of add, sub, mul, div, neg, abs and relu
// (i32 and i64; the schemas are the elementwise family's, ops/elementwise_ops.cc). The loops
// are the float kernels' (ops/cpu/elementwise_loops.h: broadcast plan, rows, in-place use);
// only the element functions differ:
//   - +, -, * and negation are computed in the unsigned type of the same width, so they wrap
//     around modulo 2^bits (two's complement) instead of overflowing (undefined in C++);
//     |lowest| is therefore the lowest value, as NumPy and ONNX Runtime give it;
//   - div truncates toward zero (C++, ONNX Div); lowest / -1 wraps to the lowest value (the
//     hardware would trap); a zero anywhere in Y is an error of the run (the op's error at the
//     next sync point, its outputs poisoned), naming the element — every element of Y is the
//     divisor of at least one output element, so this is exactly "some output divides by 0".
// Integer results have no gradient (autodiff and autograd differentiate floats only).
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/op_families.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace integer_arith {
namespace {

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

// The unsigned result converted back: modular since C++20.
template <typename T>
inline T Wrap(Unsigned<T> v) {
  return static_cast<T>(v);
}

struct WrapAddFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return Wrap<T>(static_cast<Unsigned<T>>(x) + static_cast<Unsigned<T>>(y));
  }
};
struct WrapSubFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return Wrap<T>(static_cast<Unsigned<T>>(x) - static_cast<Unsigned<T>>(y));
  }
};
struct WrapMulFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return Wrap<T>(static_cast<Unsigned<T>>(x) * static_cast<Unsigned<T>>(y));
  }
};
struct WrapNegFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return Wrap<T>(Unsigned<T>{0} - static_cast<Unsigned<T>>(x));
  }
};
struct WrapAbsFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return x < 0 ? WrapNegFn{}(x) : x;
  }
};
struct IntReluFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return x < 0 ? T{0} : x;
  }
};
// y != 0 (checked before the loop). -1 as negation: the one quotient that overflows.
struct TruncDivFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return y == T{-1} ? WrapNegFn{}(x) : static_cast<T>(x / y);
  }
};

// OK unless `y` (input 1 of `op`, `n` elements) holds a 0.
template <typename T>
absl::Status CheckDivisors(absl::string_view op, const std::string& y_name, const T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] == 0) {
      return OpError(
          op, absl::StrCat("integer division by zero: element ", i, " of ", y_name, " is 0"));
    }
  }
  return absl::OkStatus();
}

// The checks every kernel here makes: counts, and every operand of dtype T.
template <typename T>
absl::Status CheckIntegerOperands(absl::string_view op, const HostArgs& a, int inputs) {
  const int n_in = static_cast<int>(a.inputs.size());
  const int n_out = static_cast<int>(a.outputs.size());
  if (n_in != inputs || n_out != 1) {
    return OpError(op, absl::StrCat("takes ", inputs, " input(s) and 1 output(s), got ", n_in,
                                    " and ", n_out));
  }
  for (int i = 0; i < n_in; ++i) {
    if (a.inputs[i].dtype != DataTypeOf<T>()) {
      return OpError(op, absl::StrCat(a.inputs[i].Describe("input", i), " must be ",
                                      DataTypeName(DataTypeOf<T>())));
    }
  }
  if (a.outputs[0].dtype != DataTypeOf<T>()) {
    return OpError(op, absl::StrCat(a.outputs[0].Describe("output", 0), " must be ",
                                    DataTypeName(DataTypeOf<T>())));
  }
  return absl::OkStatus();
}

// X, Y -> Out with NumPy broadcasting; kDiv checks the divisors first.
template <typename T, typename Fn, bool kDiv = false>
class IntegerBinaryKernel final : public HostKernel {
 public:
  using HostKernel::HostKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(CheckIntegerOperands<T>(name(), a, 2));
    const HostTensor& x = a.inputs[0];
    const HostTensor& y = a.inputs[1];
    const HostTensor& out = a.outputs[0];
    SLUICE_ASSIGN_OR_RETURN(const Shape shape, CheckBroadcastOutput(name(), a, out));
    if (out.size == 0) return HostWork(nullptr);
    elementwise::BroadcastPlan plan = elementwise::MakeBroadcastPlan(*x.shape, *y.shape, shape);
    return HostWork([op = std::string(name()), y_name = y.Describe("input", 1),
                     plan = std::move(plan), xp = x.as<const T>(), yp = y.as<const T>(),
                     y_size = y.size, outp = out.as<T>()]() -> absl::Status {
      if constexpr (kDiv) {
        SLUICE_RETURN_IF_ERROR(CheckDivisors<T>(op, y_name, yp, y_size));
      }
      elementwise::RunBinary(plan, xp, yp, outp, Fn{});
      return absl::OkStatus();
    });
  }
};

// X -> Out.
template <typename T, typename Fn>
class IntegerUnaryKernel final : public HostKernel {
 public:
  using HostKernel::HostKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(CheckIntegerOperands<T>(name(), a, 1));
    SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(name(), a, /*grad=*/false));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    return HostWork([x = a.inputs[0].as<const T>(), out = a.outputs[0].as<T>(), n] {
      elementwise::RunUnary(x, out, n, Fn{});
      return absl::OkStatus();
    });
  }
};

// Registers IntegerBinaryKernel<T, Fn, kDiv> for i32 and i64 on cpu and sim.
template <typename Fn, bool kDiv = false>
absl::Status RegisterBinary(OpRegistry* registry, const char* op) {
  return RegisterStressKernelsFor<int32_t, int64_t>(registry, op, [op](auto tag) {
    using T = typename decltype(tag)::type;
    return std::shared_ptr<const vm::OpKernel>(
        std::make_shared<IntegerBinaryKernel<T, Fn, kDiv>>(op));
  });
}

// Registers IntegerUnaryKernel<T, Fn> for i32 and i64 on cpu and sim.
template <typename Fn>
absl::Status RegisterUnary(OpRegistry* registry, const char* op) {
  return RegisterStressKernelsFor<int32_t, int64_t>(registry, op, [op](auto tag) {
    using T = typename decltype(tag)::type;
    return std::shared_ptr<const vm::OpKernel>(std::make_shared<IntegerUnaryKernel<T, Fn>>(op));
  });
}

}  // namespace
}  // namespace integer_arith

absl::Status RegisterIntegerArithHostKernels(OpRegistry* registry) {
  using integer_arith::RegisterBinary;
  using integer_arith::RegisterUnary;
  SLUICE_RETURN_IF_ERROR(RegisterBinary<integer_arith::WrapAddFn>(registry, "add"));
  SLUICE_RETURN_IF_ERROR(RegisterBinary<integer_arith::WrapSubFn>(registry, "sub"));
  SLUICE_RETURN_IF_ERROR(RegisterBinary<integer_arith::WrapMulFn>(registry, "mul"));
  SLUICE_RETURN_IF_ERROR((RegisterBinary<integer_arith::TruncDivFn, true>(registry, "div")));
  SLUICE_RETURN_IF_ERROR(RegisterUnary<integer_arith::WrapNegFn>(registry, "neg"));
  SLUICE_RETURN_IF_ERROR(RegisterUnary<integer_arith::WrapAbsFn>(registry, "abs"));
  return RegisterUnary<integer_arith::IntReluFn>(registry, "relu");
}

}  // namespace sluice::ops::internal
