#include <vector>

#include "ep/ccl/world.h"
#include "framework/eager/context.h"
#include "gtest/gtest.h"

namespace sluice::smoke_test {
namespace {

TEST(CollectiveSmokeTest, AllReduceSum) {
  auto world = ep::ccl::World::FromEnvironment();
  ASSERT_TRUE(world.ok()) << world.status();
  eager::ContextOptions options;
  options.runtime.world = *world;
  auto ctx = eager::Context::Create(options);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  const int rank = (*world)->rank(), size = (*world)->size();
  for (const char* dev : {"cpu", "sim:0"}) {
    auto x = ctx->FromVector<float>({1.0f + rank, 2.0f * rank}, Shape({2}), *Device::Parse(dev));
    ASSERT_TRUE(x.ok()) << x.status();
    auto out = ctx->Call("all_reduce", {{*x}});
    ASSERT_TRUE(out.ok()) << out.status();
    auto values = (*out)[0].ToVector<float>();
    ASSERT_TRUE(values.ok()) << values.status();
    float s0 = 0, s1 = 0;
    for (int r = 0; r < size; ++r) {
      s0 += 1.0f + r;
      s1 += 2.0f * r;
    }
    EXPECT_EQ((*values)[0], s0);
    EXPECT_EQ((*values)[1], s1);
  }
}

}  // namespace
}  // namespace sluice::smoke_test
