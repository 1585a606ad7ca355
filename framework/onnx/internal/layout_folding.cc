// Folds of the ops that move elements, and the host helpers of constant folding
// (host_fold.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/onnx/internal/host_fold.h"
#include "framework/onnx/internal/mapper_util.h"

namespace sluice::framework::onnx::internal {
namespace {

// The output dimensions of Reshape, Squeeze, Unsqueeze and Identity, which keep the bytes.
absl::StatusOr<std::vector<int64_t>> ReshapedDims(NodeContext& ctx) {
  const std::string& op = ctx.node().op_type();
  const auto dims = FoldInput(ctx, 0).shape.dims();
  const auto rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> out(dims.begin(), dims.end());
  if (op == "Identity") return out;
  std::vector<int64_t> given;
  const bool from_input = op == "Reshape" || ctx.opset() >= 13;
  const bool present = from_input ? ctx.HasInput(1) : ctx.HasAttr("axes");
  if (from_input && present) {
    SLUICE_ASSIGN_OR_RETURN(given, FoldInts(ctx, FoldInput(ctx, 1), "input 1"));
  } else if (present) {
    SLUICE_ASSIGN_OR_RETURN(given, ctx.IntsAttr("axes", {}));
  }
  if (op == "Reshape") {
    if (!present) return ctx.Error("the shape is required");
    SLUICE_ASSIGN_OR_RETURN(bool allowzero, ctx.FlagAttr("allowzero", false));
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < given.size(); ++i) {
      if (given[i] == 0 && allowzero == 0) {
        if (static_cast<int64_t>(i) >= rank) return ctx.Error("a 0 beyond the input's rank");
        given[i] = dims[i];
      }
      if (given[i] == -1 && infer < 0) {
        infer = static_cast<int64_t>(i);
        continue;
      }
      if (given[i] < 0) return ctx.Error("a negative dimension in the shape");
      if (given[i] != 0 && known > INT64_MAX / given[i]) return ctx.Error("the shape overflows");
      known *= given[i];
    }
    const int64_t total = DimProduct(dims, 0, rank);
    if (infer >= 0) {
      if (known == 0) return ctx.Error("cannot infer -1 beside a 0 dimension");
      given[infer] = total / known;
    }
    if (DimProduct(given, 0, static_cast<int64_t>(given.size())) != total) {
      return ctx.Error("the shape does not hold the input's elements");
    }
    return given;
  }
  const bool squeeze = op == "Squeeze";
  if (!squeeze && !present) return ctx.Error("axes are required");
  const int64_t axes_rank = squeeze ? rank : rank + static_cast<int64_t>(given.size());
  std::vector<bool> listed(static_cast<size_t>(axes_rank), false);
  for (int64_t axis : given) {
    SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, axes_rank));
    if (listed[axis]) return ctx.Error("the axes repeat an axis");
    listed[axis] = true;
  }
  out.clear();
  for (int64_t i = 0, next = 0; i < axes_rank; ++i) {
    if (!squeeze) {
      out.push_back(listed[i] ? 1 : dims[next++]);
    } else if (listed[i] && dims[i] != 1) {
      return ctx.Error(absl::StrCat("axis ", i, " has size ", dims[i], ", not 1"));
    } else if (!listed[i] && (present || dims[i] != 1)) {
      out.push_back(dims[i]);
    }
  }
  return out;
}

}  // namespace

// A zero-filled tensor of `dtype` and `shape`.
HostTensor NewTensor(DataType dtype, const Shape& shape) {
  HostTensor t{dtype, shape, {}};
  t.bytes.resize(static_cast<size_t>(shape.NumElements()) * SizeOf(dtype));
  return t;
}

// Whether every present input of the node is a constant.
bool AllInputsConstant(NodeContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.HasInput(i) && ctx.state().Constant(ctx.node().input(i)) == nullptr) return false;
  }
  return true;
}

// The constant value of input i; requires AllInputsConstant and a present input.
const HostTensor& FoldInput(NodeContext& ctx, int i) {
  return *ctx.state().Constant(ctx.node().input(i));
}

// `dims` as a valid Shape of at most `limit` elements; InvalidArgument naming the node.
absl::StatusOr<Shape> FoldedShape(const NodeContext& ctx, absl::Span<const int64_t> dims,
                                  int64_t limit) {
  absl::StatusOr<Shape> shape = Shape::Make(dims);
  if (!shape.ok()) return ctx.Error(shape.status().message());
  if (shape->NumElements() > limit) {
    return ctx.Error(absl::StrCat("folding it would make ", shape->NumElements(),
                                  " elements, more than the ", limit, " this importer folds"));
  }
  return *std::move(shape);
}

// The values of an INT32 or INT64 tensor.
absl::StatusOr<std::vector<int64_t>> FoldInts(const NodeContext& ctx, const HostTensor& t,
                                              absl::string_view what) {
  if (t.dtype == DataType::kI64) return t.ToVector<int64_t>();
  if (t.dtype != DataType::kI32) {
    return ctx.Error(absl::StrCat(what, " must hold integers, not ", DataTypeName(t.dtype)));
  }
  std::vector<int64_t> ints;
  for (int32_t v : t.ToVector<int32_t>()) ints.push_back(v);
  return ints;
}

// For each element of `to` (a broadcast of `from`), the index of the element of `from` it
// reads.
std::vector<int64_t> BroadcastIndex(const Shape& from, const Shape& to) {
  const Shape::Dims strides = BroadcastStrides(from, to);
  const int rank = to.rank();
  std::vector<int64_t> index(static_cast<size_t>(to.NumElements()));
  std::vector<int64_t> counter(rank, 0);
  int64_t src = 0;
  for (int64_t& out : index) {
    out = src;
    for (int d = rank - 1; d >= 0; --d) {
      if (++counter[d] < to.dim(d)) {
        src += strides[d];
        break;
      }
      src -= strides[d] * (to.dim(d) - 1);
      counter[d] = 0;
    }
  }
  return index;
}

// Copies element `si` of `src` to element `di` of `dst` (one dtype).
void CopyElement(const HostTensor& src, int64_t si, HostTensor& dst, int64_t di) {
  const size_t size = SizeOf(src.dtype);
  std::memcpy(dst.bytes.data() + di * size, src.bytes.data() + si * size, size);
}

// The product of dims[from, to).
int64_t DimProduct(absl::Span<const int64_t> dims, int64_t from, int64_t to) {
  int64_t n = 1;
  for (int64_t i = from; i < to; ++i) n *= dims[i];
  return n;
}

// The input's bytes under the output shape of Reshape, Squeeze, Unsqueeze or Identity.
absl::StatusOr<HostTensor> FoldReshapeLike(NodeContext& ctx, int64_t limit) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReshapedDims(ctx));
  HostTensor out = FoldInput(ctx, 0);
  SLUICE_ASSIGN_OR_RETURN(out.shape, FoldedShape(ctx, dims, limit));
  return out;
}

// The inputs joined along attribute `axis` (one dtype and rank; equal off the axis).
absl::StatusOr<HostTensor> FoldConcat(NodeContext& ctx, int64_t limit) {
  if (ctx.num_inputs() == 0 || !ctx.HasAttr("axis")) return ctx.Error("needs inputs and axis");
  const HostTensor& first = FoldInput(ctx, 0);
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, first.shape.rank()));
  std::vector<int64_t> dims(first.shape.dims().begin(), first.shape.dims().end());
  dims[axis] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.HasInput(i)) return ctx.Error("an absent input");
    const HostTensor& x = FoldInput(ctx, i);
    if (x.dtype != first.dtype || x.shape.rank() != first.shape.rank()) {
      return ctx.Error("the inputs' data types or ranks differ");
    }
    for (int d = 0; d < x.shape.rank(); ++d) {
      if (d != axis && x.shape.dim(d) != first.shape.dim(d)) {
        return ctx.Error("the inputs' shapes differ off the axis");
      }
    }
    dims[axis] += x.shape.dim(static_cast<int>(axis));
  }
  SLUICE_ASSIGN_OR_RETURN(Shape shape, FoldedShape(ctx, dims, limit));
  HostTensor out = NewTensor(first.dtype, shape);
  const int64_t outer = DimProduct(dims, 0, axis);
  const size_t inner_bytes = DimProduct(dims, axis + 1, dims.size()) * SizeOf(first.dtype);
  uint8_t* dst = out.bytes.data();
  for (int64_t o = 0; o < outer; ++o) {
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const HostTensor& x = FoldInput(ctx, i);
      const size_t chunk = x.shape.dim(static_cast<int>(axis)) * inner_bytes;
      if (chunk > 0) std::memcpy(dst, x.bytes.data() + o * chunk, chunk);
      dst += chunk;
    }
  }
  return out;
}

// data's slices along `axis` at the indices (negative ones from the end), in indices' shape.
absl::StatusOr<HostTensor> FoldGather(NodeContext& ctx, int64_t limit) {
  const HostTensor& data = FoldInput(ctx, 0);
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> indices,
                          FoldInts(ctx, FoldInput(ctx, 1), "the indices"));
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, data.shape.rank()));
  const auto d = data.shape.dims();
  const int64_t size = d[axis];
  std::vector<int64_t> dims(d.begin(), d.begin() + axis);
  for (int64_t v : FoldInput(ctx, 1).shape.dims()) dims.push_back(v);
  dims.insert(dims.end(), d.begin() + axis + 1, d.end());
  SLUICE_ASSIGN_OR_RETURN(Shape shape, FoldedShape(ctx, dims, limit));
  for (int64_t& index : indices) {
    if (index < -size || index >= size) {
      return ctx.Error(absl::StrCat("index ", index, " is out of range for size ", size));
    }
    if (index < 0) index += size;
  }
  HostTensor out = NewTensor(data.dtype, shape);
  const int64_t outer = DimProduct(d, 0, axis);
  const size_t inner_bytes = DimProduct(d, axis + 1, d.size()) * SizeOf(data.dtype);
  uint8_t* dst = out.bytes.data();
  for (int64_t o = 0; o < outer; ++o) {
    for (const int64_t index : indices) {
      if (inner_bytes > 0) {
        std::memcpy(dst, data.bytes.data() + (o * size + index) * inner_bytes, inner_bytes);
      }
      dst += inner_bytes;
    }
  }
  return out;
}

// data[start:end:step] per axis, clamped as ONNX clamps; inputs from opset 10, before it
// the attributes starts, ends and axes.
absl::StatusOr<HostTensor> FoldSlice(NodeContext& ctx, int64_t limit) {
  const HostTensor& data = FoldInput(ctx, 0);
  const int64_t rank = data.shape.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    SLUICE_ASSIGN_OR_RETURN(starts, ctx.IntsAttr("starts", {}));
    SLUICE_ASSIGN_OR_RETURN(ends, ctx.IntsAttr("ends", {}));
    SLUICE_ASSIGN_OR_RETURN(axes, ctx.IntsAttr("axes", {}));
  } else {
    SLUICE_ASSIGN_OR_RETURN(starts, FoldInts(ctx, FoldInput(ctx, 1), "starts"));
    SLUICE_ASSIGN_OR_RETURN(ends, FoldInts(ctx, FoldInput(ctx, 2), "ends"));
    if (ctx.HasInput(3)) {
      SLUICE_ASSIGN_OR_RETURN(axes, FoldInts(ctx, FoldInput(ctx, 3), "axes"));
    }
    if (ctx.HasInput(4)) {
      SLUICE_ASSIGN_OR_RETURN(steps, FoldInts(ctx, FoldInput(ctx, 4), "steps"));
    }
  }
  if (axes.empty() && !(ctx.opset() >= 10 ? ctx.HasInput(3) : ctx.HasAttr("axes"))) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return ctx.Error("starts, ends, axes and steps differ in length");
  }
  // Per axis: the first index read and the step; by default every element.
  std::vector<int64_t> first(rank, 0), step(rank, 1);
  std::vector<int64_t> dims(data.shape.dims().begin(), data.shape.dims().end());
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axes[i], rank));
    if (seen[axis]) return ctx.Error("the axes repeat an axis");
    seen[axis] = true;
    const int64_t dim = data.shape.dim(static_cast<int>(axis));
    const int64_t s = steps[i];
    if (s == 0) return ctx.Error("a step is 0");
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    // ONNX's clamping: [0, dim] going forward, [0, dim - 1] and [-1, dim - 1] backward.
    start = std::clamp<int64_t>(start, 0, s > 0 ? dim : std::max<int64_t>(dim - 1, 0));
    end = std::clamp<int64_t>(end, s > 0 ? 0 : -1, s > 0 ? dim : dim - 1);
    const int64_t span = s > 0 ? end - start : start - end;
    const int64_t stride = s > 0 ? s : (s == INT64_MIN ? INT64_MAX : -s);
    dims[axis] = span <= 0 || dim == 0 ? 0 : (span - 1) / stride + 1;
    first[axis] = start;
    step[axis] = s;
  }
  SLUICE_ASSIGN_OR_RETURN(Shape shape, FoldedShape(ctx, dims, limit));
  HostTensor out = NewTensor(data.dtype, shape);
  const Shape::Dims strides = data.shape.Strides();
  std::vector<int64_t> counter(rank, 0);
  for (int64_t i = 0; i < shape.NumElements(); ++i) {
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d) src += (first[d] + counter[d] * step[d]) * strides[d];
    CopyElement(data, src, out, i);
    for (int64_t d = rank - 1; d >= 0 && ++counter[d] == dims[d]; --d) counter[d] = 0;
  }
  return out;
}

// Where: X where the condition holds, else Y; Expand: the input broadcast with the shape.
absl::StatusOr<HostTensor> FoldWhereOrExpand(NodeContext& ctx, int64_t limit) {
  const bool where = ctx.node().op_type() == "Where";
  const HostTensor& x = FoldInput(ctx, where ? 1 : 0);
  std::vector<int64_t> dims;  // Where: the condition's shape; Expand: the shape input
  if (where) {
    const HostTensor& c = FoldInput(ctx, 0);
    if (c.dtype != DataType::kBool || x.dtype != FoldInput(ctx, 2).dtype) {
      return ctx.Error("the condition must be BOOL and X and Y of one data type");
    }
    dims.assign(c.shape.dims().begin(), c.shape.dims().end());
  } else {
    SLUICE_ASSIGN_OR_RETURN(dims, FoldInts(ctx, FoldInput(ctx, 1), "the shape"));
  }
  absl::StatusOr<Shape> target = Shape::Make(dims);
  if (target.ok()) target = BroadcastShapes(x.shape, *target);
  if (target.ok() && where) target = BroadcastShapes(*target, FoldInput(ctx, 2).shape);
  if (!target.ok()) return ctx.Error(target.status().message());
  SLUICE_ASSIGN_OR_RETURN(Shape shape, FoldedShape(ctx, target->dims(), limit));
  HostTensor out = NewTensor(x.dtype, shape);
  const std::vector<int64_t> ix = BroadcastIndex(x.shape, shape);
  if (!where) {
    for (size_t i = 0; i < ix.size(); ++i) CopyElement(x, ix[i], out, i);
    return out;
  }
  const std::vector<int64_t> ic = BroadcastIndex(FoldInput(ctx, 0).shape, shape);
  const std::vector<int64_t> iy = BroadcastIndex(FoldInput(ctx, 2).shape, shape);
  for (size_t i = 0; i < ix.size(); ++i) {
    if (HostLoad<bool>(FoldInput(ctx, 0), ic[i])) {
      CopyElement(x, ix[i], out, i);
    } else {
      CopyElement(FoldInput(ctx, 2), iy[i], out, i);
    }
  }
  return out;
}

}  // namespace sluice::framework::onnx::internal
