// Test doubles for the memory interfaces of core/allocator.h:
//  - FakeRawAllocator: real host memory with counters and a byte limit past which Allocate
//    returns ResourceExhausted, like a device running out of memory.
//  - FakeFenceRecorder: fences that the test completes by hand. IsDone is false and Wait
//    blocks until the test completes the fence (or marks its stream idle).
#ifndef SLUICE_TESTS_CORE_FAKE_MEMORY_H_
#define SLUICE_TESTS_CORE_FAKE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/allocator.h"
#include "core/stream_id.h"
#include "gtest/gtest.h"

namespace sluice::testing {

// Host memory standing in for a device's. Thread-safe. Frees whatever is still allocated on
// destruction (an allocator may drop a block deliberately), so leak checkers stay quiet.
class FakeRawAllocator final : public RawAllocator {
 public:
  static constexpr size_t kAlignment = 64;

  explicit FakeRawAllocator(size_t limit = std::numeric_limits<size_t>::max()) : limit_(limit) {}
  ~FakeRawAllocator() override {
    for (auto& [ptr, bytes] : live_) ::operator delete(ptr, std::align_val_t(kAlignment));
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    absl::MutexLock lock(&mu_);
    EXPECT_GT(bytes, 0u) << "RawAllocator::Allocate requires bytes > 0";
    if (bytes > limit_ - std::min(limit_, bytes_in_use_)) {
      ++num_failures_;
      return absl::ResourceExhaustedError(absl::StrCat(Name(), ": cannot allocate ", bytes,
                                                       " bytes, ", bytes_in_use_, " of ", limit_,
                                                       " in use"));
    }
    void* ptr = ::operator new(bytes, std::align_val_t(kAlignment));
    live_.emplace(ptr, bytes);
    bytes_in_use_ += bytes;
    ++num_allocations_;
    return ptr;
  }

  void Free(void* ptr, size_t bytes) override {
    std::function<void(void*, size_t)> on_free;
    {
      absl::MutexLock lock(&mu_);
      auto it = live_.find(ptr);
      if (it == live_.end()) {
        ADD_FAILURE() << "Free of " << ptr << " which is not allocated (double free?)";
        return;
      }
      EXPECT_EQ(it->second, bytes) << "Free with a size other than the allocated one";
      live_.erase(it);
      bytes_in_use_ -= bytes;
      ++num_frees_;
      on_free = on_free_;
    }
    if (on_free) on_free(ptr, bytes);
    ::operator delete(ptr, std::align_val_t(kAlignment));
  }

  std::string Name() const override { return "fake device memory"; }

  void set_limit(size_t limit) {
    absl::MutexLock lock(&mu_);
    limit_ = limit;
  }
  // Called (outside this allocator's lock) with each block just before it is released.
  void set_on_free(std::function<void(void*, size_t)> on_free) {
    absl::MutexLock lock(&mu_);
    on_free_ = std::move(on_free);
  }

  size_t bytes_in_use() const {
    absl::MutexLock lock(&mu_);
    return bytes_in_use_;
  }
  int num_allocations() const {
    absl::MutexLock lock(&mu_);
    return num_allocations_;
  }
  int num_frees() const {
    absl::MutexLock lock(&mu_);
    return num_frees_;
  }
  int num_failures() const {
    absl::MutexLock lock(&mu_);
    return num_failures_;
  }
  int num_live() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(live_.size());
  }
  // The size of the live raw block starting at `ptr`, or 0.
  size_t BlockSize(const void* ptr) const {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(const_cast<void*>(ptr));
    return it == live_.end() ? 0 : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  size_t limit_ ABSL_GUARDED_BY(mu_);
  size_t bytes_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  int num_allocations_ ABSL_GUARDED_BY(mu_) = 0;
  int num_frees_ ABSL_GUARDED_BY(mu_) = 0;
  int num_failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<void*, size_t> live_ ABSL_GUARDED_BY(mu_);
  std::function<void(void*, size_t)> on_free_ ABSL_GUARDED_BY(mu_);
};

// Records fences the test completes by hand. Thread-safe.
//
// A fence is done once the test completes it (Complete/CompleteStream/CompleteAll) or, for a
// fence recorded on a stream marked idle, at once: an idle stream has no work in flight.
class FakeFenceRecorder final : public FenceRecorder {
 public:
  class Fence final : public StreamFence {
   public:
    Fence(FakeFenceRecorder* recorder, StreamId stream) : recorder_(recorder), stream_(stream) {}

    bool IsDone() override { return done_.HasBeenNotified(); }
    absl::Status Wait() override {
      recorder_->NoteWaiter(stream_);
      done_.WaitForNotification();
      return status_;  // written before Notify, which orders it before this read
    }
    StreamId stream() const { return stream_; }

   private:
    friend class FakeFenceRecorder;
    FakeFenceRecorder* const recorder_;
    const StreamId stream_;
    absl::Status status_;
    absl::Notification done_;
  };

  absl::StatusOr<std::shared_ptr<StreamFence>> Record(StreamId stream) override {
    absl::MutexLock lock(&mu_);
    if (failing_.contains(stream)) {
      return absl::UnavailableError(absl::StrCat("stream ", stream.value(), " has failed"));
    }
    auto fence = std::make_shared<Fence>(this, stream);
    if (all_idle_ || idle_.contains(stream)) CompleteLocked(*fence, absl::OkStatus());
    fences_.push_back(fence);
    return std::shared_ptr<StreamFence>(fence);
  }

  // Completes `fence` with `status` unless it is done already.
  void Complete(Fence& fence, absl::Status status = absl::OkStatus()) {
    absl::MutexLock lock(&mu_);
    CompleteLocked(fence, std::move(status));
  }
  // Completes every fence recorded on `stream` so far.
  void CompleteStream(StreamId stream, absl::Status status = absl::OkStatus()) {
    absl::MutexLock lock(&mu_);
    for (auto& fence : fences_) {
      if (fence->stream() == stream) CompleteLocked(*fence, status);
    }
  }
  void CompleteAll() {
    absl::MutexLock lock(&mu_);
    for (auto& fence : fences_) CompleteLocked(*fence, absl::OkStatus());
  }
  // Completes the fences of `stream` and makes later ones on it born done.
  void SetIdle(StreamId stream) {
    absl::MutexLock lock(&mu_);
    idle_.insert(stream);
    for (auto& fence : fences_) {
      if (fence->stream() == stream) CompleteLocked(*fence, absl::OkStatus());
    }
  }
  // Makes every stream idle from now on.
  void SetAllIdle() {
    absl::MutexLock lock(&mu_);
    all_idle_ = true;
    for (auto& fence : fences_) CompleteLocked(*fence, absl::OkStatus());
  }
  // Record on `stream` fails from now on, as for a stream that hit an error.
  void FailRecordsOn(StreamId stream) {
    absl::MutexLock lock(&mu_);
    failing_.insert(stream);
  }

  // Blocks until some thread has called Wait on a fence of `stream`.
  void AwaitWaiterOn(StreamId stream) {
    absl::MutexLock lock(&mu_);
    auto waited = [this, stream]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waited_on_.contains(stream); };
    mu_.Await(absl::Condition(&waited));
  }

  int num_records() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(fences_.size());
  }
  int NumRecordsOn(StreamId stream) const {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& fence : fences_) n += fence->stream() == stream ? 1 : 0;
    return n;
  }
  int num_waits() const {
    absl::MutexLock lock(&mu_);
    return num_waits_;
  }
  // The fences recorded on `stream`, oldest first.
  std::vector<std::shared_ptr<Fence>> FencesOn(StreamId stream) const {
    absl::MutexLock lock(&mu_);
    std::vector<std::shared_ptr<Fence>> out;
    for (const auto& fence : fences_) {
      if (fence->stream() == stream) out.push_back(fence);
    }
    return out;
  }

 private:
  void NoteWaiter(StreamId stream) {
    absl::MutexLock lock(&mu_);
    waited_on_.insert(stream);
    ++num_waits_;
  }
  void CompleteLocked(Fence& fence, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (fence.done_.HasBeenNotified()) return;
    fence.status_ = std::move(status);
    fence.done_.Notify();
  }

  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Fence>> fences_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<StreamId> idle_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<StreamId> failing_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<StreamId> waited_on_ ABSL_GUARDED_BY(mu_);
  bool all_idle_ ABSL_GUARDED_BY(mu_) = false;
  int num_waits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CORE_FAKE_MEMORY_H_
