// The operand checks of the row ops (ops/row_ops.cc: write_row, read_row), shared by their
// host kernels (ops/cpu/row_kernels.cc) and cuda kernels (ops/cuda/row_op_kernels.cc), so
// that both refuse the same operands with the same message. Stateless; thread-safe.
#ifndef SLUICE_OPS_INTERNAL_ROW_OPERANDS_H_
#define SLUICE_OPS_INTERNAL_ROW_OPERANDS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ops/cpu/host_kernel.h"

namespace sluice::ops::internal {

// A buffer [rows, d...] seen as rows of row_bytes bytes.
struct RowGeometry {
  int64_t rows = 0;
  int64_t row_bytes = 0;
};

// write_row's Buffer [N, d...] (N > 0), Index (an i32 or i64 scalar), X (one row of
// Buffer's dtype) and Out (like Buffer); InvalidArgument naming the operand otherwise.
absl::StatusOr<RowGeometry> CheckWriteRowOperands(const HostTensor& buffer, const HostTensor& index,
                                                  const HostTensor& x, const HostTensor& out);
// read_row's Buffer and Index as above, and Out (one row of Buffer's dtype).
absl::StatusOr<RowGeometry> CheckReadRowOperands(const HostTensor& buffer, const HostTensor& index,
                                                 const HostTensor& out);

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_ROW_OPERANDS_H_
