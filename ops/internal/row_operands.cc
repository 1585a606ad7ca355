#include "ops/internal/row_operands.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::ops::internal {
namespace {

// Buffer [N, d...] and Index (i32 or i64 scalar) of `op`.
absl::StatusOr<RowGeometry> CheckBufferAndIndex(absl::string_view op, const HostTensor& buffer,
                                                const HostTensor& index) {
  if (buffer.shape->rank() < 1 || buffer.shape->dim(0) == 0) {
    return OpError(op, absl::StrCat(buffer.Describe("input", 0), " must have at least one row"));
  }
  if ((index.dtype != DataType::kI32 && index.dtype != DataType::kI64) || index.size != 1) {
    return OpError(op, absl::StrCat(index.Describe("input", 1), " must be an i32 or i64 scalar"));
  }
  RowGeometry geometry;
  geometry.rows = buffer.shape->dim(0);
  geometry.row_bytes = buffer.size / geometry.rows * static_cast<int64_t>(SizeOf(buffer.dtype));
  return geometry;
}

int64_t Bytes(const HostTensor& t) { return t.size * static_cast<int64_t>(SizeOf(t.dtype)); }

}  // namespace

absl::StatusOr<RowGeometry> CheckWriteRowOperands(const HostTensor& buffer, const HostTensor& index,
                                                  const HostTensor& x, const HostTensor& out) {
  constexpr absl::string_view kOp = "write_row";
  SLUICE_ASSIGN_OR_RETURN(const RowGeometry geometry, CheckBufferAndIndex(kOp, buffer, index));
  if (out.dtype != buffer.dtype || out.size != buffer.size || x.dtype != buffer.dtype ||
      Bytes(x) != geometry.row_bytes) {
    return OpError(
        kOp, absl::StrCat(out.Describe("output", 0), " must be like ", buffer.Describe("input", 0),
                          " and ", x.Describe("input", 2), " like one of its rows"));
  }
  return geometry;
}

absl::StatusOr<RowGeometry> CheckReadRowOperands(const HostTensor& buffer, const HostTensor& index,
                                                 const HostTensor& out) {
  constexpr absl::string_view kOp = "read_row";
  SLUICE_ASSIGN_OR_RETURN(const RowGeometry geometry, CheckBufferAndIndex(kOp, buffer, index));
  if (out.dtype != buffer.dtype || Bytes(out) != geometry.row_bytes) {
    return OpError(kOp, absl::StrCat(out.Describe("output", 0), " must be like one row of ",
                                     buffer.Describe("input", 0)));
  }
  return geometry;
}

}  // namespace sluice::ops::internal
