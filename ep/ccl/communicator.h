// ccl::Communicator: one device's channel to the same device on every rank of a World
// (ep/ccl/world.h). Each device owns one (ep::Device::communicator()); collectives run on
// the device's ccl stream, so calls on one communicator are issued in stream order, and
// every rank must issue the same calls in the same order, as with MPI and NCCL.
//
// Two families:
//  - host communicators (MPI, and the one-rank local communicator) move host memory. Run
//    completes the call on the calling thread: the ccl stream's worker, polling the
//    nonblocking transfer. Kernels call it from stream work (KernelContext::LaunchHostWork).
//  - device communicators (NCCL) enqueue on the stream's native stream and return at once.
#ifndef SLUICE_EP_CCL_COMMUNICATOR_H_
#define SLUICE_EP_CCL_COMMUNICATOR_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ep/ccl/collective.h"

namespace sluice::ep {
class Stream;
}  // namespace sluice::ep

namespace sluice::ep::ccl {

// Run is called from one thread at a time (the ccl stream's worker): calls must follow
// one another. rank(), size() and the flags may be read from any thread.
class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // True for device communicators: Run enqueues on `stream` and returns.
  virtual bool enqueues_on_stream() const = 0;

  // Runs (host) or enqueues (device) `call` on `stream`, a ccl stream of the device that
  // owns this communicator. Errors:
  //  - InvalidArgument naming the call: a bad peer or root, a dtype the reduction refuses,
  //    or ranks that disagree on the call (kind, reduction, dtype, shape, root), each
  //    rank's call described;
  //  - DeadlineExceeded: the call did not complete within the world's timeout;
  //  - Unavailable: a peer process is gone (named by rank and pid), or the launcher asked
  //    this process to end. After DeadlineExceeded or Unavailable the communicator is
  //    broken and every later call fails at once with the same error.
  virtual absl::Status Run(const CollectiveCall& call, Stream* stream) = 0;

  // A communicator over the ranks `group` (ranks of this communicator, without repeats,
  // including this one), in which this process has rank `index of rank() in group`:
  // collectives of a placement's sub-mesh. Collective over the group's members only, who
  // must split in the same order; called from the thread that calls Run. InvalidArgument
  // for a bad group; Unimplemented where the backend cannot split.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(absl::Span<const int> group) = 0;

 protected:
  Communicator() = default;
};

}  // namespace sluice::ep::ccl

#endif  // SLUICE_EP_CCL_COMMUNICATOR_H_
