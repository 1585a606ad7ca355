// The eager front end in a small device: a loop that adds two tensors and drops each result
// runs in a 64 MiB sim device although the result's Release is still queued when the next
// add allocates (the VM reclaims it: see StreamOrderedCachingAllocator); a tensor that really
// does not fit fails with the bytes in use, cached and pending release.
#include <vector>

#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::eager::eager_memory_test {
namespace {

using ::testing::HasSubstr;

const Device kSim0(DeviceType::kSim, 0);
constexpr int64_t kElements = (int64_t{16} << 20) / sizeof(float);  // 16 MiB of f32

Context SmallSimContext() {
  ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.enable_cuda = false;
  options.runtime.sim.memory_bytes = size_t{64} << 20;
  return Context::Create(options).value();
}

TEST(EagerMemoryTest, LoopDroppingResultsFitsInSmallDevice) {
  Context ctx = SmallSimContext();
  const Tensor a =
      ctx.FromVector(std::vector<float>(kElements, 1.0f), Shape({kElements}), kSim0).value();
  const Tensor b =
      ctx.FromVector(std::vector<float>(kElements, 2.0f), Shape({kElements}), kSim0).value();
  // 48 MiB live: each result needs the memory of the one dropped before it.
  const Tensor other =
      ctx.FromVector(std::vector<float>(kElements, 0.0f), Shape({kElements}), kSim0).value();
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<Tensor> sum = fn::Add(a, b);
    ASSERT_TRUE(sum.ok()) << "iteration " << i << ": " << sum.status();
  }
  absl::StatusOr<Tensor> sum = fn::Add(a, b);
  ASSERT_TRUE(sum.ok()) << sum.status();
  absl::StatusOr<std::vector<float>> values = sum->ToVector<float>();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(values->front(), 3.0f);
  EXPECT_EQ(values->back(), 3.0f);
}

TEST(EagerMemoryTest, TensorBeyondTheDeviceNamesInUseCachedAndPendingBytes) {
  Context ctx = SmallSimContext();
  const Tensor a =
      ctx.FromVector(std::vector<float>(kElements, 1.0f), Shape({kElements}), kSim0).value();
  const Tensor b =
      ctx.FromVector(std::vector<float>(kElements, 2.0f), Shape({kElements}), kSim0).value();
  const Tensor c =
      ctx.FromVector(std::vector<float>(kElements, 3.0f), Shape({kElements}), kSim0).value();
  const Tensor d =
      ctx.FromVector(std::vector<float>(kElements, 4.0f), Shape({kElements}), kSim0).value();
  absl::StatusOr<Tensor> sum = fn::Add(a, b);
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(sum.status().message(), HasSubstr("in use: 67108864 bytes"));
  EXPECT_THAT(sum.status().message(), HasSubstr("cached: 0 bytes"));
  EXPECT_THAT(sum.status().message(), HasSubstr("pending release: 0 bytes"));
}

}  // namespace
}  // namespace sluice::eager::eager_memory_test
