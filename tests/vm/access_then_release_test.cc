// A host access to a blob on an asynchronous stream, followed at once (no host wait) by a
// Release of the blob: the access runs in the stream's order, on the memory the blob had
// when the access was dispatched, and sees the bytes — the Release does not make it find
// the blob released. (A replayed eager recording submits reads and releases this way.)
#include <atomic>
#include <cstring>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/vm/vm_test_util.h"
#include "vm/blob_access_waiter.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::access_then_release_test {
namespace {

using testing::VmHarness;

TEST(AccessThenReleaseTest, AnAccessDispatchedBeforeTheReleaseSeesTheBytes) {
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 1;
  runtime_options.sim.max_jitter_us = 2000;  // the stream lags the host
  runtime_options.sim.seed = 5;
  for (int round = 0; round < 20; ++round) {
    VmHarness h({}, runtime_options);
    BlobRef x = h.NewF32("sim:0/compute", 4, "x");
    ASSERT_TRUE(h.Write(x, {1, 2, 3, 4}).ok());
    // Make the stream busy so that the access is still pending when the release comes.
    BlobRef y = h.NewF32("sim:0/compute", 4, "y");
    ASSERT_TRUE(h.builder
                    ->Call(h.K("scale"), {x}, {y}, AttrMap().Set("alpha", 2.0).Set("beta", 0.0),
                           h.S("sim:0/compute"))
                    .ok());
    std::vector<float> seen(4, 0.0f);
    BlobAccessWaiter waiter(h.vm.get());
    ASSERT_TRUE(h.builder
                    ->AccessBlob(
                        y, /*write=*/false,
                        [&seen](void* data, size_t bytes) {
                          std::memcpy(seen.data(), data, bytes);
                          return absl::OkStatus();
                        },
                        waiter.OnRetire())
                    .ok());
    ASSERT_TRUE(h.builder->Release(y).ok());  // dispatched before the access has run
    y = nullptr;
    const absl::Status read = waiter.Wait();
    ASSERT_TRUE(read.ok()) << "round " << round << ": " << read;
    EXPECT_EQ(seen, (std::vector<float>{2, 4, 6, 8}));
    EXPECT_TRUE(h.vm->Sync().ok());
  }
}

}  // namespace
}  // namespace sluice::vm::access_then_release_test
