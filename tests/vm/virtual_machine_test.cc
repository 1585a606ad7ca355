#include "vm/virtual_machine.h"

#include "gtest/gtest.h"
#include "tests/vm/vm_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::vm::virtual_machine_test {
namespace {

using testing::VmHarness;

class VirtualMachineTest : public ::testing::TestWithParam<VmOptions::Scheduling> {
 protected:
  VmOptions Options() {
    VmOptions options;
    options.scheduling = GetParam();
    options.check_sync = true;
    return options;
  }
};

TEST_P(VirtualMachineTest, EagerAddOnCpu) {
  VmHarness h(Options());
  BlobRef a = h.NewF32("cpu", 4), b = h.NewF32("cpu", 4), y = h.NewF32("cpu", 4);
  ASSERT_TRUE(h.Write(a, {1, 2, 3, 4}).ok());
  ASSERT_TRUE(h.Write(b, {10, 20, 30, 40}).ok());
  ASSERT_TRUE(h.Add(a, b, y, "cpu").ok());
  EXPECT_EQ(h.Read(y).value(), (std::vector<float>{11, 22, 33, 44}));
  EXPECT_TRUE(h.vm->Sync().ok());
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0);
}

TEST_P(VirtualMachineTest, ChainAcrossSimStreamsAndDevices) {
  VmHarness h(Options());
  BlobRef x = h.NewF32("sim:0/compute", 1000), y = h.NewF32("sim:0/h2d", 1000);
  BlobRef z = h.NewF32("sim:1/compute", 1000);
  ASSERT_TRUE(h.Fill(x, 1.5, "sim:0/compute").ok());
  ASSERT_TRUE(h.Fill(y, 2.0, "sim:0/h2d").ok());      // another stream of sim:0
  ASSERT_TRUE(h.Add(x, y, y, "sim:0/compute").ok());  // needs a StreamWait h2d -> compute
  ASSERT_TRUE(h.builder->Call(h.K("copy"), {y}, {z}, AttrMap(), h.S("sim:1/compute")).ok());
  ASSERT_TRUE(h.Add(z, z, z, "sim:1/compute").ok());
  std::vector<float> got = h.Read(z).value();
  ASSERT_EQ(got.size(), 1000u);
  for (float v : got) ASSERT_EQ(v, 7.0f);
  EXPECT_TRUE(h.vm->Sync().ok());
  const VmStats stats = h.vm->stats();
  EXPECT_EQ(stats.stream_waits, 1) << stats.ToString();
  EXPECT_EQ(stats.record_events, 1) << stats.ToString();
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status().message();
}

INSTANTIATE_TEST_SUITE_P(Scheduling, VirtualMachineTest,
                         ::testing::Values(VmOptions::Scheduling::kDedicatedThread,
                                           VmOptions::Scheduling::kCallerThread));

}  // namespace
}  // namespace sluice::vm::virtual_machine_test
