// Placement: where a global tensor lives (OneFlow's placement): a device type and the
// ranks of the world that hold its parts, arranged as a 1-D or 2-D mesh (`hierarchy`). A
// rank's index in the placement's rank list is its parallel id; a rank outside the list
// has none, and skips every op on the placement (seed 003, §3.1). Each rank's part lives
// on device 0 of the device type (one device per process, as in OneFlow).
#ifndef SLUICE_FRAMEWORK_GLOBAL_PLACEMENT_H_
#define SLUICE_FRAMEWORK_GLOBAL_PLACEMENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/device.h"

namespace sluice::global {

// Value type; immutable.
class Placement {
 public:
  // `ranks` in mesh order (row-major over `hierarchy`); `hierarchy` empty: 1-D, one axis of
  // ranks.size(). InvalidArgument for no ranks, a repeated or negative rank, a mesh of more
  // than 2 axes, or a hierarchy whose product is not the number of ranks.
  static absl::StatusOr<Placement> Create(DeviceType device_type, std::vector<int> ranks,
                                          std::vector<int64_t> hierarchy = {});
  // "cpu:[0, 1, 2, 3]" (1-D) or "sim:[[0, 1], [2, 3]]" (2-D: each inner list is one row of
  // the mesh, the first axis counting rows). InvalidArgument naming the text.
  static absl::StatusOr<Placement> Parse(absl::string_view text);

  DeviceType device_type() const { return device_type_; }
  // The device a rank's part lives on: device 0 of the type.
  Device device() const { return Device(device_type_, 0); }
  const std::vector<int>& ranks() const { return ranks_; }
  const std::vector<int64_t>& hierarchy() const { return hierarchy_; }
  int ndim() const { return static_cast<int>(hierarchy_.size()); }

  // The index of `rank` in ranks() (its parallel id); nullopt when the placement excludes it.
  std::optional<int> ParallelId(int rank) const;
  // The mesh coordinates of parallel id `id` (one per axis).
  std::vector<int64_t> Coordinates(int id) const;
  // The world ranks that share every mesh coordinate of parallel id `id` except the one
  // along `axis`, in order along `axis`: the group a conversion along that axis talks in.
  std::vector<int> AxisGroup(int id, int axis) const;

  std::string ToString() const;  // as Parse reads it
  friend bool operator==(const Placement& a, const Placement& b) {
    return a.device_type_ == b.device_type_ && a.ranks_ == b.ranks_ && a.hierarchy_ == b.hierarchy_;
  }
  friend bool operator!=(const Placement& a, const Placement& b) { return !(a == b); }

 private:
  Placement(DeviceType device_type, std::vector<int> ranks, std::vector<int64_t> hierarchy)
      : device_type_(device_type), ranks_(std::move(ranks)), hierarchy_(std::move(hierarchy)) {}

  DeviceType device_type_;
  std::vector<int> ranks_;
  std::vector<int64_t> hierarchy_;
};

}  // namespace sluice::global

#endif  // SLUICE_FRAMEWORK_GLOBAL_PLACEMENT_H_
