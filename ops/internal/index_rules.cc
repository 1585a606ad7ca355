#include "ops/internal/index_rules.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/data_type.h"
#include "core/status.h"

namespace sluice::ops::internal::index {
namespace {

absl::Status Invalid(absl::string_view message) { return absl::InvalidArgumentError(message); }

std::string IntsText(const std::vector<int64_t>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

absl::StatusOr<std::vector<int64_t>> IntsOf(const vm::AttrMap& attrs, absl::string_view name) {
  absl::StatusOr<std::vector<int64_t>> values = attrs.GetInts(name);
  if (!values.ok()) return Invalid(values.status().message());
  return values;
}

// The elements one sliced dim of size `dim` keeps, and the first one, for a start, end and
// step as given (ONNX's rules: negative from the end, then clamped).
struct AxisSlice {
  int64_t first = 0;
  int64_t count = 0;
};
AxisSlice SliceAxis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim == 0) return {};
  // Adding dim to a negative value cannot overflow.
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  const int64_t span = step > 0 ? end - start : start - end;  // |span| <= dim + 1
  if (span <= 0) return {start, 0};
  // |step| as unsigned: -INT64_MIN does not fit an int64_t.
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  return {start, static_cast<int64_t>((static_cast<uint64_t>(span) - 1) / stride + 1)};
}

}  // namespace

std::string Describe(absl::string_view name, const TensorMeta& meta) {
  return absl::StrCat(name, " ", DataTypeName(meta.dtype), meta.shape.ToString());
}

absl::StatusOr<GatherDims> GatherShapes(const TensorMeta& x, const TensorMeta& index,
                                        int64_t axis) {
  if (index.dtype != DataType::kI32 && index.dtype != DataType::kI64) {
    return Invalid(absl::StrCat(Describe("Index", index), " must hold i32 or i64 indices"));
  }
  const int rank = x.shape.rank();
  if (rank == 0) {
    return Invalid(absl::StrCat(Describe("X", x), " is a scalar; gather needs rank >= 1"));
  }
  if (axis < -rank || axis >= rank) {
    return Invalid(absl::StrCat("attribute axis ", axis, " is out of range for ", Describe("X", x),
                                " of rank ", rank));
  }
  GatherDims d;
  d.axis = static_cast<int>(axis < 0 ? axis + rank : axis);
  d.size = x.shape.dim(d.axis);
  d.count = index.shape.NumElements();
  std::vector<int64_t> dims;
  for (int i = 0; i < d.axis; ++i) {
    d.outer *= x.shape.dim(i);
    dims.push_back(x.shape.dim(i));
  }
  for (int64_t v : index.shape.dims()) dims.push_back(v);
  for (int i = d.axis + 1; i < rank; ++i) {
    d.inner *= x.shape.dim(i);
    dims.push_back(x.shape.dim(i));
  }
  absl::StatusOr<Shape> out = Shape::Make(dims);
  if (!out.ok()) {
    return Invalid(absl::StrCat("the output of ", Describe("X", x), " gathered by ",
                                Describe("Index", index), ": ", out.status().message()));
  }
  d.out = *std::move(out);
  return d;
}

std::string BadIndexMessage(int64_t position, int64_t value, int64_t size, int axis) {
  return absl::StrCat("Index[", position, "] = ", value, " is out of range [", -size, ", ", size,
                      ") for axis ", axis, " of X");
}

absl::StatusOr<SliceDims> SliceShapes(const TensorMeta& x, const vm::AttrMap& attrs) {
  SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> starts, IntsOf(attrs, "starts"));
  SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> ends, IntsOf(attrs, "ends"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntsOf(attrs, "axes"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> steps, IntsOf(attrs, "steps"));
  const int rank = x.shape.rank();
  const size_t n = starts.size();
  if (axes.empty()) {
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(n, 1);
  if (ends.size() != n || axes.size() != n || steps.size() != n) {
    return Invalid(absl::StrCat("attributes starts ", IntsText(starts), ", ends ", IntsText(ends),
                                ", axes ", IntsText(axes), " and steps ", IntsText(steps),
                                " must have one length (axes and steps may be empty)"));
  }
  SliceDims d;
  d.first.assign(rank, 0);
  d.step.assign(rank, 1);
  Shape::Dims out(x.shape.dims().begin(), x.shape.dims().end());
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    const int64_t axis = axes[i];
    if (axis < -rank || axis >= rank) {
      return Invalid(absl::StrCat("attribute axes ", IntsText(axes), ": axis ", axis,
                                  " is out of range for ", Describe("X", x), " of rank ", rank));
    }
    const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
    if (seen[a]) {
      return Invalid(absl::StrCat("attribute axes ", IntsText(axes), " names axis ", a, " twice (",
                                  Describe("X", x), ")"));
    }
    seen[a] = true;
    if (steps[i] == 0) {
      return Invalid(
          absl::StrCat("attribute steps ", IntsText(steps), ": the step of axis ", a, " is 0"));
    }
    const AxisSlice s = SliceAxis(x.shape.dim(a), starts[i], ends[i], steps[i]);
    d.first[a] = s.first;
    d.step[a] = steps[i];
    out[a] = s.count;
  }
  d.out = Shape(absl::MakeConstSpan(out));
  return d;
}

absl::StatusOr<Shape> WhereShape(const TensorMeta& cond, const TensorMeta& x, const TensorMeta& y) {
  if (cond.dtype != DataType::kBool) {
    return Invalid(absl::StrCat(Describe("Cond", cond), " must be bool"));
  }
  if (x.dtype != y.dtype) {
    return Invalid(
        absl::StrCat(Describe("X", x), " and ", Describe("Y", y), " must have one dtype"));
  }
  absl::StatusOr<Shape> shape = BroadcastShapes(cond.shape, x.shape);
  if (shape.ok()) shape = BroadcastShapes(*shape, y.shape);
  if (!shape.ok()) {
    return Invalid(absl::StrCat(Describe("Cond", cond), ", ", Describe("X", x), " and ",
                                Describe("Y", y), " do not broadcast: ", shape.status().message()));
  }
  return shape;
}

}  // namespace sluice::ops::internal::index
