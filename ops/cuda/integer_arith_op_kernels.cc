// CUDA kernels (OpKernels) of the integer forms of add, sub, mul, div, neg, abs and relu (i32
// and i64), with the operand checks of the host kernels (ops/cpu/integer_arith_kernels.cc).
// div scans Y for a zero before it divides: a zero divisor is an error of the run naming the
// element, reported through a DeviceErrorRecord (the quotient there is 0, and later ops use it).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/device_error_record.h"
#include "ops/cuda/integer_arith_launch.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace integer_arith_cuda {
namespace {

template <typename T>
absl::Status CheckIntegerOperands(absl::string_view op, const CudaArgs& a, int inputs) {
  SLUICE_RETURN_IF_ERROR(CheckCounts(op, a, inputs, 1));
  return CheckDtypes(op, a, DataTypeOf<T>());
}

template <typename T>
absl::Status RunBinary(absl::string_view op, gpu::IntegerBinaryOp fn, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckIntegerOperands<T>(op, a, 2));
  const HostTensor& x = a.inputs[0];
  const HostTensor& y = a.inputs[1];
  const HostTensor& out = a.outputs[0];
  SLUICE_ASSIGN_OR_RETURN(const Shape shape, CheckBroadcastOutput(op, a, out));
  if (out.size == 0) return absl::OkStatus();
  const Shape::Dims sx = BroadcastStrides(*x.shape, shape);
  const Shape::Dims sy = BroadcastStrides(*y.shape, shape);
  std::vector<PlanDim> dims(shape.rank());
  for (int d = 0; d < shape.rank(); ++d) dims[d] = {shape.dim(d), false, {sx[d], sy[d], 0}};
  SLUICE_ASSIGN_OR_RETURN(const gpu::IndexPlan plan, MakeIndexPlan(op, dims, 2));
  if (fn != gpu::IntegerBinaryOp::kDiv) {
    return CudaStatus(op, gpu::LaunchIntegerBinary<T>(fn, plan, x.as<const T>(), y.as<const T>(),
                                                      out.as<T>(), a.cuda_stream));
  }
  // Every element of Y divides some output element: a zero anywhere is a zero divisor.
  SLUICE_ASSIGN_OR_RETURN(DeviceErrorRecord record, DeviceErrorRecord::Create(op, a));
  SLUICE_RETURN_IF_ERROR(CudaStatus(
      op, gpu::LaunchFindZero<T>(y.as<const T>(), y.size, record.words(), a.cuda_stream)));
  SLUICE_RETURN_IF_ERROR(
      CudaStatus(op, gpu::LaunchIntegerBinary<T>(fn, plan, x.as<const T>(), y.as<const T>(),
                                                 out.as<T>(), a.cuda_stream)));
  return record.ReportAfter(
      op, a, [op = std::string(op), y_name = y.Describe("input", 1)](uint64_t index, uint64_t) {
        return OpError(
            op, absl::StrCat("integer division by zero: element ", index, " of ", y_name, " is 0"));
      });
}

template <typename T>
absl::Status RunUnary(absl::string_view op, gpu::IntegerUnaryOp fn, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckIntegerOperands<T>(op, a, 1));
  SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(op, a, /*grad=*/false));
  return CudaStatus(op,
                    gpu::LaunchIntegerUnary<T>(fn, a.inputs[0].as<const T>(), a.outputs[0].as<T>(),
                                               a.outputs[0].size, a.cuda_stream));
}

}  // namespace
}  // namespace integer_arith_cuda

absl::Status RegisterIntegerArithCudaKernels(OpRegistry* registry) {
  const std::pair<const char*, gpu::IntegerBinaryOp> binary[] = {
      {"add", gpu::IntegerBinaryOp::kAdd},
      {"sub", gpu::IntegerBinaryOp::kSub},
      {"mul", gpu::IntegerBinaryOp::kMul},
      {"div", gpu::IntegerBinaryOp::kDiv},
  };
  for (const auto& [op, fn] : binary) {
    SLUICE_RETURN_IF_ERROR(
        (RegisterCudaKernelsFor<int32_t, int64_t>(registry, op, [op = op, fn = fn](auto tag) {
          using T = typename decltype(tag)::type;
          return MakeCudaKernel(op, [op, fn](const CudaArgs& a) {
            return integer_arith_cuda::RunBinary<T>(op, fn, a);
          });
        })));
  }
  const std::pair<const char*, gpu::IntegerUnaryOp> unary[] = {
      {"neg", gpu::IntegerUnaryOp::kNeg},
      {"abs", gpu::IntegerUnaryOp::kAbs},
      {"relu", gpu::IntegerUnaryOp::kRelu},
  };
  for (const auto& [op, fn] : unary) {
    SLUICE_RETURN_IF_ERROR(
        (RegisterCudaKernelsFor<int32_t, int64_t>(registry, op, [op = op, fn = fn](auto tag) {
          using T = typename decltype(tag)::type;
          return MakeCudaKernel(op, [op, fn](const CudaArgs& a) {
            return integer_arith_cuda::RunUnary<T>(op, fn, a);
          });
        })));
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
