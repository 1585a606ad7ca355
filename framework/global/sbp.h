// Sbp: how a global tensor's logical value is laid out along one mesh axis of its
// placement (OneFlow's SBP): split along a tensor axis (each rank of the mesh axis holds
// one equal slice, in order), broadcast (each holds all of it) or partial sum (the logical
// value is the sum of the ranks' parts). NdSbp has one entry per mesh axis.
#ifndef SLUICE_FRAMEWORK_GLOBAL_SBP_H_
#define SLUICE_FRAMEWORK_GLOBAL_SBP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::global {

// Value type.
struct Sbp {
  enum class Kind { kSplit, kBroadcast, kPartialSum };
  Kind kind = Kind::kBroadcast;
  int axis = 0;  // kSplit only

  static Sbp Split(int axis) { return Sbp{Kind::kSplit, axis}; }
  static Sbp Broadcast() { return Sbp{Kind::kBroadcast, 0}; }
  static Sbp PartialSum() { return Sbp{Kind::kPartialSum, 0}; }
  bool is_split() const { return kind == Kind::kSplit; }
  bool is_broadcast() const { return kind == Kind::kBroadcast; }
  bool is_partial_sum() const { return kind == Kind::kPartialSum; }

  std::string ToString() const;  // "S(0)", "B", "P"
  // "S(1)", "split(1)", "B", "broadcast", "P", "partial_sum"; InvalidArgument otherwise.
  static absl::StatusOr<Sbp> Parse(absl::string_view text);

  friend bool operator==(const Sbp& a, const Sbp& b) {
    return a.kind == b.kind && (a.kind != Kind::kSplit || a.axis == b.axis);
  }
  friend bool operator!=(const Sbp& a, const Sbp& b) { return !(a == b); }
};

using NdSbp = std::vector<Sbp>;

// Broadcast on each of `ndim` mesh axes: every rank holds the whole tensor.
inline NdSbp AllBroadcast(int64_t ndim) {
  return NdSbp(static_cast<size_t>(ndim), Sbp::Broadcast());
}

std::string NdSbpToString(const NdSbp& sbp);  // "(S(0), B)"
// Comma-separated Sbp items, optionally in parentheses: "S(0), B" or "(P)".
absl::StatusOr<NdSbp> ParseNdSbp(absl::string_view text);

}  // namespace sluice::global

#endif  // SLUICE_FRAMEWORK_GLOBAL_SBP_H_
