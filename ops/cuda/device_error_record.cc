#include "ops/cuda/device_error_record.h"

#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/status.h"

namespace sluice::ops::internal {
namespace {

// Two 64-bit words of pinned host memory per record in flight, carved from pages that live as
// long as the process (never returned to CUDA: a host task may not call the CUDA API, and the
// pool only grows to the number of records in flight at once). Thread-safe.
class PinnedWords {
 public:
  static PinnedWords& Get() {
    static PinnedWords* const words = new PinnedWords();
    return *words;
  }

  absl::StatusOr<uint64_t*> Take(absl::string_view op) {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) {
      constexpr size_t kPage = 4096;
      void* page = nullptr;
      SLUICE_RETURN_IF_ERROR(
          CudaStatus(op, cudaHostAlloc(&page, kPage, cudaHostAllocPortable), "cudaHostAlloc"));
      uint64_t* words = static_cast<uint64_t*>(page);
      for (size_t i = 0; i + 2 <= kPage / sizeof(uint64_t); i += 2) free_.push_back(words + i);
    }
    uint64_t* slot = free_.back();
    free_.pop_back();
    return slot;
  }

  void Give(uint64_t* slot) {
    absl::MutexLock lock(&mu_);
    free_.push_back(slot);
  }

 private:
  PinnedWords() = default;
  absl::Mutex mu_;
  std::vector<uint64_t*> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<DeviceErrorRecord> DeviceErrorRecord::Create(absl::string_view op,
                                                            const CudaArgs& args) {
  SLUICE_ASSIGN_OR_RETURN(Scratch words, Scratch::Allocate(op, args, 2 * sizeof(uint64_t)));
  SLUICE_RETURN_IF_ERROR(
      CudaStatus(op, cudaMemsetAsync(words.get(), 0xff, 2 * sizeof(uint64_t), args.cuda_stream),
                 "cudaMemsetAsync"));
  return DeviceErrorRecord(std::move(words));
}

absl::Status DeviceErrorRecord::ReportAfter(
    absl::string_view op, const CudaArgs& args,
    absl::AnyInvocable<absl::Status(uint64_t, uint64_t) &&> describe) {
  SLUICE_ASSIGN_OR_RETURN(uint64_t * slot, PinnedWords::Get().Take(op));
  absl::Status status =
      CopyAsync(op, args, slot, words_.get(), 2 * sizeof(uint64_t), cudaMemcpyDeviceToHost);
  if (status.ok()) {
    status = args.stream->Launch([slot, describe = std::move(describe)]() mutable -> absl::Status {
      const uint64_t first = slot[0];
      const uint64_t second = slot[1];
      PinnedWords::Get().Give(slot);
      if (first == kNone) return absl::OkStatus();
      return std::move(describe)(first, second);
    });
  }
  if (!status.ok()) PinnedWords::Get().Give(slot);
  return status;
}

}  // namespace sluice::ops::internal
