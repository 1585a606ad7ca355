// BusyCore: outside load for tests and benchmarks — a thread that keeps one core busy
// spinning while the object lives, as an unrelated process on a shared machine would.
#ifndef SLUICE_TESTS_BUSY_CORE_H_
#define SLUICE_TESTS_BUSY_CORE_H_

#include <atomic>
#include <cstdint>
#include <thread>

namespace sluice::testing {

// Thread-compatible: construct and destroy on one thread.
class BusyCore {
 public:
  BusyCore()
      : thread_([this] {
          // The volatile store keeps the loop from being optimized into nothing.
          volatile uint64_t spins = 0;
          while (!stop_.load(std::memory_order_relaxed)) spins = spins + 1;
        }) {}
  ~BusyCore() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
  }
  BusyCore(const BusyCore&) = delete;
  BusyCore& operator=(const BusyCore&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_BUSY_CORE_H_
