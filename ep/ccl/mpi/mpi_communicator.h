// MpiCommunicator: a host communicator over a duplicate of MPI_COMM_WORLD, one per device,
// so that each device's ccl stream has its own ordered channel. Run starts the
// nonblocking MPI call and polls it to completion on the calling thread (the ccl stream's
// worker), after the ranks agreed on the call (WorldOptions::check_calls). It holds its
// world (mpi_world.h, which makes it) as an MpiJob (mpi_job.h).
#ifndef SLUICE_EP_CCL_MPI_MPI_COMMUNICATOR_H_
#define SLUICE_EP_CCL_MPI_MPI_COMMUNICATOR_H_

#include <mpi.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ep/ccl/communicator.h"
#include "ep/ccl/mpi/mpi_job.h"

namespace sluice::ep::ccl::internal {

// Thread-compatible: Run and Agree are called by one thread at a time (the ccl stream's).
class MpiCommunicator final : public Communicator {
 public:
  // Collective over the world (MPI_Comm_idup). `where` names the device in errors.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(std::shared_ptr<MpiJob> world,
                                                              std::string where);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool enqueues_on_stream() const override { return false; }
  absl::Status Run(const CollectiveCall& call, Stream* stream) override;
  // MPI_Comm_create_group over this communicator (collective over the group only).
  absl::StatusOr<std::unique_ptr<Communicator>> Split(absl::Span<const int> group) override;

  // Checks that every rank (for send and recv: the peer) makes the same call.
  // InvalidArgument describing each rank's call when they differ.
  absl::Status Agree(const CollectiveCall& call);

 private:
  MpiCommunicator(std::shared_ptr<MpiJob> world, MPI_Comm comm, std::string where, int rank,
                  int size)
      : world_(std::move(world)), comm_(comm), where_(std::move(where)), rank_(rank), size_(size) {}
  absl::Status Transfer(const CollectiveCall& call);
  absl::Status Wait(MPI_Request* requests, int count, const CollectiveCall& call);
  // Records a failure after which the channel is unusable and returns it.
  absl::Status Break(absl::Status status);

  std::shared_ptr<MpiJob> world_;
  MPI_Comm comm_;
  const std::string where_;
  const int rank_;
  const int size_;
  int64_t collectives_ = 0;  // collectives (not transfers) run so far: their sequence
  absl::Status broken_;
};

}  // namespace sluice::ep::ccl::internal

#endif  // SLUICE_EP_CCL_MPI_MPI_COMMUNICATOR_H_
