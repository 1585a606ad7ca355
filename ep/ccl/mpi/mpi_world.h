// MpiWorld: the MPI job this process belongs to (one per process; see ccl::World). Every
// MPI call Sluice makes goes through MpiCall (mpi_calls.h) under one process-wide lock, so
// MPI needs no more than MPI_THREAD_SERIALIZED; waits poll nonblocking requests (Wait),
// which keeps the lock free between polls and lets a wait notice a dead peer, a stop
// request or the timeout. Its communicators (mpi_communicator.h) see it as an MpiJob.
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
#include "ep/ccl/mpi/mpi_job.h"
#include "ep/ccl/world.h"

namespace sluice::ep::ccl::internal {

// Thread-safe.
class MpiWorld final : public World, public MpiJob, public std::enable_shared_from_this<MpiWorld> {
 public:
  // The process's MPI world, initializing MPI on the first call.
  static absl::StatusOr<std::shared_ptr<MpiWorld>> Get(WorldOptions options);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::string_view backend() const override { return "mpi"; }
  absl::StatusOr<std::unique_ptr<Communicator>> NewCommunicator(const Device& device) override;
  std::vector<std::string> GonePeers() const override;
  [[noreturn]] void Abort(int code) override;

  // MpiJob (mpi_job.h). The wait's timeout is WorldOptions::timeout.
  bool check_calls() const override { return options().check_calls; }
  absl::Status Wait(MPI_Request* requests, int count, absl::FunctionRef<std::string()> describe,
                    int64_t bytes) override;
  void NoteBroken() override { broken_.store(true, std::memory_order_relaxed); }
  bool broken() const override { return broken_.load(std::memory_order_relaxed); }

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
