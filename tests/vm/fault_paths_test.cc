// The VM under injected faults (core/fault_injector.h and its hooks): a sim work item the
// device fails fails its op (outputs poisoned in stream order, the error naming the op and
// its origin, dependents skipped); a lazy blob (a precomputed batch's) whose allocation
// failed makes its readers skip with the allocation's error — on sim too, where the
// allocation's poison lands in stream order — instead of failing under their own names; Sync(&all)
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
#include "vm/precomputed_batch.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::fault_paths_test {
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
  FaultInjector faults(1.0, 1, "device");  // every fallible sim item fails
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 1;
  runtime_options.sim.device_faults = &faults;
  VmHarness h({}, runtime_options);
  BlobRef a = h.NewF32("sim:0/compute", 8, "a");
  BlobRef b = h.NewF32("cpu", 8, "b");
  NamedOrigin origin("the fill");
  h.builder->set_origin(&origin);
  ASSERT_TRUE(h.Fill(a, 1.0, "sim:0/compute").ok());
  h.builder->set_origin(nullptr);
  // A dependent on cpu (whose work the device cannot fail): skipped with the fill's error.
  ASSERT_TRUE(h.builder->Call(h.K("copy"), {a}, {b}, AttrMap(), h.S("cpu")).ok());
  const absl::StatusOr<std::vector<float>> read = h.Read(b);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("op 'fill'"));
  EXPECT_THAT(read.status().message(), HasSubstr("(the fill)"));
  EXPECT_THAT(read.status().message(), HasSubstr("sim:0/compute: injected device fault #1"));
  std::vector<absl::Status> all;
  const absl::Status synced = h.vm->Sync(&all);
  EXPECT_THAT(synced.message(), HasSubstr("injected device fault #1"));
  // The copy was skipped, not failed: one error.
  ASSERT_EQ(all.size(), 1u) << all.back();
  EXPECT_EQ(faults.fired(), 1);
  EXPECT_TRUE(h.vm->Sync().ok());
  // The VM runs new work on cpu as before.
  ASSERT_TRUE(h.Fill(b, 4.0, "cpu").ok());
  EXPECT_EQ(h.Read(b).value(), std::vector<float>(8, 4.0f));
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
  Stream* s = h.S(stream);
  ep::Device* device = h.runtime->GetDevice(s->key().device).value();
  FaultInjectingAllocator failing(&device->allocator(), &faults, 7);
  // Lazy blobs belong to precomputed batches (the eager builder refuses them).
  BlobRef a = h.vm->NewLazyBlob(s, DataType::kF32, Shape({8}), "a", &failing).value();
  BlobRef b = h.NewF32(stream, 8, "b");
  BlobRef c = h.NewF32(stream, 8, "c");
  PrecomputedBatch batch;
  auto value = [](double v) { return std::make_shared<const AttrMap>(AttrMap().Set("value", v)); };
  const int fill_a = batch.AddOpCall(h.K("fill"), {}, {a}, value(1.0), s);  // cannot allocate
  const int fill_b = batch.AddOpCall(h.K("fill"), {}, {b}, value(3.0), s);
  const int add = batch.AddOpCall(h.K("add"), {a, b}, {c}, nullptr, s);  // `a` has no storage
  ASSERT_TRUE(batch.AddEdge(fill_a, add).ok());
  ASSERT_TRUE(batch.AddEdge(fill_b, add).ok());
  ASSERT_TRUE(batch.Submit(h.vm.get()).ok());
  std::vector<absl::Status> all;
  EXPECT_FALSE(h.vm->Sync(&all).ok());
  // One error, the allocation's: the add was skipped, not failed under its own name.
  ASSERT_EQ(all.size(), 1u) << all.back();
  EXPECT_THAT(all[0].message(), HasSubstr("op 'fill'"));
  EXPECT_THAT(all[0].message(), HasSubstr("injected allocation fault #1"));
  const absl::StatusOr<std::vector<float>> read = h.Read(c);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("injected allocation fault #1"));
  EXPECT_THAT(read.status().message(), Not(HasSubstr("op 'add'")));
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
  VmHarness h;
  testing::FailKernel fail(testing::FailKernel::When::kLaunch, absl::DataLossError("boom"),
                           "explode");
  std::vector<BlobRef> blobs;
  for (int i = 0; i < 3; ++i) {
    blobs.push_back(h.NewF32("cpu", 4, "x" + std::to_string(i)));
    ASSERT_TRUE(h.builder->Call(fail, {}, {blobs.back()}, AttrMap(), h.S("cpu")).ok());
  }
  std::vector<absl::Status> all;
  const absl::Status first = h.vm->Sync(&all);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(first, all[0]);
  for (const absl::Status& error : all) EXPECT_THAT(error.message(), HasSubstr("boom"));
  all.clear();
  EXPECT_TRUE(h.vm->Sync(&all).ok());
  EXPECT_TRUE(all.empty());
}

}  // namespace
}  // namespace sluice::vm::fault_paths_test
