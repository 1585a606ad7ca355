#include "ops/internal/conv_geometry.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/status.h"

namespace sluice::ops::internal::conv {
namespace {

std::string Describe(absl::string_view name, const TensorMeta& meta) {
  return absl::StrCat(name, " ", DataTypeName(meta.dtype), meta.shape.ToString());
}

absl::Status Invalid(absl::string_view message) { return absl::InvalidArgumentError(message); }

// Attribute `name`: `count` ints, each at least `min`; an empty list is `fallback` when that
// is not empty.
absl::StatusOr<std::vector<int64_t>> IntsAttr(const vm::AttrMap& attrs, absl::string_view name,
                                              size_t count, int64_t min,
                                              const std::vector<int64_t>& fallback = {}) {
  absl::StatusOr<std::vector<int64_t>> value = attrs.GetInts(name);
  if (!value.ok()) return Invalid(value.status().message());
  if (value->empty() && !fallback.empty()) return fallback;
  bool ok = value->size() == count;
  for (int64_t v : *value) ok = ok && v >= min;
  if (!ok) {
    return Invalid(absl::StrCat("attribute '", name, "' must hold ", count,
                                min > 0 ? " positive" : " non-negative", " ints, got [",
                                absl::StrJoin(*value, ", "), "]"));
  }
  return value;
}

absl::StatusOr<bool> FlagAttr(const vm::AttrMap& attrs, absl::string_view name) {
  absl::StatusOr<int64_t> value = attrs.GetInt(name);
  if (!value.ok()) return Invalid(value.status().message());
  if (*value != 0 && *value != 1) {
    return Invalid(absl::StrCat("attribute '", name, "' must be 0 or 1, got ", *value));
  }
  return *value == 1;
}

absl::Status CheckImage(const TensorMeta& x) {
  if (!IsFloating(x.dtype)) {
    return Invalid(absl::StrCat(Describe("X", x), " must be f32 or f64"));
  }
  if (x.shape.rank() != 4) {
    return Invalid(absl::StrCat(Describe("X", x), " must have rank 4 ([N, C, H, W])"));
  }
  return absl::OkStatus();
}

// Fills the window axes from the attribute lists (strides, pads, dilations) and the kernel.
void SetAxes(const Shape& x, const std::vector<int64_t>& kernel,
             const std::vector<int64_t>& strides, const std::vector<int64_t>& pads,
             const std::vector<int64_t>& dilations, WindowAxis* h, WindowAxis* w) {
  WindowAxis* axes[2] = {h, w};
  for (int i = 0; i < 2; ++i) {
    WindowAxis& a = *axes[i];
    a.in = x.dim(2 + i);
    a.kernel = kernel[i];
    a.stride = strides[i];
    a.pad_begin = pads[i];
    a.pad_end = pads[2 + i];
    a.dilation = dilations[i];
  }
}

int64_t Extent(const WindowAxis& a) { return a.dilation * (a.kernel - 1) + 1; }

// The output sizes, or an error naming `x` (and `whose` kernel) when the dilated kernel does
// not fit the padded input.
absl::Status SetOutputSizes(const TensorMeta& x, absl::string_view whose, bool ceil_mode,
                            WindowAxis* h, WindowAxis* w) {
  WindowAxis* axes[2] = {h, w};
  for (WindowAxis* a : axes) {
    const int64_t span = a->in + a->pad_begin + a->pad_end - Extent(*a);
    if (span < 0) {
      return Invalid(
          absl::StrCat(Describe("X", x), " padded to [", h->in + h->pad_begin + h->pad_end, ", ",
                       w->in + w->pad_begin + w->pad_end, "] is smaller than ", whose,
                       " dilated kernel [", Extent(*h), ", ", Extent(*w), "] (kernel [", h->kernel,
                       ", ", w->kernel, "], dilations [", h->dilation, ", ", w->dilation, "])"));
    }
    a->out = (ceil_mode ? span + a->stride - 1 : span) / a->stride + 1;
    // ceil_mode never adds a window that starts in the end padding (PyTorch's rule, ONNX's).
    if (ceil_mode && (a->out - 1) * a->stride >= a->in + a->pad_begin) --a->out;
  }
  return absl::OkStatus();
}

}  // namespace

int64_t WindowAxis::Taps(int64_t o, bool include_pad) const {
  const int64_t lo = include_pad ? -pad_begin : 0;
  const int64_t hi = include_pad ? in + pad_end : in;
  const int64_t start = Start(o);
  int64_t taps = 0;
  for (int64_t t = 0; t < kernel; ++t) {
    const int64_t i = start + t * dilation;
    taps += i >= lo && i < hi ? 1 : 0;
  }
  return taps;
}

absl::StatusOr<Conv2dDims> Conv2dShapes(const TensorMeta& x, const TensorMeta& w,
                                        const vm::AttrMap& attrs) {
  SLUICE_RETURN_IF_ERROR(CheckImage(x));
  if (w.dtype != x.dtype || w.shape.rank() != 4) {
    return Invalid(absl::StrCat(Describe("W", w), " must be ", DataTypeName(x.dtype),
                                " of rank 4 ([M, C / groups, kH, kW]) for ", Describe("X", x)));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> strides, IntsAttr(attrs, "strides", 2, 1));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsAttr(attrs, "pads", 4, 0));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, IntsAttr(attrs, "dilations", 2, 1));
  absl::StatusOr<int64_t> groups = attrs.GetInt("groups");
  if (!groups.ok()) return Invalid(groups.status().message());
  if (*groups < 1)
    return Invalid(absl::StrCat("attribute 'groups' must be positive, got ", *groups));
  Conv2dDims d;
  d.n = x.shape.dim(0);
  d.c = x.shape.dim(1);
  d.m = w.shape.dim(0);
  d.groups = *groups;
  if (d.c % d.groups != 0 || d.m % d.groups != 0) {
    return Invalid(absl::StrCat("groups=", d.groups, " must divide the input channels of ",
                                Describe("X", x), " and the output channels of ",
                                Describe("W", w)));
  }
  if (w.shape.dim(1) != d.c / d.groups) {
    return Invalid(absl::StrCat(Describe("W", w), " must have C / groups = ", d.c / d.groups,
                                " input channels in dim 1 for ", Describe("X", x),
                                " and groups=", d.groups));
  }
  if (w.shape.dim(2) < 1 || w.shape.dim(3) < 1) {
    return Invalid(absl::StrCat(Describe("W", w), " must have a kernel of at least 1 x 1"));
  }
  SetAxes(x.shape, {w.shape.dim(2), w.shape.dim(3)}, strides, pads, dilations, &d.h, &d.w);
  SLUICE_RETURN_IF_ERROR(SetOutputSizes(x, "W's", /*ceil_mode=*/false, &d.h, &d.w));
  d.out = Shape({d.n, d.m, d.h.out, d.w.out});
  return d;
}

absl::StatusOr<Pool2dDims> Pool2dShapes(const TensorMeta& x, const vm::AttrMap& attrs,
                                        bool average) {
  SLUICE_RETURN_IF_ERROR(CheckImage(x));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, IntsAttr(attrs, "kernel", 2, 1));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> strides, IntsAttr(attrs, "strides", 2, 1, kernel));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsAttr(attrs, "pads", 4, 0));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, IntsAttr(attrs, "dilations", 2, 1));
  SLUICE_ASSIGN_OR_RETURN(const bool ceil_mode, FlagAttr(attrs, "ceil_mode"));
  Pool2dDims d;
  if (average) {
    SLUICE_ASSIGN_OR_RETURN(d.count_include_pad, FlagAttr(attrs, "count_include_pad"));
  }
  for (int i = 0; i < 4; ++i) {
    if (pads[i] >= kernel[i % 2]) {
      return Invalid(absl::StrCat("attribute 'pads' [", absl::StrJoin(pads, ", "),
                                  "] must be smaller than the kernel [", kernel[0], ", ", kernel[1],
                                  "] along each axis"));
    }
  }
  d.n = x.shape.dim(0);
  d.c = x.shape.dim(1);
  SetAxes(x.shape, kernel, strides, pads, dilations, &d.h, &d.w);
  SLUICE_RETURN_IF_ERROR(SetOutputSizes(x, "the", ceil_mode, &d.h, &d.w));
  d.out = Shape({d.n, d.c, d.h.out, d.w.out});
  return d;
}

}  // namespace sluice::ops::internal::conv
