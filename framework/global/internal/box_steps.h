// The steps of a layout conversion (boxing.h), written once over an emitter, so that eager
// boxing (ops run now on tensors) and static boxing (ops appended to a program) take the
// same steps. An emitter provides:
//   using Value = ...;                              a tensor or a variable name
//   int Rank(const Value&);
//   StatusOr<Value> Collective(const Value&, string_view op, const std::vector<int>& group);
//       all_reduce(sum) / all_gather / reduce_scatter(sum) along the first axis, over group
//   StatusOr<Value> Transpose(const Value&, std::vector<int64_t> perm);
//   StatusOr<Value> Slice(const Value&, int axis, int64_t parts, int64_t index);
//   StatusOr<Value> ZerosLike(const Value&);
#ifndef SLUICE_FRAMEWORK_GLOBAL_INTERNAL_BOX_STEPS_H_
#define SLUICE_FRAMEWORK_GLOBAL_INTERNAL_BOX_STEPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/status.h"
#include "framework/global/placement.h"
#include "framework/global/sbp.h"
#include "vm/attrs.h"

namespace sluice::global::internal {

// The attributes of a boxing collective (all_reduce(sum), all_gather, reduce_scatter(sum))
// over `group`: both emitters give their ops these.
inline vm::AttrMap BoxingCollectiveAttrs(absl::string_view op, const std::vector<int>& group) {
  vm::AttrMap attrs;
  attrs.Set("ranks", std::vector<int64_t>(group.begin(), group.end()));
  if (op != "all_reduce") attrs.Set("nranks", static_cast<int64_t>(group.size()));
  if (op != "all_gather") attrs.Set("reduce", std::string("sum"));
  return attrs;
}

// perm moving axis `k` to the front, and its inverse.
inline std::vector<int64_t> AxisToFront(int rank, int k) {
  std::vector<int64_t> perm = {k};
  for (int a = 0; a < rank; ++a) {
    if (a != k) perm.push_back(a);
  }
  return perm;
}
inline std::vector<int64_t> AxisFromFront(int rank, int k) {
  std::vector<int64_t> perm;
  for (int a = 1; a <= k; ++a) perm.push_back(a);
  perm.push_back(0);
  for (int a = k + 1; a < rank; ++a) perm.push_back(a);
  return perm;
}

// all_gather or reduce_scatter along tensor axis `k`.
template <typename Emit>
absl::StatusOr<typename Emit::Value> AlongAxis(Emit& emit, const typename Emit::Value& x, int k,
                                               absl::string_view op,
                                               const std::vector<int>& group) {
  using Value = typename Emit::Value;
  if (k == 0) return emit.Collective(x, op, group);
  const int rank = emit.Rank(x);
  SLUICE_ASSIGN_OR_RETURN(Value front, emit.Transpose(x, AxisToFront(rank, k)));
  SLUICE_ASSIGN_OR_RETURN(Value moved, emit.Collective(front, op, group));
  return emit.Transpose(moved, AxisFromFront(rank, k));
}

// One mesh axis's conversion (`coord`: this rank's coordinate along it).
template <typename Emit>
absl::StatusOr<typename Emit::Value> ConvertAxis(Emit& emit, const typename Emit::Value& x,
                                                 const Sbp& from, const Sbp& to,
                                                 const std::vector<int>& group, int64_t coord) {
  using Value = typename Emit::Value;
  if (from == to) return x;
  if (from.is_partial_sum()) {
    if (to.is_broadcast()) return emit.Collective(x, "all_reduce", group);
    return AlongAxis(emit, x, to.axis, "reduce_scatter", group);
  }
  if (from.is_broadcast()) {
    if (to.is_split()) {
      const int64_t parts = static_cast<int64_t>(group.size());
      if (parts == 1) return x;
      return emit.Slice(x, to.axis, parts, coord);
    }
    if (coord == 0) return x;  // to P: one rank keeps the value
    return emit.ZerosLike(x);
  }
  SLUICE_ASSIGN_OR_RETURN(Value whole, AlongAxis(emit, x, from.axis, "all_gather", group));
  return ConvertAxis(emit, whole, Sbp::Broadcast(), to, group, coord);
}

// The whole conversion of parallel id `id`'s part from `from` to `to`: every split axis
// gathered first (inner mesh axes first), then each axis converted outer first.
template <typename Emit>
absl::StatusOr<typename Emit::Value> BoxSteps(Emit& emit, typename Emit::Value local,
                                              const Placement& placement, int id, const NdSbp& from,
                                              const NdSbp& to) {
  if (from == to) return local;
  const std::vector<int64_t> coords = placement.Coordinates(id);
  NdSbp current = from;
  for (int d = placement.ndim() - 1; d >= 0; --d) {
    if (!current[d].is_split()) continue;
    SLUICE_ASSIGN_OR_RETURN(local, ConvertAxis(emit, local, current[d], Sbp::Broadcast(),
                                               placement.AxisGroup(id, d), coords[d]));
    current[d] = Sbp::Broadcast();
  }
  for (int d = 0; d < placement.ndim(); ++d) {
    if (current[d] == to[d]) continue;
    SLUICE_ASSIGN_OR_RETURN(
        local, ConvertAxis(emit, local, current[d], to[d], placement.AxisGroup(id, d), coords[d]));
  }
  return local;
}

}  // namespace sluice::global::internal

#endif  // SLUICE_FRAMEWORK_GLOBAL_INTERNAL_BOX_STEPS_H_
