// StreamType: the role of a stream on a device. Different roles get separate
// streams so that copies, compute and collectives can overlap.
#ifndef SLUICE_CORE_STREAM_TYPE_H_
#define SLUICE_CORE_STREAM_TYPE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

enum class StreamType : uint8_t {
  kCompute,          // kernels
  kHost2Device,      // copies host -> device
  kDevice2Host,      // copies device -> host
  kCcl,              // collective communication
  kBarrier,          // host-side barriers
  kCriticalSection,  // work that must not overlap anything else on its device
  kPinnedCompute,    // kernels that read/write pinned host memory
  // Launches of whole graphs called from eager code (framework/graph): one instruction per
  // call, whose work is the graph's steps, run in order on this stream.
  kLazyJobLauncher,
};
inline constexpr int kNumStreamTypes = 8;

// "compute", "h2d", "d2h", "ccl", "barrier", "critical_section", "pinned_compute",
// "lazy_job_launcher".
absl::string_view StreamTypeName(StreamType type);
absl::StatusOr<StreamType> ParseStreamType(absl::string_view name);

}  // namespace sluice

#endif  // SLUICE_CORE_STREAM_TYPE_H_
