#include "core/shape.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/decimal.h"
#include "core/status.h"

namespace sluice {

absl::StatusOr<Shape> Shape::Make(absl::Span<const int64_t> dims) {
  SLUICE_RETURN_IF_ERROR(Check(dims));
  return Shape(dims);
}

absl::Status Shape::Check(absl::Span<const int64_t> dims) {
  int64_t count = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape [", absl::StrJoin(dims, ", "), "] has negative dimension ", i));
    }
    if (dims[i] == 0) continue;  // the product of the others must fit too, as in NumPy
    if (count > std::numeric_limits<int64_t>::max() / dims[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape [", absl::StrJoin(dims, ", "), "] has too many elements"));
    }
    count *= dims[i];
  }
  return absl::OkStatus();
}

Shape::Dims Shape::Strides() const {
  Dims strides(dims_.size());
  int64_t s = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims_[i];
  }
  return strides;
}

std::string Shape::ToString() const { return absl::StrCat("[", absl::StrJoin(dims_, ", "), "]"); }

absl::StatusOr<Shape> Shape::Parse(absl::string_view text) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad shape '", text, "': ", why));
  };
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return bad("want [D, D, ...], or [] for a scalar");
  }
  const absl::string_view body = text.substr(1, text.size() - 2);
  Dims dims;
  if (!body.empty()) {
    for (absl::string_view item : absl::StrSplit(body, ',')) {
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      int64_t d;
      if (!ParseDecimal(item, &d) || d < 0) {
        return bad(absl::StrCat("dimension '", item, "' is not a non-negative integer"));
      }
      dims.push_back(d);
    }
  }
  absl::StatusOr<Shape> shape = Make(dims);
  if (!shape.ok()) return bad(shape.status().message());
  return shape;
}

absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  Shape::Dims out(rank);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i;
    const int ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a.dim(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim(ib) : 1;
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes ", a.ToString(), " and ", b.ToString(),
                                                     " cannot broadcast: dimension ", i, " is ", da,
                                                     " vs ", db));
    }
    out[i] = da == 1 ? db : da;
  }
  return Shape(absl::MakeConstSpan(out));
}

Shape::Dims BroadcastStrides(const Shape& from, const Shape& to) {
  SLUICE_CHECK(from.rank() <= to.rank());
  const Shape::Dims own = from.Strides();
  Shape::Dims strides(to.rank(), 0);
  const int offset = to.rank() - from.rank();
  for (int i = 0; i < from.rank(); ++i) {
    strides[offset + i] = from.dim(i) == 1 && to.dim(offset + i) != 1 ? 0 : own[i];
  }
  return strides;
}

}  // namespace sluice
