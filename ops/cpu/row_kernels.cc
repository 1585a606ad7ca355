// Host kernels (cpu and sim) of the row family (ops/row_ops.cc), for buffers of every dtype
// (key dtype Buffer's) and i32 or i64 indices. The index is read inside the work, in stream
// order, since its producer may still be running when the kernel is prepared. write_row
// copies Buffer into Out (nothing when they are one tensor) and then X into the row; X
// must not alias Out. The kernels are thread-safe (no mutable state), as HostKernel says.
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/op_families.h"
#include "ops/internal/row_operands.h"

namespace sluice::ops::internal {
namespace {

// The row index stored in `index` (i32 or i64), checked against `rows`; InvalidArgument
// naming `op` when outside [0, rows).
absl::StatusOr<int64_t> ReadIndex(absl::string_view op, const void* index, DataType dtype,
                                  int64_t rows) {
  const int64_t i = dtype == DataType::kI32 ? *static_cast<const int32_t*>(index)
                                            : *static_cast<const int64_t*>(index);
  if (i < 0 || i >= rows) {
    return OpError(op, absl::StrCat("index ", i, " is outside the buffer's ", rows, " rows"));
  }
  return i;
}

std::shared_ptr<const vm::OpKernel> MakeWriteRow() {
  return MakeHostKernel("write_row", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
    constexpr absl::string_view kOp = "write_row";
    if (a.inputs.size() != 3 || a.outputs.size() != 1) {
      return OpError(kOp, "needs inputs Buffer, Index, X and one output");
    }
    const HostTensor& buffer = a.inputs[0];
    const HostTensor& index = a.inputs[1];
    const HostTensor& x = a.inputs[2];
    const HostTensor& out = a.outputs[0];
    SLUICE_ASSIGN_OR_RETURN(const RowGeometry geometry,
                            CheckWriteRowOperands(buffer, index, x, out));
    const int64_t rows = geometry.rows;
    const size_t row_bytes = static_cast<size_t>(geometry.row_bytes);
    const char* src = static_cast<const char*>(buffer.data);
    const void* idx = index.data;
    const DataType idx_dtype = index.dtype;
    const char* row = static_cast<const char*>(x.data);
    char* dst = static_cast<char*>(out.data);
    const size_t total = static_cast<size_t>(rows) * row_bytes;
    return HostWork([=]() -> absl::Status {
      SLUICE_ASSIGN_OR_RETURN(const int64_t i, ReadIndex(kOp, idx, idx_dtype, rows));
      if (src != dst) std::memcpy(dst, src, total);
      if (row_bytes > 0) std::memcpy(dst + i * row_bytes, row, row_bytes);
      return absl::OkStatus();
    });
  });
}

std::shared_ptr<const vm::OpKernel> MakeReadRow() {
  return MakeHostKernel("read_row", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
    constexpr absl::string_view kOp = "read_row";
    if (a.inputs.size() != 2 || a.outputs.size() != 1) {
      return OpError(kOp, "needs inputs Buffer, Index and one output");
    }
    const HostTensor& buffer = a.inputs[0];
    const HostTensor& index = a.inputs[1];
    const HostTensor& out = a.outputs[0];
    SLUICE_ASSIGN_OR_RETURN(const RowGeometry geometry, CheckReadRowOperands(buffer, index, out));
    const int64_t rows = geometry.rows;
    const size_t row_bytes = static_cast<size_t>(geometry.row_bytes);
    const char* src = static_cast<const char*>(buffer.data);
    const void* idx = index.data;
    const DataType idx_dtype = index.dtype;
    char* dst = static_cast<char*>(out.data);
    return HostWork([=]() -> absl::Status {
      SLUICE_ASSIGN_OR_RETURN(const int64_t i, ReadIndex(kOp, idx, idx_dtype, rows));
      if (row_bytes > 0) std::memcpy(dst, src + i * row_bytes, row_bytes);
      return absl::OkStatus();
    });
  });
}

}  // namespace

absl::Status RegisterRowHostKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "write_row", [](auto) { return MakeWriteRow(); })));
  return RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "read_row", [](auto) { return MakeReadRow(); });
}

}  // namespace sluice::ops::internal
