// Schemas of the row family: indexed reads and writes of one row of a buffer, which is how
// autodiff keeps a while loop's per-iteration values for its backward loop
// (framework/autodiff/internal/control_flow_grad.h): the forward body writes row i of a
// loop-carried buffer, the backward body reads the rows back in reverse.
//
//   write_row   Buffer, Index, X -> Out   Buffer [N, d...] of any dtype; Index an i32 or i64
//                                         scalar; X [d...] of Buffer's dtype. Out is Buffer
//                                         with row Index replaced by X (Out like Buffer)
//   read_row    Buffer, Index -> Out      Out [d...] = row Index of Buffer
//
// An Index outside [0, N) is a kernel error naming the op, the index and N (the index is
// data, known only when the op runs). Neither op has a grad maker: autodiff reads and
// writes these buffers itself and never differentiates through them. The key dtype is
// Buffer's.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/status.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;

std::string MetaText(const TensorMeta& m) {
  return absl::StrCat(DataTypeName(m.dtype), m.shape.ToString());
}

// Buffer (slot 0) of rank >= 1 and an integer scalar Index (slot 1): the shape of one row,
// in `row`.
absl::Status RowShape(const InferContext& ctx, Shape* row) {
  const TensorMeta& buffer = ctx.input(0);
  const TensorMeta& index = ctx.input(1);
  if (buffer.shape.rank() < 1) {
    return ctx.Error(
        absl::StrCat("input Buffer is ", MetaText(buffer), "; it must have at least one axis"));
  }
  if ((index.dtype != DataType::kI32 && index.dtype != DataType::kI64) || index.shape.rank() != 0) {
    return ctx.Error(
        absl::StrCat("input Index is ", MetaText(index), "; it must be an i32 or i64 scalar"));
  }
  *row = Shape(absl::MakeConstSpan(buffer.shape.dims()).subspan(1));
  return absl::OkStatus();
}

absl::StatusOr<Metas> InferWriteRow(const InferContext& ctx) {
  Shape row;
  SLUICE_RETURN_IF_ERROR(RowShape(ctx, &row));
  const TensorMeta& buffer = ctx.input(0);
  const TensorMeta& x = ctx.input(2);
  if (x.dtype != buffer.dtype || x.shape != row) {
    return ctx.Error(absl::StrCat("input X is ", MetaText(x), " but a row of Buffer ",
                                  MetaText(buffer), " is ", DataTypeName(buffer.dtype),
                                  row.ToString()));
  }
  return Single(buffer);
}

absl::StatusOr<Metas> InferReadRow(const InferContext& ctx) {
  TensorMeta out{ctx.input(0).dtype, Shape()};
  SLUICE_RETURN_IF_ERROR(RowShape(ctx, &out.shape));
  return Single(std::move(out));
}

}  // namespace

absl::Status RegisterRowOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("write_row")
                                                      .Input("Buffer")
                                                      .Input("Index")
                                                      .Input("X")
                                                      .Output("Out")
                                                      .Infer(InferWriteRow)
                                                      // A loop's buffer is updated in place.
                                                      .InPlace("Buffer", "Out")));
  return registry->RegisterSchema(
      OpSchema("read_row").Input("Buffer").Input("Index").Output("Out").Infer(InferReadRow));
}

}  // namespace sluice::ops::internal
