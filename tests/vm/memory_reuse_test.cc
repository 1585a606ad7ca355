// Memory reuse across devices: a cpu tensor read by a sim stream (a copy) must not be handed
// to new cpu work when the host frees it, until the sim stream has passed the free.
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"

namespace sluice::vm::memory_reuse_test {
namespace {

using testing::Gate;
using testing::GateKernel;
using testing::VmHarness;

TEST(MemoryReuseTest, CpuBlockReadBySimStreamIsNotReusedBeforeTheStreamPassesTheFree) {
  Gate gate;
  GateKernel gated(&gate);
  VmHarness h;
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  constexpr int64_t kN = 256;
  BlobRef z = h.NewF32("cpu", kN, "z");
  BlobRef s = h.NewF32("sim:0/compute", kN, "s");
  BlobRef busy = h.NewF32("sim:0/compute", 1, "busy");
  ASSERT_TRUE(h.Write(z, std::vector<float>(kN, 3.0f)).ok());

  // Hold sim:0/compute, then queue a copy z -> s behind the gate and free z: the release
  // goes to z's last user, the sim stream, and runs (frees) at launch.
  ASSERT_TRUE(h.builder->Call(gated, {}, {busy}, AttrMap(), h.S("sim:0/compute")).ok());
  ASSERT_TRUE(h.builder->Call(h.K("copy"), {z}, {s}, AttrMap(), h.S("sim:0/compute")).ok());
  ASSERT_TRUE(h.builder->Release(z).ok());
  z.reset();

  // New cpu tensors of the same size, written at once on the cpu worker. Without a fence on
  // the sim stream one of them would get z's block and overwrite it before the copy ran.
  std::vector<BlobRef> fresh;
  for (int i = 0; i < 4; ++i) {
    fresh.push_back(h.NewF32("cpu", kN));
    ASSERT_TRUE(h.Fill(fresh.back(), 7.0, "cpu").ok());
  }
  gate.Open();
  absl::StatusOr<std::vector<float>> copied = h.Read(s);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*copied, std::vector<float>(kN, 3.0f));
}

}  // namespace
}  // namespace sluice::vm::memory_reuse_test
