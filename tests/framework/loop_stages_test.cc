// SplitLoopBody (framework/interpreter/control_flow/loop_stages.h): which calls of a while
// body are the driver stage, which are independent of the previous iteration, which carry
// a value from it; and the bodies it refuses to split. Blobs are only identities here:
// the function compares pointers and never reads through them.
#include "framework/interpreter/control_flow/loop_stages.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::framework::control_flow::loop_stages_test {
namespace {

// Distinct, never dereferenced blob pointers.
class Names {
 public:
  vm::Blob* operator[](int i) {
    return reinterpret_cast<vm::Blob*>(&cells_[static_cast<size_t>(i)]);
  }

 private:
  std::array<uint64_t, 64> cells_{};
};

StageCall Call(std::vector<vm::Blob*> reads, std::vector<vm::Blob*> writes, bool random = false) {
  return StageCall{std::move(reads), std::move(writes), random};
}

// Loop variables i (the condition's) and acc; capture c; current values cur_*, next values
// nxt_*. The benchmark's body: t = tanh(c * i) / 2; acc' = acc + t; i' = i + 1.
TEST(LoopStagesTest, CounterDrivesTheTanhChainIsIndependentTheSumCarries) {
  Names n;
  vm::Blob *cur_i = n[0], *cur_acc = n[1], *nxt_i = n[2], *nxt_acc = n[3], *c = n[4];
  vm::Blob *m = n[5], *t = n[6], *h = n[7];
  const std::vector<StageCall> calls = {
      Call({cur_i}, {nxt_i}),        // increment, written in place
      Call({c, cur_i}, {m}),         // mul
      Call({m}, {t}),                // tanh
      Call({t}, {h}),                // scale
      Call({cur_acc, h}, {nxt_acc})  // add, written in place
  };
  const LoopStages stages = SplitLoopBody(calls, {cur_i, cur_acc}, {nxt_i, nxt_acc}, {true, false});
  ASSERT_FALSE(stages.stage.empty()) << stages.why;
  EXPECT_EQ(stages.stage, (std::vector<int>{0, 1, 1, 1, 2}));
  EXPECT_EQ(stages.independent_calls, 3);
}

// The condition reads i; i's next value reads j (i' = i + j); so j is the driver's too,
// and so is what j's next value reads: the driver grows to a fixed point.
TEST(LoopStagesTest, DriverVariablesGrowToAFixedPoint) {
  Names n;
  vm::Blob *cur_i = n[0], *cur_j = n[1], *cur_k = n[2], *cur_x = n[3];
  vm::Blob *nxt_i = n[4], *nxt_j = n[5], *nxt_k = n[6], *nxt_x = n[7];
  vm::Blob* y = n[8];
  const std::vector<StageCall> calls = {
      Call({cur_i, cur_j}, {nxt_i}),  // i' = i + j
      Call({cur_k}, {nxt_j}),         // j' = f(k)
      Call({cur_k}, {nxt_k}),         // k' = g(k)
      Call({cur_k}, {y}),             // y = h(k): reads only driver variables
      Call({cur_x, y}, {nxt_x}),      // x' = x + y: carries x
  };
  const LoopStages stages =
      SplitLoopBody(calls, {cur_i, cur_j, cur_k, cur_x}, {nxt_i, nxt_j, nxt_k, nxt_x},
                    {true, false, false, false});
  ASSERT_FALSE(stages.stage.empty()) << stages.why;
  EXPECT_EQ(stages.stage, (std::vector<int>{0, 0, 0, 1, 2}));
}

// Copies into next values (a yield of a loop variable, of a capture, of a temporary that
// is also read later) land in the stage of what they copy.
TEST(LoopStagesTest, YieldCopiesFollowWhatTheyCopy) {
  Names n;
  vm::Blob *cur_i = n[0], *cur_a = n[1], *cur_b = n[2], *cur_d = n[3];
  vm::Blob *nxt_i = n[4], *nxt_a = n[5], *nxt_b = n[6], *nxt_d = n[7];
  vm::Blob *c = n[8], *t = n[9], *u = n[10];
  const std::vector<StageCall> calls = {
      Call({cur_i}, {nxt_i}),     // 0: i' = i + 1
      Call({c, cur_i}, {t}),      // 1: t = c * i            independent
      Call({t, cur_a}, {u}),      // 2: u = t + a            carried
      Call({t}, {nxt_a}),         // 3: copy a' = t          independent
      Call({cur_a}, {nxt_b}),     // 4: copy b' = a (swap)   carried
      Call({c}, {nxt_d}),         // 5: copy d' = c          independent
      Call({u, cur_b}, {n[11]}),  // 6: reads u and b        carried
  };
  const LoopStages stages =
      SplitLoopBody(calls, {cur_i, cur_a, cur_b, cur_d}, {nxt_i, nxt_a, nxt_b, nxt_d},
                    {true, false, false, false});
  ASSERT_FALSE(stages.stage.empty()) << stages.why;
  EXPECT_EQ(stages.stage, (std::vector<int>{0, 1, 2, 1, 2, 1, 2}));
  // The stages in order are an order of the calls: every read's writer comes earlier.
  std::vector<int> order;
  for (int s = 0; s < 3; ++s) {
    for (size_t c2 = 0; c2 < calls.size(); ++c2) {
      if (stages.stage[c2] == s) order.push_back(static_cast<int>(c2));
    }
  }
  for (size_t a = 0; a < order.size(); ++a) {
    for (vm::Blob* read : calls[static_cast<size_t>(order[a])].reads) {
      for (size_t b = a + 1; b < order.size(); ++b) {
        for (vm::Blob* written : calls[static_cast<size_t>(order[b])].writes) {
          EXPECT_NE(read, written)
              << "call " << order[a] << " reads what " << order[b] << " writes after it";
        }
      }
    }
  }
}

TEST(LoopStagesTest, RefusesBodiesThatCannotOverlap) {
  Names n;
  vm::Blob *cur_i = n[0], *cur_x = n[1], *nxt_i = n[2], *nxt_x = n[3], *c = n[4], *t = n[5];
  // Everything feeds the condition: nothing to overlap.
  {
    const std::vector<StageCall> calls = {Call({cur_i, cur_x}, {nxt_i}), Call({cur_x}, {nxt_x})};
    const LoopStages stages = SplitLoopBody(calls, {cur_i, cur_x}, {nxt_i, nxt_x}, {true, false});
    EXPECT_TRUE(stages.stage.empty());
    EXPECT_EQ(std::string(stages.why),
              "no call of the body is independent of the previous iteration");
  }
  // A random draw: iterations must draw in order.
  {
    const std::vector<StageCall> calls = {Call({cur_i}, {nxt_i}), Call({c}, {t}, /*random=*/true),
                                          Call({cur_x, t}, {nxt_x})};
    const LoopStages stages = SplitLoopBody(calls, {cur_i, cur_x}, {nxt_i, nxt_x}, {true, false});
    EXPECT_TRUE(stages.stage.empty());
    EXPECT_EQ(std::string(stages.why), "the body draws random numbers, in iteration order");
  }
  // A variable written twice: reordering could move a read across the second write.
  {
    const std::vector<StageCall> calls = {Call({cur_i}, {nxt_i}), Call({c}, {t}), Call({t}, {t}),
                                          Call({cur_x, t}, {nxt_x})};
    const LoopStages stages = SplitLoopBody(calls, {cur_i, cur_x}, {nxt_i, nxt_x}, {true, false});
    EXPECT_TRUE(stages.stage.empty());
    EXPECT_EQ(std::string(stages.why), "a variable of the body is written twice");
  }
}

}  // namespace
}  // namespace sluice::framework::control_flow::loop_stages_test
