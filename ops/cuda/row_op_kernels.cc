// CUDA kernels (OpKernels) of the row ops (ops/row_ops.cc) for the dtypes of their host
// kernels (f32, f64, i32, i64, bool), with the host kernels' operand checks. The index is
// read on the device: one outside the buffer is not reported (see ops/cuda/row_kernels.cu).
// Thread-safe (no mutable state), as CudaKernel says.
#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/cuda_launch.h"

namespace sluice::ops::internal {
namespace {

// Buffer [N, d...] and Index (an i32 or i64 scalar) of `op`; N and a row's bytes.
absl::Status CheckBufferAndIndex(absl::string_view op, const HostTensor& buffer,
                                 const HostTensor& index, int64_t* rows, int64_t* row_bytes) {
  if (buffer.shape->rank() < 1 || buffer.shape->dim(0) == 0) {
    return OpError(op, absl::StrCat(buffer.Describe("input", 0), " must have at least one row"));
  }
  if ((index.dtype != DataType::kI32 && index.dtype != DataType::kI64) || index.size != 1) {
    return OpError(op, absl::StrCat(index.Describe("input", 1), " must be an i32 or i64 scalar"));
  }
  *rows = buffer.shape->dim(0);
  *row_bytes = buffer.size / *rows * static_cast<int64_t>(SizeOf(buffer.dtype));
  return absl::OkStatus();
}

absl::Status RunWriteRow(const CudaArgs& a) {
  constexpr absl::string_view kOp = "write_row";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 3, 1));
  const HostTensor& buffer = a.inputs[0];
  const HostTensor& index = a.inputs[1];
  const HostTensor& x = a.inputs[2];
  const HostTensor& out = a.outputs[0];
  int64_t rows = 0, row_bytes = 0;
  SLUICE_RETURN_IF_ERROR(CheckBufferAndIndex(kOp, buffer, index, &rows, &row_bytes));
  if (out.dtype != buffer.dtype || out.size != buffer.size || x.dtype != buffer.dtype ||
      x.size * static_cast<int64_t>(SizeOf(x.dtype)) != row_bytes) {
    return OpError(
        kOp, absl::StrCat(out.Describe("output", 0), " must be like ", buffer.Describe("input", 0),
                          " and ", x.Describe("input", 2), " like one of its rows"));
  }
  return CudaStatus(kOp, gpu::LaunchWriteRow(buffer.data, index.data, index.dtype == DataType::kI64,
                                             x.data, out.data, rows, row_bytes, a.cuda_stream));
}

absl::Status RunReadRow(const CudaArgs& a) {
  constexpr absl::string_view kOp = "read_row";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 2, 1));
  const HostTensor& buffer = a.inputs[0];
  const HostTensor& index = a.inputs[1];
  const HostTensor& out = a.outputs[0];
  int64_t rows = 0, row_bytes = 0;
  SLUICE_RETURN_IF_ERROR(CheckBufferAndIndex(kOp, buffer, index, &rows, &row_bytes));
  if (out.dtype != buffer.dtype ||
      out.size * static_cast<int64_t>(SizeOf(out.dtype)) != row_bytes) {
    return OpError(kOp, absl::StrCat(out.Describe("output", 0), " must be like one row of ",
                                     buffer.Describe("input", 0)));
  }
  return CudaStatus(kOp, gpu::LaunchReadRow(buffer.data, index.data, index.dtype == DataType::kI64,
                                            out.data, rows, row_bytes, a.cuda_stream));
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
