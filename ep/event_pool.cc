#include "ep/event_pool.h"

#include "core/status.h"

namespace sluice::ep {

PooledEvent& PooledEvent::operator=(PooledEvent&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = other.pool_;
    event_ = std::move(other.event_);
    reused_ = other.reused_;
  }
  return *this;
}

void PooledEvent::Reset() {
  if (event_ != nullptr) pool_->Return(std::move(event_));
}

EventPool::EventPool(Factory factory) : factory_(std::move(factory)) {}

absl::StatusOr<PooledEvent> EventPool::Borrow() {
  std::unique_ptr<Event> event;
  {
    SpinLockHolder lock(&idle_lock_);
    if (!idle_.empty()) {
      event = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (event != nullptr) {
    reused_.fetch_add(1, std::memory_order_relaxed);
    return PooledEvent(this, std::move(event), /*reused=*/true);
  }
  absl::MutexLock lock(&factory_mu_);
  SLUICE_ASSIGN_OR_RETURN(event, factory_());
  created_.fetch_add(1, std::memory_order_relaxed);
  return PooledEvent(this, std::move(event), /*reused=*/false);
}

void EventPool::Return(std::unique_ptr<Event> event) {
  SpinLockHolder lock(&idle_lock_);
  idle_.push_back(std::move(event));
}

size_t EventPool::idle() const {
  SpinLockHolder lock(&idle_lock_);
  return idle_.size();
}

}  // namespace sluice::ep
