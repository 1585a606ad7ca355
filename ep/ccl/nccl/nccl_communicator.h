// The NCCL communicator of a cuda device (built when the CUDA toolkit ships NCCL): its
// collectives are enqueued on the ccl stream's cudaStream_t and run on the device, in
// stream order. The ranks agree on NCCL's unique id and on each call through the host
// world that created it (MPI).
#ifndef SLUICE_EP_CCL_NCCL_NCCL_COMMUNICATOR_H_
#define SLUICE_EP_CCL_NCCL_NCCL_COMMUNICATOR_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "ep/ccl/communicator.h"

namespace sluice::ep::ccl::internal {

bool NcclBuilt();

struct NcclBootstrap {
  int rank = 0;
  int size = 1;
  // Copies `bytes` bytes at `data` from rank 0 to every rank (NCCL's unique id).
  std::function<absl::Status(void* data, size_t bytes)> broadcast_from_rank0;
  // Checks that every rank makes the same call (before anything is enqueued); may be null.
  std::function<absl::Status(const CollectiveCall& call)> agree;
};

// A communicator over CUDA device `ordinal` of every rank. Collective: every rank calls it
// for the same device in the same order. Unimplemented in a build without NCCL.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(int ordinal,
                                                                     NcclBootstrap bootstrap);

}  // namespace sluice::ep::ccl::internal

#endif  // SLUICE_EP_CCL_NCCL_NCCL_COMMUNICATOR_H_
