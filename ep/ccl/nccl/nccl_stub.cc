// A build without NCCL: cuda devices get no multi-rank communicator.
#include "ep/ccl/nccl/nccl_communicator.h"

namespace sluice::ep::ccl::internal {

bool NcclBuilt() { return false; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(int, NcclBootstrap) {
  return absl::UnimplementedError(
      "collectives across ranks on cuda devices need NCCL; this build has none");
}

}  // namespace sluice::ep::ccl::internal
