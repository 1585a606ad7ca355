// Host computation for constant folding at import (constant_folding.cc,
// layout_folding.cc): element access over HostTensor bytes, broadcasting, and the folds of
// the ops that only move elements. Private to framework/onnx/.
//
// Functions only; thread-compatible (a NodeContext is one import's).
#ifndef SLUICE_FRAMEWORK_ONNX_INTERNAL_HOST_FOLD_H_
#define SLUICE_FRAMEWORK_ONNX_INTERNAL_HOST_FOLD_H_

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/onnx/internal/node_context.h"

namespace sluice::framework::onnx::internal {

// Element i of `t` as T (T matches t's dtype).
template <typename T>
T HostLoad(const HostTensor& t, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return t.bytes[i] != 0;
  } else {
    T v;
    std::memcpy(&v, t.bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }
}

// Stores `v` as element i of `t` (T matches t's dtype).
template <typename T>
void HostStore(HostTensor& t, int64_t i, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    t.bytes[i] = v ? 1 : 0;
  } else {
    std::memcpy(t.bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
}

// Calls f(T{}) with T the C++ type of `dtype`.
template <typename F>
decltype(auto) DispatchDtype(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kF32:
      return f(float{});
    case DataType::kF64:
      return f(double{});
    case DataType::kI32:
      return f(int32_t{});
    case DataType::kI64:
      return f(int64_t{});
    case DataType::kBool:
      break;
  }
  return f(bool{});
}

// A zero-filled tensor of `dtype` and `shape`.
HostTensor NewTensor(DataType dtype, const Shape& shape);

// Whether every present input of the node is a constant.
bool AllInputsConstant(NodeContext& ctx);

// The constant value of input i; requires AllInputsConstant and a present input.
const HostTensor& FoldInput(NodeContext& ctx, int i);

// `dims` as a valid Shape of at most `limit` elements; InvalidArgument naming the node.
absl::StatusOr<Shape> FoldedShape(const NodeContext& ctx, absl::Span<const int64_t> dims,
                                  int64_t limit);

// The values of an INT32 or INT64 tensor.
absl::StatusOr<std::vector<int64_t>> FoldInts(const NodeContext& ctx, const HostTensor& t,
                                              absl::string_view what);

// For each element of `to` (a broadcast of `from`), the index of the element of `from` it
// reads.
std::vector<int64_t> BroadcastIndex(const Shape& from, const Shape& to);

// Copies element `si` of `src` to element `di` of `dst` (one dtype).
void CopyElement(const HostTensor& src, int64_t si, HostTensor& dst, int64_t di);

// The product of dims[from, to).
int64_t DimProduct(absl::Span<const int64_t> dims, int64_t from, int64_t to);

// The folds of the ops that move elements, from the node's constant inputs (every present
// input must be one), at most `limit` output elements; InvalidArgument naming the node when
// its inputs or attributes are invalid. Reshape, Squeeze, Unsqueeze and Identity keep the
// bytes; Where and Expand broadcast.
absl::StatusOr<HostTensor> FoldReshapeLike(NodeContext& ctx, int64_t limit);
absl::StatusOr<HostTensor> FoldConcat(NodeContext& ctx, int64_t limit);
absl::StatusOr<HostTensor> FoldGather(NodeContext& ctx, int64_t limit);
absl::StatusOr<HostTensor> FoldSlice(NodeContext& ctx, int64_t limit);
absl::StatusOr<HostTensor> FoldWhereOrExpand(NodeContext& ctx, int64_t limit);

}  // namespace sluice::framework::onnx::internal

#endif  // SLUICE_FRAMEWORK_ONNX_INTERNAL_HOST_FOLD_H_
