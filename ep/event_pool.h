// EventPool: events of one device, created once and recycled (creating or
// destroying CUDA events can turn asynchronous launches synchronous, so neither belongs on a
// hot path). PooledEvent returns its event to the pool when it goes out of scope.
#ifndef SLUICE_EP_EVENT_POOL_H_
#define SLUICE_EP_EVENT_POOL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/spin_lock.h"
#include "ep/event.h"

namespace sluice::ep {

class EventPool;

// An event borrowed from a pool; move-only. Returning it (destruction or Reset) is safe as
// soon as every WaitEvent on it has been enqueued (see event.h); the next borrower may
// re-record it. Thread-compatible.
class PooledEvent {
 public:
  PooledEvent() = default;
  PooledEvent(PooledEvent&& other) noexcept
      : pool_(other.pool_), event_(std::move(other.event_)), reused_(other.reused_) {}
  PooledEvent& operator=(PooledEvent&& other) noexcept;
  ~PooledEvent() { Reset(); }

  Event* get() const { return event_.get(); }
  Event* operator->() const { return event_.get(); }
  explicit operator bool() const { return event_ != nullptr; }
  // True when the event came from the pool's idle list rather than being created.
  bool reused() const { return reused_; }
  // Returns the event to its pool now.
  void Reset();

 private:
  friend class EventPool;
  PooledEvent(EventPool* pool, std::unique_ptr<Event> event, bool reused)
      : pool_(pool), event_(std::move(event)), reused_(reused) {}

  EventPool* pool_ = nullptr;
  std::unique_ptr<Event> event_;
  bool reused_ = false;
};

// Thread-safe. Must outlive every PooledEvent borrowed from it.
class EventPool {
 public:
  using Factory = absl::AnyInvocable<absl::StatusOr<std::unique_ptr<Event>>()>;

  // `factory` creates one new event of the pool's device.
  explicit EventPool(Factory factory);
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // An idle event, or a new one when none is idle.
  absl::StatusOr<PooledEvent> Borrow();

  int64_t created() const { return created_.load(std::memory_order_relaxed); }
  int64_t reused() const { return reused_.load(std::memory_order_relaxed); }
  size_t idle() const;

 private:
  friend class PooledEvent;
  void Return(std::unique_ptr<Event> event);

  Factory factory_ ABSL_GUARDED_BY(factory_mu_);
  absl::Mutex factory_mu_;  // the factory runs outside idle_lock_: Return never waits on it
  // Borrow and Return are on the VM's hot path and hold the lock for one vector operation.
  mutable SpinLock idle_lock_;
  std::vector<std::unique_ptr<Event>> idle_ ABSL_GUARDED_BY(idle_lock_);
  // Statistics only: relaxed ordering, no other memory is published through them.
  std::atomic<int64_t> created_{0};
  std::atomic<int64_t> reused_{0};
};

}  // namespace sluice::ep

#endif  // SLUICE_EP_EVENT_POOL_H_
