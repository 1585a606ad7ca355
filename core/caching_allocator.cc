#include "core/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice {

std::string AllocatorStats::ToString() const {
  return absl::StrCat("in_use=", bytes_in_use, "B peak=", peak_bytes_in_use,
                      "B cached=", bytes_cached, "B allocations=", num_allocations,
                      " cache_hits=", num_cache_hits, " raw_allocations=", num_raw_allocations,
                      " cross_stream_reuses=", num_cross_stream_reuses);
}

StreamOrderedCachingAllocator::StreamOrderedCachingAllocator(RawAllocator* raw,
                                                             FenceRecorder* fences,
                                                             CachingAllocatorOptions options)
    : raw_(raw), fences_(fences), options_(options) {
  SLUICE_CHECK(raw_ != nullptr);
  SLUICE_CHECK(options_.round_bytes > 0 &&
               (options_.round_bytes & (options_.round_bytes - 1)) == 0);
}

StreamOrderedCachingAllocator::~StreamOrderedCachingAllocator() {
  PlainMutexLock lock(&mu_);
  ApplyDeferredLocked();
  size_t leaked = 0;
  for (auto& [ptr, block] : blocks_) {
    if (block->in_use) ++leaked;
    for (auto& fence : block->pending) fence->Wait().IgnoreError();
    raw_->Free(block->ptr, block->size);
  }
  if (leaked > 0) {
    std::fprintf(stderr,
                 "sluice: %zu block(s) of %s still in use when its allocator was destroyed\n",
                 leaked, raw_->Name().c_str());
  }
}

size_t StreamOrderedCachingAllocator::RoundUp(size_t bytes) const {
  const size_t r = options_.round_bytes;
  return (std::max<size_t>(bytes, 1) + r - 1) & ~(r - 1);
}

StreamOrderedCachingAllocator::FreeList& StreamOrderedCachingAllocator::FreeListOf(
    StreamId stream) {
  SLUICE_CHECK(stream.valid());
  const size_t i = static_cast<size_t>(stream.value());
  if (i >= free_lists_.size()) free_lists_.resize(i + 1);
  return free_lists_[i];
}

void StreamOrderedCachingAllocator::PutBack(FreeList& list, Block* block) {
  if (block->spare_node.empty()) {
    list.emplace(block->size, block);
    return;
  }
  block->spare_node.key() = block->size;
  block->spare_node.mapped() = block;
  list.insert(std::move(block->spare_node));
}

void* StreamOrderedCachingAllocator::TakeBlock(FreeList& list, FreeList::iterator it,
                                               StreamId stream, bool cross) {
  Block* block = it->second;
  block->spare_node = list.extract(it);
  block->in_use = true;
  block->owner = stream;
  block->owner_fence.reset();
  stats_.bytes_cached -= block->size;
  stats_.bytes_in_use += block->size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  ++stats_.num_allocations;
  ++stats_.num_cache_hits;
  if (cross) ++stats_.num_cross_stream_reuses;
  return block->ptr;
}

absl::StatusOr<void*> StreamOrderedCachingAllocator::Allocate(size_t bytes, StreamId stream) {
  if (!stream.valid()) {
    return absl::InvalidArgumentError("Allocate: invalid stream id");
  }
  if (bytes > std::numeric_limits<size_t>::max() - options_.round_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes of ",
                                                     raw_->Name(), ": the request is too large"));
  }
  const size_t size = RoundUp(bytes);
  PlainMutexLock lock(&mu_);
  ApplyDeferredLocked();
  if (!pending_.empty()) PollPending();
  FreeList& own = FreeListOf(stream);
  auto it = own.lower_bound(size);
  if (it != own.end() && it->first <= size * options_.max_fit_ratio) {
    return TakeBlock(own, it, stream, /*cross=*/false);
  }
  return AllocateRawLocked(size, stream);
}

absl::StatusOr<void*> StreamOrderedCachingAllocator::AllocateRawLocked(size_t size,
                                                                       StreamId stream) {
  absl::StatusOr<void*> ptr = raw_->Allocate(size);
  if (!ptr.ok()) {
    absl::Status wait_status;
    if (void* cached = FreeUpLocked(size, stream, /*retake=*/false, &wait_status)) return cached;
    ptr = raw_->Allocate(size);
    absl::Status reclaim_status;
    if (!ptr.ok()) {
      // The memory may be in frees an upper layer has queued (Release instructions not yet
      // run): let it finish them, then look again.
      mu_.Unlock();
      const bool reclaimed = RunReclaimers(stream, &reclaim_status);
      mu_.Lock();
      if (reclaimed) {
        if (void* cached = FreeUpLocked(size, stream, /*retake=*/true, &wait_status)) {
          return cached;
        }
        ptr = raw_->Allocate(size);
      }
    }
    if (!ptr.ok()) {
      int64_t pending = 0;
      for (const Block* block : pending_) pending += static_cast<int64_t>(block->size);
      return absl::ResourceExhaustedError(absl::StrCat(
          "out of memory allocating ", size, " bytes of ", raw_->Name(), " for stream ",
          stream.value(), ": ", ptr.status().message(), "; in use: ", stats_.bytes_in_use,
          " bytes, cached: ", stats_.bytes_cached - pending, " bytes, pending release: ", pending,
          " bytes (allocator: ", stats_.ToString(), ")",
          wait_status.ok() ? "" : absl::StrCat("; a stream failed: ", wait_status.message()),
          reclaim_status.ok()
              ? ""
              : absl::StrCat("; queued frees not waited for: ", reclaim_status.message())));
    }
  }
  auto block = std::make_unique<Block>();
  block->ptr = *ptr;
  block->size = size;
  block->owner = stream;
  block->in_use = true;
  blocks_.emplace(*ptr, std::move(block));
  stats_.bytes_in_use += size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  ++stats_.num_allocations;
  ++stats_.num_raw_allocations;
  return *ptr;
}

void* StreamOrderedCachingAllocator::FreeUpLocked(size_t size, StreamId stream, bool retake,
                                                  absl::Status* wait_status) {
  // Stream order makes a block of the stream's own list reusable by it at once, whatever
  // its size.
  auto take_own = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    FreeList& own = FreeListOf(stream);
    auto it = own.lower_bound(size);
    return it == own.end() ? nullptr : TakeBlock(own, it, stream, /*cross=*/false);
  };
  if (retake) {
    ApplyDeferredLocked();
    PollPending();
    if (void* block = take_own()) return block;
  }
  // Reuse what other streams have freed, once it is safe.
  std::vector<std::shared_ptr<StreamFence>> to_wait;
  if (void* stolen = TryStealLocked(size, stream, &to_wait)) return stolen;
  CollectFencesLocked(&to_wait);
  mu_.Unlock();
  for (auto& fence : to_wait) wait_status->Update(fence->Wait());
  mu_.Lock();
  ApplyDeferredLocked();
  PollPending();
  // The wait may have returned blocks of this stream from pending.
  if (void* block = take_own()) return block;
  if (void* stolen = TryStealLocked(size, stream, &to_wait)) return stolen;
  ReleaseFreeBlocksLocked();
  return nullptr;
}

bool StreamOrderedCachingAllocator::RunReclaimers(StreamId stream, absl::Status* status) {
  std::vector<MemoryReclaimer*> reclaimers;
  {
    absl::MutexLock lock(&reclaim_mu_);
    if (reclaimers_.empty()) return false;
    reclaimers = reclaimers_;
  }
  for (MemoryReclaimer* reclaimer : reclaimers) {
    {
      // Counted per reclaimer: RemoveReclaimer waits for calls into its own one only.
      absl::MutexLock lock(&reclaim_mu_);
      if (std::find(reclaimers_.begin(), reclaimers_.end(), reclaimer) == reclaimers_.end()) {
        continue;  // removed meanwhile
      }
      ++reclaims_running_[reclaimer];
    }
    status->Update(reclaimer->Reclaim(stream));
    absl::MutexLock lock(&reclaim_mu_);
    if (--reclaims_running_[reclaimer] == 0) reclaims_running_.erase(reclaimer);
  }
  return true;
}

void StreamOrderedCachingAllocator::AddReclaimer(MemoryReclaimer* reclaimer) {
  SLUICE_CHECK(reclaimer != nullptr);
  absl::MutexLock lock(&reclaim_mu_);
  SLUICE_CHECK(std::find(reclaimers_.begin(), reclaimers_.end(), reclaimer) == reclaimers_.end());
  reclaimers_.push_back(reclaimer);
}

void StreamOrderedCachingAllocator::RemoveReclaimer(MemoryReclaimer* reclaimer) {
  absl::MutexLock lock(&reclaim_mu_);
  reclaimers_.erase(std::remove(reclaimers_.begin(), reclaimers_.end(), reclaimer),
                    reclaimers_.end());
  auto idle = [this, reclaimer]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_) {
    return !reclaims_running_.contains(reclaimer);
  };
  reclaim_mu_.Await(absl::Condition(&idle));
}

void* StreamOrderedCachingAllocator::TryStealLocked(
    size_t size, StreamId stream, std::vector<std::shared_ptr<StreamFence>>* to_wait) {
  for (size_t s = 0; s < free_lists_.size(); ++s) {
    if (static_cast<int32_t>(s) == stream.value()) continue;
    FreeList& list = free_lists_[s];
    for (auto it = list.lower_bound(size); it != list.end(); ++it) {
      Block* block = it->second;
      if (fences_ == nullptr) return TakeBlock(list, it, stream, /*cross=*/true);
      if (block->owner_fence == nullptr) {
        absl::StatusOr<std::shared_ptr<StreamFence>> fence = fences_->Record(block->owner);
        if (!fence.ok()) continue;  // cannot prove the owner is done; leave the block alone
        block->owner_fence = *std::move(fence);
      }
      if (block->owner_fence->IsDone()) return TakeBlock(list, it, stream, /*cross=*/true);
      to_wait->push_back(block->owner_fence);
    }
  }
  return nullptr;
}

void StreamOrderedCachingAllocator::ReleaseFreeBlocksLocked() {
  for (FreeList& list : free_lists_) {
    for (auto it = list.begin(); it != list.end();) {
      Block* block = it->second;
      if (fences_ != nullptr && (block->owner_fence == nullptr || !block->owner_fence->IsDone())) {
        ++it;  // its owner stream may still be using it
        continue;
      }
      stats_.bytes_cached -= block->size;
      raw_->Free(block->ptr, block->size);
      it = list.erase(it);
      blocks_.erase(block->ptr);
    }
  }
}

void StreamOrderedCachingAllocator::PollPending() {
  auto done = [](Block* block) {
    return std::all_of(block->pending.begin(), block->pending.end(),
                       [](const std::shared_ptr<StreamFence>& f) { return f->IsDone(); });
  };
  for (size_t i = 0; i < pending_.size();) {
    Block* block = pending_[i];
    if (!done(block)) {
      ++i;
      continue;
    }
    block->pending.clear();
    PutBack(FreeListOf(block->owner), block);
    pending_[i] = pending_.back();
    pending_.pop_back();
  }
}

void StreamOrderedCachingAllocator::RecordStream(void* ptr, StreamId stream) {
  PlainMutexLock lock(&mu_);
  ApplyDeferredLocked();
  auto it = blocks_.find(ptr);
  SLUICE_CHECK(it != blocks_.end() && it->second->in_use);
  Block* block = it->second.get();
  if (stream == block->owner) return;
  for (StreamId s : block->other_users) {
    if (s == stream) return;
  }
  block->other_users.push_back(stream);
}

void StreamOrderedCachingAllocator::Deallocate(void* ptr) {
  const uint32_t start = mailbox_next_.fetch_add(1, std::memory_order_relaxed);
  for (int i = 0; i < kMailboxSlots; ++i) {
    std::atomic<void*>& slot = mailbox_[(start + i) % kMailboxSlots];
    void* empty = nullptr;
    if (slot.load(std::memory_order_relaxed) == nullptr &&
        slot.compare_exchange_strong(empty, ptr, std::memory_order_release,
                                     std::memory_order_relaxed)) {
      mailbox_count_.fetch_add(1, std::memory_order_release);
      return;
    }
  }
  PlainMutexLock lock(&mu_);  // the mailbox is full: apply everything now
  ApplyDeferredLocked();
  DeallocateLocked(ptr);
}

void StreamOrderedCachingAllocator::ApplyDeferredLocked() const {
  if (mailbox_count_.load(std::memory_order_acquire) <= 0) return;
  // const: stats() and other readers apply them too; the cache itself is what changes.
  auto* self = const_cast<StreamOrderedCachingAllocator*>(this);
  for (std::atomic<void*>& slot : mailbox_) {
    if (slot.load(std::memory_order_relaxed) == nullptr) continue;
    void* ptr = slot.exchange(nullptr, std::memory_order_acquire);
    if (ptr == nullptr) continue;
    mailbox_count_.fetch_sub(1, std::memory_order_relaxed);
    self->DeallocateLocked(ptr);
  }
}

void StreamOrderedCachingAllocator::DeallocateLocked(void* ptr) {
  auto it = blocks_.find(ptr);
  SLUICE_CHECK(it != blocks_.end() && it->second->in_use);
  Block* block = it->second.get();
  block->in_use = false;
  stats_.bytes_in_use -= block->size;
  stats_.bytes_cached += block->size;
  if (block->other_users.empty() || fences_ == nullptr) {
    block->other_users.clear();
    PutBack(FreeListOf(block->owner), block);
    return;
  }
  for (StreamId user : block->other_users) {
    absl::StatusOr<std::shared_ptr<StreamFence>> fence = fences_->Record(user);
    if (!fence.ok()) {
      // The stream cannot be fenced (e.g. it failed): never hand this block out again.
      std::fprintf(stderr, "sluice: dropping a %zu-byte block of %s: %s\n", block->size,
                   raw_->Name().c_str(), std::string(fence.status().message()).c_str());
      stats_.bytes_cached -= block->size;
      block->other_users.clear();
      block->pending.clear();
      blocks_.erase(it);  // leaks the raw memory deliberately; reusing it could corrupt data
      return;
    }
    block->pending.push_back(*std::move(fence));
  }
  block->other_users.clear();
  pending_.push_back(block);
}

AllocatorStats StreamOrderedCachingAllocator::stats() const {
  PlainMutexLock lock(&mu_);
  ApplyDeferredLocked();
  return stats_;
}

void StreamOrderedCachingAllocator::ResetPeakBytes() {
  PlainMutexLock lock(&mu_);
  ApplyDeferredLocked();
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void StreamOrderedCachingAllocator::CollectFencesLocked(
    std::vector<std::shared_ptr<StreamFence>>* to_wait) {
  // The owner fence of a free or pending block (recorded after its free, so it covers the
  // owner's earlier work); without it the block could not be stolen or released after the wait.
  auto add_owner_fence = [&](Block* block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (block->owner_fence == nullptr) {
      absl::StatusOr<std::shared_ptr<StreamFence>> fence = fences_->Record(block->owner);
      if (!fence.ok()) return;  // stays cached: the owner may still use it
      block->owner_fence = *std::move(fence);
    }
    to_wait->push_back(block->owner_fence);
  };
  for (Block* block : pending_) {
    to_wait->insert(to_wait->end(), block->pending.begin(), block->pending.end());
    if (fences_ != nullptr) add_owner_fence(block);
  }
  if (fences_ == nullptr) return;
  for (FreeList& list : free_lists_) {
    for (auto& [size, block] : list) add_owner_fence(block);
  }
}

absl::Status StreamOrderedCachingAllocator::EmptyCache() {
  PlainMutexLock lock(&mu_);
  ApplyDeferredLocked();
  std::vector<std::shared_ptr<StreamFence>> to_wait;
  CollectFencesLocked(&to_wait);
  mu_.Unlock();
  absl::Status status;
  for (auto& fence : to_wait) status.Update(fence->Wait());
  mu_.Lock();
  ApplyDeferredLocked();
  PollPending();
  ReleaseFreeBlocksLocked();
  return status;
}

}  // namespace sluice
