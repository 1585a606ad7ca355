// The factories world.cc chooses between; each backend's file defines its own, or a stub
// when the build lacks the backend.
#ifndef SLUICE_EP_CCL_INTERNAL_BACKENDS_H_
#define SLUICE_EP_CCL_INTERNAL_BACKENDS_H_

#include <memory>

#include "absl/status/statusor.h"

namespace sluice::ep::ccl {

class World;
struct WorldOptions;

namespace internal {

// The process's MPI world (ep/ccl/mpi/), initializing MPI on the first call; Unimplemented
// in a build without MPI.
absl::StatusOr<std::shared_ptr<World>> GetMpiWorld(WorldOptions options);
bool MpiBuilt();

}  // namespace internal
}  // namespace sluice::ep::ccl

#endif  // SLUICE_EP_CCL_INTERNAL_BACKENDS_H_
