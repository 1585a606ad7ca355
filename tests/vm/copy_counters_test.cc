// VmStats::host_to_device_copies / device_to_host_copies: each path that moves bytes between
// host memory and a blob bumps exactly its counter — memcpy_h2d / memcpy_d2h launches (cpu
// and sim kernels, alone and fused), AccessBlob writes and reads (WriteBlob, ReadBlob, their
// Submit halves, AccessBlob itself, on cpu and sim blobs alike), WriteIdleHostBlobs (direct
// and recorded) and ReadIdleHostBlobs — while device work (an eager chain of adds on sim:0,
// assign) bumps neither.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/vm/vm_test_util.h"
#include "vm/blob_access_waiter.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::copy_counters_test {
namespace {

using testing::VmHarness;

const Device kSim0(DeviceType::kSim, 0);

struct Copies {
  int64_t to_device = 0;
  int64_t to_host = 0;
};

Copies CopiesOf(VirtualMachine& vm) {
  const VmStats stats = vm.stats();
  return {stats.host_to_device_copies, stats.device_to_host_copies};
}

std::vector<uint8_t> BytesOf(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The standard ops over a VmHarness's VM, dispatched as the eager front end does.
class CopyCountersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ops::RegisterStandardOps(&registry_).ok());
    dispatcher_ = std::make_unique<ops::OpDispatcher>(&registry_, h_.vm.get(), h_.builder.get());
  }

  BlobRef Run(absl::string_view op, const ops::SlotBlobs& inputs, const AttrMap& attrs = {},
              Device device = Device()) {
    ops::DispatchOptions options;
    options.default_device = device;
    absl::StatusOr<ops::SlotBlobs> out = dispatcher_->Call(op, inputs, attrs, options);
    EXPECT_TRUE(out.ok()) << op << ": " << out.status();
    return out.ok() ? (*out)[0][0] : nullptr;
  }
  // Counters from here on, after everything before was handed over and ran.
  Copies Mark() {
    EXPECT_TRUE(h_.vm->Sync().ok());
    return CopiesOf(*h_.vm);
  }
  void ExpectSince(const Copies& mark, int64_t to_device, int64_t to_host) {
    const Copies now = CopiesOf(*h_.vm);
    EXPECT_EQ(now.to_device - mark.to_device, to_device) << h_.vm->stats().ToString();
    EXPECT_EQ(now.to_host - mark.to_host, to_host) << h_.vm->stats().ToString();
  }

  VmHarness h_;
  ops::OpRegistry registry_;
  std::unique_ptr<ops::OpDispatcher> dispatcher_;
};

TEST_F(CopyCountersTest, MemcpyKernelsCountEachLaunchInTheirDirection) {
  BlobRef host = h_.NewF32("cpu", 4, "host");
  SLUICE_ASSERT_OK(h_.Write(host, {1, 2, 3, 4}));
  for (const char* device : {"sim:0", "sim:1"}) {
    SCOPED_TRACE(device);
    Copies mark = Mark();
    BlobRef on_device = Run("memcpy_h2d", {{host}}, AttrMap().Set("device", std::string(device)));
    ASSERT_NE(on_device, nullptr);
    SLUICE_ASSERT_OK(h_.vm->Sync());
    ExpectSince(mark, 1, 0);

    mark = Mark();
    BlobRef back = Run("memcpy_d2h", {{on_device}});
    ASSERT_NE(back, nullptr);
    SLUICE_ASSERT_OK(h_.vm->Sync());
    ExpectSince(mark, 0, 1);
    mark = Mark();
    EXPECT_EQ(h_.Read(back).value(), (std::vector<float>{1, 2, 3, 4}));
    ExpectSince(mark, 0, 1);  // the read itself: an AccessBlob read
  }
}

TEST_F(CopyCountersTest, MemcpyOnCpuStreamsCountsToo) {
  // The same kernels launched on cpu (the host kernel runs at once): still a launch each.
  BlobRef x = h_.NewF32("cpu", 2, "x");
  BlobRef y = h_.NewF32("cpu", 2, "y");
  SLUICE_ASSERT_OK(h_.Write(x, {5, 6}));
  const Copies mark = Mark();
  const ops::OpRegistry& registry = registry_;
  const OpKernel* h2d = registry.FindKernel("memcpy_h2d", DeviceType::kCpu, DataType::kF32).value();
  const OpKernel* d2h = registry.FindKernel("memcpy_d2h", DeviceType::kCpu, DataType::kF32).value();
  SLUICE_ASSERT_OK(h_.builder->Call(*h2d, {x}, {y}, AttrMap(), h_.S("cpu")));
  SLUICE_ASSERT_OK(h_.builder->Call(*d2h, {y}, {x}, AttrMap(), h_.S("cpu")));
  SLUICE_ASSERT_OK(h_.builder->Call(*d2h, {x}, {y}, AttrMap(), h_.S("cpu")));
  SLUICE_ASSERT_OK(h_.vm->Sync());
  ExpectSince(mark, 1, 2);
}

TEST_F(CopyCountersTest, BlobAccessesCountWritesToDeviceAndReadsToHost) {
  for (const char* stream : {"cpu", "sim:0/compute"}) {
    SCOPED_TRACE(stream);
    BlobRef a = h_.NewF32(stream, 3, "a");
    Copies mark = Mark();
    SLUICE_ASSERT_OK(h_.Write(a, {1, 2, 3}));  // WriteBlob
    ExpectSince(mark, 1, 0);

    mark = Mark();
    ASSERT_TRUE(h_.builder->ReadBlob(a).ok());
    ExpectSince(mark, 0, 1);

    mark = Mark();
    const std::vector<uint8_t> bytes = BytesOf({4, 5, 6});
    BlobAccessWaiter write_waiter(h_.vm.get());
    SLUICE_ASSERT_OK(h_.builder->SubmitWrite(a, bytes, &write_waiter));
    SLUICE_ASSERT_OK(write_waiter.Wait());
    std::vector<uint8_t> out;
    BlobAccessWaiter read_waiter(h_.vm.get());
    SLUICE_ASSERT_OK(h_.builder->SubmitRead(a, &out, &read_waiter));
    SLUICE_ASSERT_OK(read_waiter.Wait());
    EXPECT_EQ(out, bytes);
    ExpectSince(mark, 1, 1);

    // AccessBlob itself, both ways.
    mark = Mark();
    SLUICE_ASSERT_OK(
        h_.builder->AccessBlob(a, /*write=*/true, [](void*, size_t) { return absl::OkStatus(); }));
    SLUICE_ASSERT_OK(
        h_.builder->AccessBlob(a, /*write=*/false, [](void*, size_t) { return absl::OkStatus(); }));
    SLUICE_ASSERT_OK(
        h_.builder->AccessBlob(a, /*write=*/false, [](void*, size_t) { return absl::OkStatus(); }));
    SLUICE_ASSERT_OK(h_.vm->Sync());
    ExpectSince(mark, 1, 2);
  }
}

TEST_F(CopyCountersTest, IdleHostWritesAndReadsCountOnePerBlob) {
  BlobRef a = h_.NewF32("cpu", 2, "a");
  BlobRef b = h_.NewF32("sim:0/compute", 3, "b");
  Copies mark = Mark();
  const std::vector<uint8_t> av = BytesOf({1, 2});
  const std::vector<uint8_t> bv = BytesOf({3, 4, 5});
  const VirtualMachine::HostBlobWrite writes[] = {{&a, av}, {&b, bv}};
  SLUICE_ASSERT_OK(h_.vm->WriteIdleHostBlobs(writes));
  ExpectSince(mark, 2, 0);

  mark = Mark();
  std::vector<uint8_t> a_out(av.size()), b_out(bv.size());
  const VirtualMachine::HostBlobRead reads[] = {{&a, absl::MakeSpan(a_out)},
                                                {&b, absl::MakeSpan(b_out)}};
  SLUICE_ASSERT_OK(h_.vm->ReadIdleHostBlobs(reads));
  EXPECT_EQ(a_out, av);
  EXPECT_EQ(b_out, bv);
  ExpectSince(mark, 0, 2);

  // A refused call copies and counts nothing.
  mark = Mark();
  std::vector<uint8_t> too_small(4);
  const VirtualMachine::HostBlobRead bad[] = {{&a, absl::MakeSpan(a_out)},
                                              {&b, absl::MakeSpan(too_small)}};
  const absl::Status refused = h_.vm->ReadIdleHostBlobs(bad);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("'b'"), std::string::npos) << refused;
  ExpectSince(mark, 0, 0);
}

TEST(CopyCountersRecordedTest, ARecordedIdleWriteCountsOnce) {
  // With a recorder the writes go through AccessBlob instructions: counted there, not twice.
  VmOptions options;
  options.record_path = ::testing::TempDir() + "/copy_counters.rec";
  VmHarness h(options);
  BlobRef a = h.NewF32("cpu", 2, "a");
  SLUICE_ASSERT_OK(h.vm->Sync());
  const Copies before = CopiesOf(*h.vm);
  const std::vector<uint8_t> av = BytesOf({8, 9});
  const VirtualMachine::HostBlobWrite writes[] = {{&a, av}};
  SLUICE_ASSERT_OK(h.vm->WriteIdleHostBlobs(writes));
  const Copies after = CopiesOf(*h.vm);
  EXPECT_EQ(after.to_device - before.to_device, 1);
  EXPECT_EQ(after.to_host - before.to_host, 0);
}

TEST_F(CopyCountersTest, AnEagerChainOnSimCountsNeither) {
  // Inputs made on the device by ops (no host bytes), then a chain of adds and an assign:
  // device work only.
  BlobRef x = Run("fill_constant", {},
                  AttrMap().Set("shape", std::vector<int64_t>{8}).Set("value", 1.0), kSim0);
  ASSERT_NE(x, nullptr);
  ASSERT_EQ(x->device(), kSim0);
  const Copies mark = Mark();
  BlobRef y = x;
  for (int i = 0; i < 32; ++i) y = Run("add", {{y}, {x}});
  BlobRef z = Run("assign", {{y}});
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->device(), kSim0);
  SLUICE_ASSERT_OK(h_.vm->Sync());
  ExpectSince(mark, 0, 0);
  // Reading the result back is a device-to-host copy (and what makes the test able to fail).
  BlobRef back = Run("memcpy_d2h", {{z}});
  SLUICE_ASSERT_OK(h_.vm->Sync());
  ExpectSince(mark, 0, 1);
  EXPECT_EQ(h_.Read(back).value(), std::vector<float>(8, 33.0f));
}

TEST_F(CopyCountersTest, ToStringShowsBoth) {
  const std::string text = h_.vm->stats().ToString();
  EXPECT_NE(text.find("host_to_device_copies="), std::string::npos) << text;
  EXPECT_NE(text.find("device_to_host_copies="), std::string::npos) << text;
}

}  // namespace
}  // namespace sluice::vm::copy_counters_test
