// CUDA kernels (OpKernels) of the row ops (ops/row_ops.cc) for the dtypes of their host
// kernels (f32, f64, i32, i64, bool), with the host kernels' operand checks
// (ops/internal/row_operands.h). The index is
// read on the device: one outside the buffer is not reported (see ops/cuda/row_kernels.cu).
// Thread-safe (no mutable state), as CudaKernel says.
#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/cuda_launch.h"
#include "ops/internal/row_operands.h"

namespace sluice::ops::internal {
namespace {

absl::Status RunWriteRow(const CudaArgs& a) {
  constexpr absl::string_view kOp = "write_row";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 3, 1));
  const HostTensor& buffer = a.inputs[0];
  const HostTensor& index = a.inputs[1];
  const HostTensor& x = a.inputs[2];
  const HostTensor& out = a.outputs[0];
  SLUICE_ASSIGN_OR_RETURN(const RowGeometry geometry, CheckWriteRowOperands(buffer, index, x, out));
  return CudaStatus(
      kOp, gpu::LaunchWriteRow(buffer.data, index.data, index.dtype == DataType::kI64, x.data,
                               out.data, geometry.rows, geometry.row_bytes, a.cuda_stream));
}

absl::Status RunReadRow(const CudaArgs& a) {
  constexpr absl::string_view kOp = "read_row";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 2, 1));
  const HostTensor& buffer = a.inputs[0];
  const HostTensor& index = a.inputs[1];
  const HostTensor& out = a.outputs[0];
  SLUICE_ASSIGN_OR_RETURN(const RowGeometry geometry, CheckReadRowOperands(buffer, index, out));
  return CudaStatus(
      kOp, gpu::LaunchReadRow(buffer.data, index.data, index.dtype == DataType::kI64, out.data,
                              geometry.rows, geometry.row_bytes, a.cuda_stream));
}

}  // namespace

absl::Status RegisterRowCudaKernels(OpRegistry* registry) {
  for (DataType dtype :
       {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64, DataType::kBool}) {
    SLUICE_RETURN_IF_ERROR(registry->RegisterKernel("write_row", {DeviceType::kCuda}, dtype,
                                                    MakeCudaKernel("write_row", RunWriteRow)));
    SLUICE_RETURN_IF_ERROR(registry->RegisterKernel("read_row", {DeviceType::kCuda}, dtype,
                                                    MakeCudaKernel("read_row", RunReadRow)));
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
