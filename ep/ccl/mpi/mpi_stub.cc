// A build without MPI: a job started by an MPI launcher cannot join its world.
#include "ep/ccl/internal/backends.h"
#include "ep/ccl/world.h"

namespace sluice::ep::ccl::internal {

bool MpiBuilt() { return false; }

absl::StatusOr<std::shared_ptr<World>> GetMpiWorld(WorldOptions) {
  return absl::UnimplementedError(
      "this process was started by an MPI launcher, but Sluice was built without MPI "
      "(install libopenmpi-dev and build again)");
}

}  // namespace sluice::ep::ccl::internal
