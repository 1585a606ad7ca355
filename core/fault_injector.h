// FaultInjector: the dice behind Sluice's fault-injection hooks (a failing allocator
// decorator in core/fault_injecting_allocator.h, failing sim work items in
// ep/sim/sim_device.h, failing kernels in the stress runs). Each decision is a pure function
// of the injector's seed and a key the hook chooses, so a hook that keys its decisions by
// something deterministic (an op's position in a program, a work item's position on its
// stream) fails the same places on every run with that seed, whatever the threads'
// interleaving. The injector also numbers the faults it fires, so that each injected error
// can be recognized wherever it surfaces ("injected device fault #3").
//
// Hooks hold a pointer to an injector that the caller owns and keeps alive; a null pointer
// (or a zero rate) means no injection, and the hooks' production paths test only that.
#ifndef SLUICE_CORE_FAULT_INJECTOR_H_
#define SLUICE_CORE_FAULT_INJECTOR_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace sluice {

// Thread-safe: Fire may run on any number of threads at once.
class FaultInjector {
 public:
  // `rate` in [0, 1]: the probability that a uniformly random key fires. `what` names the
  // fault kind in the messages of Describe ("kernel", "device", "allocation").
  FaultInjector(double rate, uint64_t seed, std::string what);
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  double rate() const { return rate_; }
  absl::string_view what() const { return what_; }

  // Whether the fault keyed `key` fires: the same (seed, key) always decides alike. When it
  // fires, returns its number (1, 2, ... in firing order; unique per injector) and counts
  // it; 0 otherwise.
  int64_t Fire(uint64_t key);
  // Whether `key` would fire, without counting it (for a reference that predicts faults).
  bool WouldFire(uint64_t key) const;
  // Faults fired so far. Relaxed: exact once the firing threads are joined or synchronized.
  int64_t fired() const { return fired_.load(std::memory_order_relaxed); }

  // "injected device fault #3": the text every hook puts in the error of fault `number`, so
  // that a checker can find the fault in any error that carries it as its cause.
  std::string Describe(int64_t number) const;

 private:
  const double rate_;
  const uint64_t seed_;
  const std::string what_;
  // Numbers the fired faults; relaxed: the number only has to be unique.
  std::atomic<int64_t> fired_{0};
};

}  // namespace sluice

#endif  // SLUICE_CORE_FAULT_INJECTOR_H_
