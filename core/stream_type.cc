#include "core/stream_type.h"

#include "absl/strings/str_cat.h"

namespace sluice {

absl::string_view StreamTypeName(StreamType type) {
  switch (type) {
    case StreamType::kCompute:
      return "compute";
    case StreamType::kHost2Device:
      return "h2d";
    case StreamType::kDevice2Host:
      return "d2h";
    case StreamType::kCcl:
      return "ccl";
    case StreamType::kBarrier:
      return "barrier";
    case StreamType::kCriticalSection:
      return "critical_section";
    case StreamType::kPinnedCompute:
      return "pinned_compute";
    case StreamType::kLazyJobLauncher:
      return "lazy_job_launcher";
  }
  return "invalid";
}

absl::StatusOr<StreamType> ParseStreamType(absl::string_view name) {
  for (int i = 0; i < kNumStreamTypes; ++i) {
    const auto type = static_cast<StreamType>(i);
    if (StreamTypeName(type) == name) return type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown stream type '", name,
                   "' (expected compute, h2d, d2h, ccl, barrier, critical_section, pinned_compute "
                   "or lazy_job_launcher)"));
}

}  // namespace sluice
