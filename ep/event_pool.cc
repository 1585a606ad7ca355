#include "ep/event_pool.h"

#include "core/status.h"

namespace sluice::ep {

PooledEvent& PooledEvent::operator=(PooledEvent&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = other.pool_;
    event_ = std::move(other.event_);
  }
  return *this;
}

void PooledEvent::Reset() {
  if (event_ != nullptr) pool_->Return(std::move(event_));
}

EventPool::EventPool(Factory factory) : factory_(std::move(factory)) {}

absl::StatusOr<PooledEvent> EventPool::Borrow() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Event> event = std::move(idle_.back());
      idle_.pop_back();
      reused_.fetch_add(1, std::memory_order_relaxed);
      return PooledEvent(this, std::move(event));
    }
  }
  absl::MutexLock lock(&factory_mu_);
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Event> event, factory_());
  created_.fetch_add(1, std::memory_order_relaxed);
  return PooledEvent(this, std::move(event));
}

void EventPool::Return(std::unique_ptr<Event> event) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(event));
}

size_t EventPool::idle() const {
  absl::MutexLock lock(&mu_);
  return idle_.size();
}

}  // namespace sluice::ep
