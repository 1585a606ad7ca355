// Device: which piece of hardware (or emulation of it) a tensor or stream lives on.
// A plain value: (DeviceType, index), parsed from strings such as "cpu", "sim:1", "cuda:0".
#ifndef SLUICE_CORE_DEVICE_H_
#define SLUICE_CORE_DEVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

enum class DeviceType : uint8_t {
  kCpu,   // the host; synchronous
  kSim,   // emulated accelerator: asynchronous streams on host threads
  kCuda,  // an NVIDIA GPU through the CUDA runtime
};
inline constexpr int kNumDeviceTypes = 3;

absl::string_view DeviceTypeName(DeviceType type);  // "cpu", "sim", "cuda"
absl::StatusOr<DeviceType> ParseDeviceType(absl::string_view name);

// Value type; thread-compatible.
class Device {
 public:
  // Device indices above this are rejected at parse time.
  static constexpr int kMaxIndex = 63;

  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}
  static constexpr Device Cpu() { return Device(DeviceType::kCpu, 0); }

  // Parses "cpu", "cpu:0", "sim", "sim:3", "cuda:1". A missing index means 0. The error
  // names the string and what was expected. Only cpu:0 exists for the host.
  static absl::StatusOr<Device> Parse(absl::string_view text);

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  // True for devices whose streams run asynchronously to the host (sim, cuda).
  bool IsAsync() const { return type_ != DeviceType::kCpu; }
  std::string ToString() const;  // "cpu", "sim:1"

  friend constexpr bool operator==(Device a, Device b) {
    return a.type_ == b.type_ && a.index_ == b.index_;
  }
  friend constexpr bool operator!=(Device a, Device b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, Device d) {
    return H::combine(std::move(h), d.type_, d.index_);
  }

 private:
  DeviceType type_ = DeviceType::kCpu;
  int index_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_CORE_DEVICE_H_
