// CUDA kernels of the row ops (ops/row_ops.cc): byte copies of one row of a buffer, the
// row's index read on the device (no host round trip). An index outside the buffer writes
// nothing (write_row) or zeros (read_row): the device cannot report it as the host kernels
// do (ops/cpu/row_kernels.cc), which check it when the op runs.
#include <cstdint>

#include "ops/cuda/cuda_launch.h"
#include "ops/cuda/device_util.h"

namespace sluice::ops::gpu {
namespace {

__device__ inline int64_t LoadIndex(const void* index, bool index_i64) {
  return index_i64 ? *static_cast<const int64_t*>(index)
                   : static_cast<int64_t>(*static_cast<const int32_t*>(index));
}

__global__ void WriteRowKernel(const void* index, bool index_i64, const char* row, char* out,
                               int64_t rows, int64_t row_bytes) {
  const int64_t i = LoadIndex(index, index_i64);
  if (i < 0 || i >= rows) return;
  for (int64_t b = GlobalIndex(); b < row_bytes; b += GlobalStride()) {
    out[i * row_bytes + b] = row[b];
  }
}

__global__ void ReadRowKernel(const char* buffer, const void* index, bool index_i64, char* out,
                              int64_t rows, int64_t row_bytes) {
  const int64_t i = LoadIndex(index, index_i64);
  const bool inside = i >= 0 && i < rows;
  for (int64_t b = GlobalIndex(); b < row_bytes; b += GlobalStride()) {
    out[b] = inside ? buffer[i * row_bytes + b] : char{0};
  }
}

}  // namespace

cudaError_t LaunchWriteRow(const void* buffer, const void* index, bool index_i64, const void* row,
                           void* out, int64_t rows, int64_t row_bytes, cudaStream_t stream) {
  const int64_t total = rows * row_bytes;
  if (buffer != out && total > 0) {
    const cudaError_t copied =
        cudaMemcpyAsync(out, buffer, static_cast<size_t>(total), cudaMemcpyDeviceToDevice, stream);
    if (copied != cudaSuccess) return copied;
  }
  if (row_bytes == 0) return cudaSuccess;
  WriteRowKernel<<<GridFor(row_bytes), kBlock, 0, stream>>>(
      index, index_i64, static_cast<const char*>(row), static_cast<char*>(out), rows, row_bytes);
  return cudaGetLastError();
}

cudaError_t LaunchReadRow(const void* buffer, const void* index, bool index_i64, void* out,
                          int64_t rows, int64_t row_bytes, cudaStream_t stream) {
  if (row_bytes == 0) return cudaSuccess;
  ReadRowKernel<<<GridFor(row_bytes), kBlock, 0, stream>>>(
      static_cast<const char*>(buffer), index, index_i64, static_cast<char*>(out), rows, row_bytes);
  return cudaGetLastError();
}

}  // namespace sluice::ops::gpu
