#include "ep/ccl/internal/local_communicator.h"

#include <cstring>

#include "core/status.h"
#include "ep/ccl/internal/call_checks.h"
#include "ep/device.h"
#include "ep/stream.h"

namespace sluice::ep::ccl::internal {

absl::Status LocalCommunicator::Run(const CollectiveCall& call, Stream* stream) {
  SLUICE_RETURN_IF_ERROR(ValidateCall(call, /*rank=*/0, /*size=*/1));
  // With one rank a send or recv has no peer: ValidateCall refused it above.
  const size_t bytes = static_cast<size_t>(call.count) * SizeOf(call.dtype);
  if (bytes == 0 || call.send == call.recv) return absl::OkStatus();
  if (host_memory_) {
    std::memcpy(call.recv, call.send, bytes);
    return absl::OkStatus();
  }
  return stream->Memcpy(call.recv, call.send, bytes, CopyKind::kDeviceToDevice);
}

absl::StatusOr<std::unique_ptr<Communicator>> LocalCommunicator::Split(
    absl::Span<const int> group) {
  SLUICE_RETURN_IF_ERROR(ValidateGroup(group, /*rank=*/0, /*size=*/1));
  return std::make_unique<LocalCommunicator>(host_memory_);
}

}  // namespace sluice::ep::ccl::internal
