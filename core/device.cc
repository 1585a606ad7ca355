#include "core/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice {

absl::string_view DeviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kSim:
      return "sim";
    case DeviceType::kCuda:
      return "cuda";
  }
  return "invalid";
}

absl::StatusOr<DeviceType> ParseDeviceType(absl::string_view name) {
  if (name == "cpu") return DeviceType::kCpu;
  if (name == "sim") return DeviceType::kSim;
  if (name == "cuda") return DeviceType::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device type '", name, "' (expected cpu, sim or cuda)"));
}

absl::StatusOr<Device> Device::Parse(absl::string_view text) {
  const size_t colon = text.find(':');
  const absl::string_view type_name = text.substr(0, colon);
  absl::StatusOr<DeviceType> type = ParseDeviceType(type_name);
  if (!type.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid device '", text, "': unknown type '",
                                                   type_name, "' (expected cpu, sim:N or cuda:N)"));
  }
  int index = 0;
  if (colon != absl::string_view::npos) {
    const absl::string_view digits = text.substr(colon + 1);
    const bool all_digits = !digits.empty() && digits.size() <= 3 &&
                            digits.find_first_not_of("0123456789") == absl::string_view::npos;
    if (!all_digits || !absl::SimpleAtoi(digits, &index)) {
      return absl::InvalidArgumentError(absl::StrCat("invalid device '", text, "': index '", digits,
                                                     "' is not a non-negative integer"));
    }
  }
  if (index > kMaxIndex) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid device '", text, "': index ", index, " exceeds ", kMaxIndex));
  }
  if (*type == DeviceType::kCpu && index != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid device '", text, "': the host is cpu:0 only"));
  }
  return Device(*type, index);
}

std::string Device::ToString() const {
  if (type_ == DeviceType::kCpu) return "cpu";
  return absl::StrCat(DeviceTypeName(type_), ":", index_);
}

}  // namespace sluice
