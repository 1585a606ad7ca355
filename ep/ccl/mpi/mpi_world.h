// MpiWorld: the MPI job this process belongs to (one per process; see ccl::World). Every
// MPI call Sluice makes goes through Call() under one process-wide lock, so MPI needs no
// more than MPI_THREAD_SERIALIZED; waits poll nonblocking requests (Wait), which keeps
// the lock free between polls and lets a wait notice a dead peer, a stop request or the
// timeout.
#ifndef SLUICE_EP_CCL_MPI_MPI_WORLD_H_
#define SLUICE_EP_CCL_MPI_MPI_WORLD_H_

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "ep/ccl/world.h"

namespace sluice::ep::ccl::internal {

// Thread-safe.
class MpiWorld final : public World, public std::enable_shared_from_this<MpiWorld> {
 public:
  // The process's MPI world, initializing MPI on the first call.
  static absl::StatusOr<std::shared_ptr<MpiWorld>> Get(WorldOptions options);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::string_view backend() const override { return "mpi"; }
  absl::StatusOr<std::unique_ptr<Communicator>> NewCommunicator(const Device& device) override;
  std::vector<std::string> GonePeers() const override;
  [[noreturn]] void Abort(int code) override;

  // Runs `fn` (MPI calls) under the process-wide MPI lock; Internal naming `what` when it
  // returns an MPI error code.
  static absl::Status Call(absl::string_view what, absl::FunctionRef<int()> fn);
  // Call for a blocking MPI call that waits for other ranks (MPI_Comm_create_group): without
  // the lock where MPI is fully thread-safe (MPI_THREAD_MULTIPLE), so that this rank's other
  // ccl streams keep polling meanwhile (two such calls on two devices could otherwise wait
  // for each other across ranks); with it elsewhere.
  static absl::Status CallBlocking(absl::string_view what, absl::FunctionRef<int()> fn);
  // Polls `requests` until all complete. Fails (describing the wait with `describe()`)
  // with Unavailable when a peer is gone or a stop was requested, and DeadlineExceeded
  // after the world's timeout; the requests are then left pending, and the caller must
  // treat its communicator as broken.
  // `bytes`: what the requests move, which sets how long the wait keeps polling before it
  // naps (a transfer in progress needs polls; a late peer does not).
  absl::Status Wait(MPI_Request* requests, int count, absl::FunctionRef<std::string()> describe,
                    int64_t bytes = 0);
  // A collective failed for good: MPI is then not finalized at exit (a clean finalize
  // could wait for the dead peer).
  void NoteBroken() { broken_.store(true, std::memory_order_relaxed); }
  bool broken() const { return broken_.load(std::memory_order_relaxed); }

 private:
  struct Peer {
    int64_t pid = 0;
    uint64_t host = 0;  // a hash of the host name
  };
  MpiWorld(WorldOptions options, int rank, int size);
  absl::Status ExchangePeers();

  const int rank_;
  const int size_;
  std::vector<Peer> peers_;  // by rank; written once in Get
  std::atomic<bool> broken_{false};
};

}  // namespace sluice::ep::ccl::internal

#endif  // SLUICE_EP_CCL_MPI_MPI_WORLD_H_
