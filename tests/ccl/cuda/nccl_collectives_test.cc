// Collectives on cuda devices (label `gpu`; skipped without a device): alone, a one-rank
// world copies on the device's stream; under mpirun, every rank on its own GPU
// (CUDA_VISIBLE_DEVICES), NCCL's all_reduce, all_gather and broadcast against the host
// reference.
#include <optional>
#include <vector>

#include "ep/ccl/world.h"
#include "ep/cuda/cuda_device.h"
#include "framework/eager/collectives.h"
#include "framework/eager/context.h"
#include "gtest/gtest.h"

namespace sluice::nccl_collectives_test {
namespace {

class NcclCollectivesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ep::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    auto world = ep::ccl::World::FromEnvironment();
    ASSERT_TRUE(world.ok()) << world.status();
    eager::ContextOptions options;
    options.runtime.world = *world;
    options.default_device = Device(DeviceType::kCuda, 0);
    auto ctx = eager::Context::Create(options);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_.emplace(*std::move(ctx));
  }
  std::optional<eager::Context> ctx_;
};

TEST_F(NcclCollectivesTest, AllReduceAllGatherBroadcast) {
  eager::Context& ctx = *ctx_;
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  const Device cuda(DeviceType::kCuda, 0);
  std::vector<float> mine(1000);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(rank * 1000 + i % 7);
  auto x = ctx.FromVector<float>(mine, Shape({1000}), cuda);
  ASSERT_TRUE(x.ok()) << x.status();

  auto sum = eager::AllReduce(*x);
  ASSERT_TRUE(sum.ok()) << sum.status();
  auto sum_host = sum->ToVector<float>();
  ASSERT_TRUE(sum_host.ok()) << sum_host.status();
  for (size_t i = 0; i < mine.size(); ++i) {
    float expected = 0;
    for (int r = 0; r < size; ++r) expected += static_cast<float>(r * 1000 + i % 7);
    EXPECT_EQ((*sum_host)[i], expected) << i;
  }

  auto gathered = eager::AllGather(*x);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  auto gathered_host = gathered->ToVector<float>();
  ASSERT_TRUE(gathered_host.ok()) << gathered_host.status();
  ASSERT_EQ(gathered_host->size(), mine.size() * static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ((*gathered_host)[static_cast<size_t>(r) * 1000 + 3],
              static_cast<float>(r * 1000 + 3));
  }

  auto broadcast = eager::Broadcast(*x, 0);
  ASSERT_TRUE(broadcast.ok()) << broadcast.status();
  auto broadcast_host = broadcast->ToVector<float>();
  ASSERT_TRUE(broadcast_host.ok()) << broadcast_host.status();
  EXPECT_EQ((*broadcast_host)[5], 5.0f);
}

}  // namespace
}  // namespace sluice::nccl_collectives_test
