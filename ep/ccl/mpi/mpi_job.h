// MpiJob: what an MPI communicator (mpi_communicator.h) asks of the MPI job it belongs to —
// the rank and size, whether ranks check their calls, waits that notice a dead peer, and
// a record that a collective failed for good. MpiWorld (mpi_world.h) implements it and
// makes the communicators, each holding its world through this interface.
//
// Thread-safe: every method may be called from any thread (the ccl streams' workers).
#ifndef SLUICE_EP_CCL_MPI_MPI_JOB_H_
#define SLUICE_EP_CCL_MPI_MPI_JOB_H_

#include <mpi.h>

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace sluice::ep::ccl::internal {

class MpiJob {
 public:
  virtual ~MpiJob() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // WorldOptions::check_calls: every rank compares each call before moving data.
  virtual bool check_calls() const = 0;

  // Polls `requests` until all complete. Fails (describing the wait with `describe()`)
  // with Unavailable when a peer is gone or a stop was requested, and DeadlineExceeded
  // after the job's timeout; the requests are then left pending, and the caller must
  // treat its communicator as broken.
  // `bytes`: what the requests move, which sets how long the wait keeps polling before it
  // naps (a transfer in progress needs polls; a late peer does not).
  virtual absl::Status Wait(MPI_Request* requests, int count,
                            absl::FunctionRef<std::string()> describe, int64_t bytes) = 0;

  // A collective failed for good: MPI is then not finalized at exit (a clean finalize
  // could wait for the dead peer).
  virtual void NoteBroken() = 0;
  virtual bool broken() const = 0;
};

}  // namespace sluice::ep::ccl::internal

#endif  // SLUICE_EP_CCL_MPI_MPI_JOB_H_
