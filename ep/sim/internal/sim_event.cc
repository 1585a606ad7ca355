#include "ep/sim/internal/sim_event.h"

#include <algorithm>

#include "core/spin_wait.h"

namespace sluice::ep::sim_internal {

bool SimEvent::DoneLocked(uint64_t generation) const {
  return std::find(open_.begin(), open_.end(), generation) == open_.end();
}

bool SimEvent::Query() {
  absl::MutexLock lock(&mu_);
  return DoneLocked(latest_);
}

absl::Status SimEvent::Sync() {
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    generation = latest_;
  }
  return WaitFor(generation);
}

uint64_t SimEvent::BeginRecord() {
  absl::MutexLock lock(&mu_);
  ++latest_;
  open_.push_back(latest_);
  return latest_;
}

uint64_t SimEvent::latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

void SimEvent::Complete(uint64_t generation, absl::Status stream_error) {
  absl::MutexLock lock(&mu_);
  auto it = std::find(open_.begin(), open_.end(), generation);
  if (it != open_.end()) open_.erase(it);
  error_ = std::move(stream_error);
  completions_.fetch_add(1, std::memory_order_release);
}

absl::Status SimEvent::WaitFor(uint64_t generation) {
  // A device-side wait is usually short: spin a little (taking the lock only when some
  // generation closed) before parking on the mutex.
  {
    absl::MutexLock lock(&mu_);
    if (DoneLocked(generation)) return error_;
  }
  uint64_t seen = completions_.load(std::memory_order_acquire);
  SpinFor([&] {
    const uint64_t now = completions_.load(std::memory_order_acquire);
    if (now == seen) return false;
    seen = now;
    absl::MutexLock lock(&mu_);
    return DoneLocked(generation);
  });
  absl::MutexLock lock(&mu_);
  auto done = [this, generation]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return DoneLocked(generation); };
  mu_.Await(absl::Condition(&done));
  return error_;
}

}  // namespace sluice::ep::sim_internal
