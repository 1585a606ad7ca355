#include "core/fault_injector.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// splitmix64's finalizer: spreads consecutive keys over the whole range, so that keys that
// differ in one bit decide independently.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

FaultInjector::FaultInjector(double rate, uint64_t seed, std::string what)
    : rate_(rate < 0 ? 0 : (rate > 1 ? 1 : rate)), seed_(seed), what_(std::move(what)) {}

bool FaultInjector::WouldFire(uint64_t key) const {
  if (rate_ <= 0) return false;
  // 53 random bits as a double in [0, 1).
  const double u = static_cast<double>(Mix(Mix(seed_) ^ key) >> 11) * 0x1.0p-53;
  return u < rate_;
}

int64_t FaultInjector::Fire(uint64_t key) {
  if (!WouldFire(key)) return 0;
  return fired_.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::string FaultInjector::Describe(int64_t number) const {
  return absl::StrCat("injected ", what_, " fault #", number);
}

}  // namespace sluice
