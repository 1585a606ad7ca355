#include "ops/internal/axis_layout.h"

#include "absl/strings/str_cat.h"

namespace sluice::ops::internal {

absl::StatusOr<AxisLayout> LayoutAlong(absl::string_view op, int64_t axis, const HostTensor& whole,
                                       absl::string_view whole_role,
                                       absl::Span<const HostTensor> parts,
                                       absl::string_view part_role) {
  const Shape& shape = *whole.shape;
  const int rank = shape.rank();
  if (rank == 0 || axis < -rank || axis >= rank) {
    return OpError(
        op, absl::StrCat("axis ", axis, " is out of range for ", whole.Describe(whole_role, 0)));
  }
  const int ax = static_cast<int>(axis < 0 ? axis + rank : axis);
  AxisLayout layout;
  int64_t inner = 1;
  for (int d = 0; d < ax; ++d) layout.outer *= shape.dim(d);
  for (int d = ax + 1; d < rank; ++d) inner *= shape.dim(d);
  const size_t elem = SizeOf(whole.dtype);
  int64_t along = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const HostTensor& p = parts[i];
    bool ok = p.dtype == whole.dtype && p.shape->rank() == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == ax || p.shape->dim(d) == shape.dim(d);
    if (!ok) {
      return OpError(op,
                     absl::StrCat(p.Describe(part_role, static_cast<int>(i)), " is not a part of ",
                                  whole.Describe(whole_role, 0), " along axis ", ax));
    }
    along += p.shape->dim(ax);
    layout.chunks.push_back(static_cast<size_t>(p.shape->dim(ax) * inner) * elem);
    layout.row += layout.chunks.back();
  }
  if (along != shape.dim(ax)) {
    return OpError(op, absl::StrCat("the parts add up to ", along, " along axis ", ax, ", not ",
                                    shape.dim(ax)));
  }
  return layout;
}

}  // namespace sluice::ops::internal
