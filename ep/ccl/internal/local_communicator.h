// The communicator of a one-rank world: every collective is a copy from the send buffer to
// the receive buffer (none when they alias), so the same programs run with and without a
// launcher.
#ifndef SLUICE_EP_CCL_INTERNAL_LOCAL_COMMUNICATOR_H_
#define SLUICE_EP_CCL_INTERNAL_LOCAL_COMMUNICATOR_H_

#include "ep/ccl/communicator.h"

namespace sluice::ep::ccl::internal {

// Stateless: thread-safe.
class LocalCommunicator final : public Communicator {
 public:
  // `host_memory`: the device's memory is host memory (cpu, sim), and Run copies on the
  // calling thread (stream work); else Run enqueues the copy on the stream.
  explicit LocalCommunicator(bool host_memory) : host_memory_(host_memory) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool enqueues_on_stream() const override { return !host_memory_; }
  absl::Status Run(const CollectiveCall& call, Stream* stream) override;
  absl::StatusOr<std::unique_ptr<Communicator>> Split(absl::Span<const int> group) override;

 private:
  const bool host_memory_;
};

}  // namespace sluice::ep::ccl::internal

#endif  // SLUICE_EP_CCL_INTERNAL_LOCAL_COMMUNICATOR_H_
