// Host kernels (cpu and sim) of the unary math family (ops/unary_math_ops.cc), f32 and f64:
// one kernel template per function and direction, instantiated over the family's table
// (ops/internal/unary_math.h). The values are the C library's (std::sin, ... on the element
// type, so f32 computes in float as sinf does; round is std::nearbyint in the default
// rounding mode, halves to even). Each element is computed alone, so a large tensor splits
// across the device's intra-op threads without changing a bit.
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "core/status.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/op_families.h"
#include "ops/internal/unary_math.h"
#include "ops/internal/unary_math_operands.h"

namespace sluice::ops::internal {
namespace {

// Loops of at least this many elements split across the intra-op threads, in chunks of at
// least kUnaryMathGrain (a library call costs tens of nanoseconds an element).
constexpr int64_t kUnaryMathParallelElements = int64_t{1} << 15;
constexpr int64_t kUnaryMathGrain = int64_t{1} << 13;

template <UnaryMathFn F, typename T>
T UnaryMathValue(T x) {
  using enum UnaryMathFn;
  if constexpr (F == kSin) return std::sin(x);
  if constexpr (F == kCos) return std::cos(x);
  if constexpr (F == kTan) return std::tan(x);
  if constexpr (F == kAsin) return std::asin(x);
  if constexpr (F == kAcos) return std::acos(x);
  if constexpr (F == kAtan) return std::atan(x);
  if constexpr (F == kSinh) return std::sinh(x);
  if constexpr (F == kCosh) return std::cosh(x);
  if constexpr (F == kAsinh) return std::asinh(x);
  if constexpr (F == kAcosh) return std::acosh(x);
  if constexpr (F == kAtanh) return std::atanh(x);
  if constexpr (F == kFloor) return std::floor(x);
  if constexpr (F == kCeil) return std::ceil(x);
  if constexpr (F == kRound) return std::nearbyint(x);
}

// f'(x), as the schema comment gives it (ops/unary_math_ops.cc).
template <UnaryMathFn F, typename T>
T UnaryMathDerivative(T x) {
  using enum UnaryMathFn;
  const T one(1);
  if constexpr (F == kSin) return std::cos(x);
  if constexpr (F == kCos) return -std::sin(x);
  if constexpr (F == kTan) {
    const T t = std::tan(x);
    return one + t * t;
  }
  if constexpr (F == kAsin) return one / std::sqrt((one - x) * (one + x));
  if constexpr (F == kAcos) return -one / std::sqrt((one - x) * (one + x));
  if constexpr (F == kAtan) return one / (one + x * x);
  if constexpr (F == kSinh) return std::cosh(x);
  if constexpr (F == kCosh) return std::sinh(x);
  if constexpr (F == kAsinh) return one / std::sqrt(x * x + one);
  if constexpr (F == kAcosh) return one / std::sqrt((x - one) * (x + one));
  if constexpr (F == kAtanh) return one / ((one - x) * (one + x));
}

// <op>: X -> Out (out[i] = f(x[i])); with `kGrad`, <op>_grad: X, OutGrad -> XGrad
// (dx[i] = f'(x[i]) g[i]). Out may be X, XGrad X or OutGrad: element i is read before it is
// written, by the one thread that writes it.
template <UnaryMathFn F, typename T, bool kGrad>
class UnaryMathKernel final : public HostKernel {
 public:
  using HostKernel::HostKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(CheckUnaryMathOperands<T>(name(), a, kGrad));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    const T* x = a.inputs[0].as<const T>();
    const T* g = kGrad ? a.inputs[1].as<const T>() : nullptr;
    T* out = a.outputs[0].as<T>();
    const ParallelScope parallel = n < kUnaryMathParallelElements ? ParallelScope() : a.parallel();
    return HostWork([x, g, out, n, parallel] {
      return parallel.For(
          n, kUnaryMathGrain,
          [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
              if constexpr (kGrad) {
                out[i] = UnaryMathDerivative<F>(x[i]) * g[i];
              } else {
                out[i] = UnaryMathValue<F>(x[i]);
              }
            }
          },
          "unary math loop");
    });
  }
};

template <UnaryMathFn F, bool kGrad>
absl::Status RegisterUnaryMathHost(OpRegistry* registry, const char* op) {
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    std::shared_ptr<const vm::OpKernel> kernel;
    if (dtype == DataType::kF32) {
      kernel = std::make_shared<UnaryMathKernel<F, float, kGrad>>(op);
    } else {
      kernel = std::make_shared<UnaryMathKernel<F, double, kGrad>>(op);
    }
    SLUICE_RETURN_IF_ERROR(registry->RegisterKernel(op, {DeviceType::kCpu, DeviceType::kSim}, dtype,
                                                    std::move(kernel)));
  }
  return absl::OkStatus();
}

template <int... I>
absl::Status RegisterEachUnaryMathHost(OpRegistry* registry, std::integer_sequence<int, I...>) {
  absl::Status status;
  auto one = [&](auto fn) {
    constexpr UnaryMathFn F = decltype(fn)::value;
    const UnaryMathOp& op = kUnaryMathOps[static_cast<int>(F)];
    if (status.ok()) status = RegisterUnaryMathHost<F, false>(registry, op.name);
    if constexpr (static_cast<int>(F) < kNumDifferentiableUnaryMath) {
      if (status.ok()) status = RegisterUnaryMathHost<F, true>(registry, op.grad);
    }
  };
  (one(std::integral_constant<UnaryMathFn, static_cast<UnaryMathFn>(I)>{}), ...);
  return status;
}

}  // namespace

absl::Status RegisterUnaryMathHostKernels(OpRegistry* registry) {
  return RegisterEachUnaryMathHost(registry, std::make_integer_sequence<int, kNumUnaryMath>{});
}

}  // namespace sluice::ops::internal
