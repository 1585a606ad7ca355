// ep::Device: one execution provider's device. It creates and owns its streams, hands out
// events from its EventPool, and owns its memory: raw device memory, pinned host memory and
// the stream-ordered caching allocator tensors use.
//
// Providers (ep/cpu, ep/sim, ep/cuda) derive from this class and implement the protected
// hooks; everything above ep/ sees only this interface.
#ifndef SLUICE_EP_DEVICE_H_
#define SLUICE_EP_DEVICE_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/allocator.h"
#include "core/caching_allocator.h"
#include "core/device.h"
#include "core/intra_op_pool.h"
#include "core/stream_id.h"
#include "core/stream_type.h"
#include "ep/ccl/communicator.h"
#include "ep/event.h"
#include "ep/event_pool.h"
#include "ep/stream.h"

namespace sluice::ep {

// Thread-safe. Destroying a device drains and destroys its streams first, so every stream,
// event and allocation of the device must be released by then (pooled events excepted).
class Device {
 public:
  virtual ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  sluice::Device id() const { return id_; }
  // True when streams run asynchronously to the host (sim, cuda).
  virtual bool IsAsync() const = 0;

  // The stream (type, index) of this device, created on first use and owned by the device.
  // The pointer stays valid until DestroyStream or the device's destruction.
  absl::StatusOr<Stream*> GetStream(StreamType type, int index = 0);
  // Looks up a stream by id among this device's live streams.
  absl::StatusOr<Stream*> FindStream(StreamId id) const;
  // Waits for the stream's pending work (returning its error, if any) and destroys it.
  // InvalidArgument if `stream` is not a live stream of this device.
  absl::Status DestroyStream(Stream* stream);
  // How the caching allocator finds a stream of another device that used this device's
  // memory (a cross-device copy), to fence reuse after it. Set once by the Runtime before
  // any allocation; without it such uses are fenced by nothing and the block is dropped.
  using StreamResolver = absl::AnyInvocable<absl::StatusOr<Stream*>(StreamId) const>;
  void set_stream_resolver(StreamResolver resolver) { resolver_ = std::move(resolver); }

  // Sync() on every live stream; returns the first error.
  absl::Status Synchronize();

  // A new event; prefer event_pool().Borrow().
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent() = 0;
  EventPool& event_pool() { return event_pool_; }

  // Uncached memory: the device's own and page-locked host memory for fast copies.
  virtual RawAllocator& device_memory() = 0;
  virtual RawAllocator& pinned_memory() = 0;
  // The stream-ordered caching allocator over device_memory() (core/caching_allocator.h).
  Allocator& allocator() { return *allocator_; }
  const StreamOrderedCachingAllocator& caching_allocator() const { return *allocator_; }
  // An upper layer's hook for the allocator's out-of-memory path: `reclaimer` hands back
  // memory whose free it has queued (a VM's pending Release instructions on this device's
  // streams; see MemoryReclaimer, core/allocator.h, for what it may and may not wait for).
  // It must stay registered no longer than it lives: Remove before destroying it (Remove
  // returns once no call to it is running). Any thread.
  void AddMemoryReclaimer(MemoryReclaimer* reclaimer) { allocator_->AddReclaimer(reclaimer); }
  void RemoveMemoryReclaimer(MemoryReclaimer* reclaimer) { allocator_->RemoveReclaimer(reclaimer); }

  // The threads that split one host kernel's work across the cores (core/intra_op_pool.h),
  // or null where the device runs no host kernels (cuda) or keeps each kernel on its stream's
  // thread (sim). Owned by the device and alive as long as it; its helpers start on the first
  // region that splits. Any thread.
  virtual IntraOpPool* intra_op_pool() { return nullptr; }

  // This device's channel to the same device on every rank of its Runtime's world
  // (ep/ccl/): what collectives on its ccl stream run through. Set by Runtime::Create
  // before the device is handed out; never null afterwards. Immutable from then on.
  ccl::Communicator* communicator() const { return communicator_.get(); }
  // The communicator of the ranks `group` (ranks of communicator(), listed in the order
  // that gives each its index; this process among them), made by communicator()->Split on
  // first use and kept with the device. The first use is collective over the group's
  // members, which must ask for their groups in one order: the ccl stream's worker does, at
  // each group's first collective. The whole world in rank order is communicator() itself.
  absl::StatusOr<ccl::Communicator*> GroupCommunicator(absl::Span<const int> group);

 protected:
  Device(sluice::Device id, StreamIdTable* stream_ids);
  // Providers call this at the end of their constructor, once device_memory() works.
  void InitAllocator();
  // Drains and destroys all streams, then the caching allocator. Every provider's destructor
  // calls it first, while the provider's own members (memory, threads) still exist.
  // Idempotent.
  void Shutdown();
  virtual absl::StatusOr<std::unique_ptr<Stream>> NewStream(StreamId id, const StreamKey& key) = 0;

 private:
  friend class Runtime;  // shuts every device down before destroying any (cross-device fences)
  class Fences;

  const sluice::Device id_;
  StreamIdTable* const stream_ids_;
  EventPool event_pool_;
  std::unique_ptr<FenceRecorder> fences_;
  StreamResolver resolver_;
  std::unique_ptr<StreamOrderedCachingAllocator> allocator_;
  // Destroyed after Shutdown drained the streams that use them.
  std::unique_ptr<ccl::Communicator> communicator_;
  absl::Mutex groups_mu_;
  absl::flat_hash_map<std::vector<int>, std::unique_ptr<ccl::Communicator>> groups_
      ABSL_GUARDED_BY(groups_mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<StreamId, std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::ep

#endif  // SLUICE_EP_DEVICE_H_
