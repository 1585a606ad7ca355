// The VM under injected faults (core/fault_injector.h and its hooks): a sim work item the
// device fails fails its op (outputs poisoned in stream order, the error naming the op and
// its origin, dependents skipped); a lazy blob whose allocation failed makes its readers on
// sim skip with the allocation's error instead of failing under their own names; Sync(&all)
// hands over every error, not only the first; and the VM runs new work cleanly afterwards.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/fault_injecting_allocator.h"
#include "core/fault_injector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vm/vm_test_util.h"
#include "vm/virtual_machine.h"

namespace sluice::vm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::VmHarness;

class NamedOrigin final : public InstructionOrigin {
 public:
  explicit NamedOrigin(std::string text) : text_(std::move(text)) {}
  std::string Describe() const override { return text_; }

 private:
  const std::string text_;
};

TEST(FaultPathsTest, DeviceFaultFailsTheOpAndSkipsDependents) {
  FaultInjector faults(1.0, 1, "device");  // every fallible item fails
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 1;
  runtime_options.sim.device_faults = &faults;
  VmHarness h({}, runtime_options);
  BlobRef a = h.NewF32("sim:0/compute", 8, "a");
  BlobRef b = h.NewF32("sim:0/compute", 8, "b");
  NamedOrigin origin("the fill");
  h.builder->set_origin(&origin);
  ASSERT_TRUE(h.Fill(a, 1.0, "sim:0/compute").ok());
  h.builder->set_origin(nullptr);
  ASSERT_TRUE(h.Add(a, a, b, "sim:0/compute").ok());
  const absl::StatusOr<std::vector<float>> read = h.Read(b);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("op 'fill'"));
  EXPECT_THAT(read.status().message(), HasSubstr("(the fill)"));
  EXPECT_THAT(read.status().message(), HasSubstr("injected device fault #1"));
  std::vector<absl::Status> all;
  const absl::Status synced = h.vm->Sync(&all);
  EXPECT_THAT(synced.message(), HasSubstr("injected device fault #1"));
  // The add was skipped (its input was poisoned), not failed by the device a second time.
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(faults.fired(), 1);
  EXPECT_TRUE(h.vm->Sync().ok());
}

TEST(FaultPathsTest, NoInjectorNoFault) {
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 1;
  VmHarness h({}, runtime_options);
  BlobRef a = h.NewF32("sim:0/compute", 8, "a");
  ASSERT_TRUE(h.Fill(a, 2.0, "sim:0/compute").ok());
  EXPECT_EQ(h.Read(a).value(), std::vector<float>(8, 2.0f));
  EXPECT_TRUE(h.vm->Sync().ok());
}

class LazyAllocationTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LazyAllocationTest, ReaderOfAFailedAllocationIsSkippedWithItsError) {
  const std::string stream = GetParam();
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 1;
  VmHarness h({}, runtime_options);
  FaultInjector faults(1.0, 1, "allocation");
  ep::Device* device = h.runtime->GetDevice(h.S(stream)->key().device).value();
  FaultInjectingAllocator failing(&device->allocator(), &faults, 7);
  BlobRef a = h.vm->NewLazyBlob(h.S(stream), DataType::kF32, Shape({8}), "a", &failing).value();
  BlobRef b = h.NewF32(stream, 8, "b");
  BlobRef c = h.NewF32(stream, 8, "c");
  ASSERT_TRUE(h.Fill(a, 1.0, stream).ok());  // its allocation fails
  ASSERT_TRUE(h.Fill(b, 3.0, stream).ok());
  ASSERT_TRUE(h.Add(a, b, c, stream).ok());  // reads `a`, which has no storage
  const absl::StatusOr<std::vector<float>> read = h.Read(c);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("op 'fill'"));
  EXPECT_THAT(read.status().message(), HasSubstr("injected allocation fault #1"));
  EXPECT_THAT(read.status().message(), Not(HasSubstr("op 'add'")));
  std::vector<absl::Status> all;
  EXPECT_FALSE(h.vm->Sync(&all).ok());
  ASSERT_EQ(all.size(), 1u) << all.back();
  // Independent work was untouched, and the VM keeps going.
  EXPECT_EQ(h.Read(b).value(), std::vector<float>(8, 3.0f));
  ASSERT_TRUE(h.Add(b, b, c, stream).ok());
  EXPECT_EQ(h.Read(c).value(), std::vector<float>(8, 6.0f));
  EXPECT_TRUE(h.vm->Sync().ok());
}

INSTANTIATE_TEST_SUITE_P(Streams, LazyAllocationTest, ::testing::Values("cpu", "sim:0/compute"),
                         [](const auto& info) {
                           return std::string(info.param) == "cpu" ? "Cpu" : "Sim";
                         });

TEST(FaultPathsTest, SyncHandsOverEveryError) {
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 1;
  VmHarness h({}, runtime_options);
  FaultInjector faults(1.0, 1, "allocation");
  ep::Device* device = h.runtime->GetDevice("sim:0").value();
  FaultInjectingAllocator failing(&device->allocator(), &faults, 1);
  std::vector<BlobRef> blobs;
  for (int i = 0; i < 3; ++i) {
    blobs.push_back(h.vm->NewLazyBlob(h.S("sim:0/compute"), DataType::kF32, Shape({4}),
                                      "x" + std::to_string(i), &failing)
                        .value());
    ASSERT_TRUE(h.Fill(blobs.back(), 1.0, "sim:0/compute").ok());
  }
  std::vector<absl::Status> all;
  const absl::Status first = h.vm->Sync(&all);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(first, all[0]);
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(all[i].message(), HasSubstr(absl::StrCat("fault #", i + 1)));
  }
  all.clear();
  EXPECT_TRUE(h.vm->Sync(&all).ok());
  EXPECT_TRUE(all.empty());
}

}  // namespace
}  // namespace sluice::vm
