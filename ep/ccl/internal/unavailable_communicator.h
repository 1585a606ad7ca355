// The communicator of a device the world's backend cannot serve (a cuda device in a build
// without NCCL, in a world of several ranks): every call fails with the reason, so the
// rest of the Runtime works and only collectives on that device are refused.
#ifndef SLUICE_EP_CCL_INTERNAL_UNAVAILABLE_COMMUNICATOR_H_
#define SLUICE_EP_CCL_INTERNAL_UNAVAILABLE_COMMUNICATOR_H_

#include <utility>

#include "absl/strings/str_cat.h"
#include "ep/ccl/communicator.h"

namespace sluice::ep::ccl::internal {

// Immutable: thread-safe.
class UnavailableCommunicator final : public Communicator {
 public:
  UnavailableCommunicator(int rank, int size, absl::Status why)
      : rank_(rank), size_(size), why_(std::move(why)) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool enqueues_on_stream() const override { return true; }
  absl::Status Run(const CollectiveCall& call, Stream*) override {
    return absl::Status(why_.code(), absl::StrCat(DescribeCall(call), ": ", why_.message()));
  }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(absl::Span<const int>) override {
    return why_;
  }

 private:
  const int rank_;
  const int size_;
  const absl::Status why_;
};

}  // namespace sluice::ep::ccl::internal

#endif  // SLUICE_EP_CCL_INTERNAL_UNAVAILABLE_COMMUNICATOR_H_
