#include "core/plain_mutex.h"

#include <thread>

namespace sluice {

void PlainMutex::LockSlow() {
  for (int polls = 0;; polls = polls < kSpins + kYields ? polls + 1 : polls) {
    // Test before test-and-set: waiting reads share the line instead of taking it from
    // the holder at every poll.
    if (!locked_.load(std::memory_order_relaxed) &&
        !locked_.exchange(true, std::memory_order_acquire)) {
      return;
    }
    if (polls < kSpins) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else if (polls < kSpins + kYields) {
      // On two cores the holder may be waiting for this one.
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kNap);
    }
  }
}

}  // namespace sluice
