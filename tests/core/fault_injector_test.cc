// FaultInjector (core/fault_injector.h): decisions are a function of seed and key, the
// rate holds on average, fired faults are numbered, and a zero rate never fires.
#include "core/fault_injector.h"

#include "gtest/gtest.h"

namespace sluice::fault_injector_test {
namespace {

TEST(FaultInjectorTest, DecidesBySeedAndKey) {
  FaultInjector a(0.5, 42, "kernel");
  FaultInjector b(0.5, 42, "kernel");
  FaultInjector never(0, 42, "kernel");
  int fired = 0;
  for (uint64_t key = 0; key < 1000; ++key) {
    EXPECT_EQ(a.WouldFire(key), b.WouldFire(key));
    EXPECT_FALSE(never.WouldFire(key));
    fired += a.Fire(key) != 0;
  }
  EXPECT_EQ(a.fired(), fired);
  EXPECT_GT(fired, 400);
  EXPECT_LT(fired, 600);
  EXPECT_EQ(a.Describe(3), "injected kernel fault #3");
}

}  // namespace
}  // namespace sluice::fault_injector_test
