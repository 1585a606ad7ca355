// ccl::World: the ranks a program runs on, and the transport between them. A World is
// taken from the launcher's environment (mpirun starts N processes; each is one rank) or is
// this process alone. A Runtime created with a World (RuntimeOptions::world) gives each of
// its devices a Communicator to the same device on every rank.
//
// MPI can be initialized once per process, so the MPI world is one per process: every
// FromEnvironment call returns the same object, and MPI is finalized at process exit
// (unless a collective broke: then a clean finalize could wait for a dead peer).
#ifndef SLUICE_EP_CCL_WORLD_H_
#define SLUICE_EP_CCL_WORLD_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ep/ccl/communicator.h"

namespace sluice::ep {
class Device;
}  // namespace sluice::ep

namespace sluice::ep::ccl {

struct WorldOptions {
  // How long a collective may wait for its peers before it fails with DeadlineExceeded.
  absl::Duration timeout = absl::Seconds(60);
  // Compare every call (kind, reduction, dtype, shape, root) across ranks before moving
  // data, so that a mismatch is reported by name rather than corrupting memory or hanging.
  // One small allgather per call.
  bool check_calls = true;
};

// Thread-safe.
class World {
 public:
  virtual ~World() = default;
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // The world this process was launched in: MPI when an MPI launcher started it
  // (LaunchedByMpi), else this process alone. Unimplemented when launched by MPI in a
  // build without it; InvalidArgument for a timeout that is not positive; Internal when MPI
  // fails to start. Later calls return the same MPI world (their options are ignored).
  static absl::StatusOr<std::shared_ptr<World>> FromEnvironment(WorldOptions options = {});
  // This process alone: rank 0 of 1. Collectives copy.
  static std::shared_ptr<World> Local(WorldOptions options = {});
  // True when the environment names an MPI launcher's job (OMPI_COMM_WORLD_SIZE,
  // PMI_SIZE or PMIX_RANK is set).
  static bool LaunchedByMpi();
  // True when Sluice was built with MPI (and NCCL) support.
  static bool MpiBuilt();
  static bool NcclBuilt();

  // Asks every collective waiting now or later to end with Unavailable ("this process was
  // asked to stop"). Async-signal-safe (one relaxed atomic store), for a SIGTERM handler:
  // a launcher that saw a peer die terminates the others. Process-wide; not undone.
  static void RequestStop();
  static bool StopRequested();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual absl::string_view backend() const = 0;  // "local" or "mpi"
  const WorldOptions& options() const { return options_; }

  // A communicator for `device`'s ccl stream. Collective over the world: every rank calls
  // it for the same devices in the same order (Runtime::Create does, device by device).
  // Unimplemented for a device type the backend cannot serve (cuda without NCCL).
  virtual absl::StatusOr<std::unique_ptr<Communicator>> NewCommunicator(const Device& device) = 0;

  // Peers whose process is known to be gone ("rank 1 (pid 4242)"). Only peers on this
  // host can be checked; empty for a local world.
  virtual std::vector<std::string> GonePeers() const { return {}; }
  // Ends every rank's process with `code` (MPI_Abort); a local world exits this process.
  [[noreturn]] virtual void Abort(int code) = 0;

 protected:
  explicit World(WorldOptions options) : options_(options) {}

 private:
  const WorldOptions options_;
};

}  // namespace sluice::ep::ccl

#endif  // SLUICE_EP_CCL_WORLD_H_
