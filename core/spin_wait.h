// SpinFor: the bounded busy-wait that precedes parking a thread. A short spin catches work
// that arrives back to back (hundreds of nanoseconds instead of a futex round trip); the
// time bound keeps an idle waiter from stealing one of the two cores the work itself needs.
#ifndef SLUICE_CORE_SPIN_WAIT_H_
#define SLUICE_CORE_SPIN_WAIT_H_

#include <chrono>
#include <thread>

namespace sluice {

// How long waiters spin before parking. `pause` costs 10-150 cycles depending on the CPU,
// so the bound is in time, not iterations.
inline constexpr std::chrono::nanoseconds kSpinBudget{20000};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Calls `done` until it returns true or `budget` has passed; returns its last result.
template <typename Pred>
bool SpinFor(Pred&& done, std::chrono::nanoseconds budget = kSpinBudget) {
  if (done()) return true;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  const auto yield_after = std::chrono::steady_clock::now() + std::chrono::microseconds(2);
  while (true) {
    for (int i = 0; i < 16; ++i) {
      CpuRelax();
      if (done()) return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    if (now >= yield_after) std::this_thread::yield();
  }
}

}  // namespace sluice

#endif  // SLUICE_CORE_SPIN_WAIT_H_
