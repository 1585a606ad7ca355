// CUDA kernels (OpKernels) of the unary math family (ops/unary_math_ops.cc), f32 and f64, with
// the host kernels' operand checks (ops/internal/unary_math_operands.h); the device code is in
// ops/cuda/unary_math_kernels.cu. Registered from the family's table
// (ops/internal/unary_math.h), so every op with a host kernel has a cuda one. Thread-safe (no
// mutable state), as CudaKernel says.
#include <string>

#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/unary_math_launch.h"
#include "ops/internal/unary_math.h"
#include "ops/internal/unary_math_operands.h"

namespace sluice::ops::internal {
namespace {

template <typename T>
absl::Status RunUnaryMath(const std::string& op, UnaryMathFn fn, bool grad, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckUnaryMathOperands<T>(op, a, grad));
  const int64_t n = a.outputs[0].size;
  const T* x = a.inputs[0].as<const T>();
  T* out = a.outputs[0].as<T>();
  const int f = static_cast<int>(fn);  // the launchers' number for it
  return CudaStatus(
      op, grad ? gpu::LaunchUnaryMathGrad<T>(f, x, a.inputs[1].as<const T>(), out, n, a.cuda_stream)
               : gpu::LaunchUnaryMath<T>(f, x, out, n, a.cuda_stream));
}

absl::Status RegisterUnaryMathCuda(OpRegistry* registry, const char* op, UnaryMathFn fn,
                                   bool grad) {
  return RegisterCudaKernelsFor<float, double>(registry, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return MakeCudaKernel(op, [op = std::string(op), fn, grad](const CudaArgs& a) {
      return RunUnaryMath<T>(op, fn, grad, a);
    });
  });
}

}  // namespace

absl::Status RegisterUnaryMathCudaKernels(OpRegistry* registry) {
  for (const UnaryMathOp& op : kUnaryMathOps) {
    SLUICE_RETURN_IF_ERROR(RegisterUnaryMathCuda(registry, op.name, op.fn, /*grad=*/false));
    if (op.grad != nullptr) {
      SLUICE_RETURN_IF_ERROR(RegisterUnaryMathCuda(registry, op.grad, op.fn, /*grad=*/true));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
