// The VM as its devices' MemoryReclaimer (core/allocator.h): an eager loop that drops each
// result fits in a small sim device although every drop is a Release instruction still
// queued when the next result allocates; a request that really exceeds the device fails with
// the bytes in use, cached and pending release; a VM worker allocating a lazy blob's storage
// fails instead of waiting for work queued behind itself.
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"

namespace sluice::vm::memory_reclaim_test {
namespace {

using ::testing::HasSubstr;
using testing::VmHarness;

constexpr size_t kDeviceBytes = size_t{64} << 20;
constexpr int64_t kElements = (int64_t{16} << 20) / sizeof(float);  // 16 MiB of f32
constexpr char kStream[] = "sim:0/compute";

ep::RuntimeOptions SmallSim() {
  ep::RuntimeOptions options;
  options.num_sim_devices = 1;
  options.sim.memory_bytes = kDeviceBytes;
  return options;
}

VmOptions WithScheduling(VmOptions::Scheduling scheduling) {
  VmOptions options;
  options.scheduling = scheduling;
  return options;
}

class MemoryReclaimTest : public ::testing::TestWithParam<VmOptions::Scheduling> {};

// Two 16 MiB inputs, 16 MiB of other live data and a 16 MiB result per iteration in a
// 64 MiB device: each result needs the previous one's memory, which its Release (queued
// behind the add that made it) returns only when it runs. Without the reclaim an iteration
// fails as soon as the loop outruns the VM.
TEST_P(MemoryReclaimTest, EagerLoopDroppingResultsFitsInSmallDevice) {
  VmHarness h(WithScheduling(GetParam()), SmallSim());
  BlobRef a = h.NewF32(kStream, kElements);
  BlobRef b = h.NewF32(kStream, kElements);
  BlobRef other = h.NewF32(kStream, kElements);
  ASSERT_TRUE(h.Fill(a, 1.0, kStream).ok());
  ASSERT_TRUE(h.Fill(b, 2.0, kStream).ok());
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<BlobRef> y = h.vm->NewBlob(h.S(kStream), DataType::kF32, Shape({kElements}));
    ASSERT_TRUE(y.ok()) << "iteration " << i << ": " << y.status();
    ASSERT_TRUE(h.FreshAdd(a, b, *y, kStream).ok());
    ASSERT_TRUE(h.builder->Release(*y, /*dying=*/true).ok());
  }
  ASSERT_TRUE(h.Add(a, b, other, kStream).ok());
  absl::StatusOr<std::vector<float>> values = h.Read(other);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ((*values)[0], 3.0f);
  EXPECT_EQ(values->back(), 3.0f);
  EXPECT_TRUE(h.vm->Sync().ok());
}

// Three live 16 MiB blobs and a 32 MiB request: the reclaim frees nothing, and the error
// says where the memory is.
TEST_P(MemoryReclaimTest, RequestBeyondTheDeviceNamesInUseCachedAndPendingBytes) {
  VmHarness h(WithScheduling(GetParam()), SmallSim());
  std::vector<BlobRef> live;
  for (int i = 0; i < 3; ++i) live.push_back(h.NewF32(kStream, kElements));
  absl::StatusOr<BlobRef> big = h.vm->NewBlob(h.S(kStream), DataType::kF32, Shape({2 * kElements}));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("sim:0 device memory"));
  EXPECT_THAT(big.status().message(),
              HasSubstr("in use: 50331648 bytes, cached: 0 bytes, pending release: 0 bytes"));
}

// A lazy blob allocates on the sim worker at launch: the reclaim cannot wait there, and the
// error says why.
TEST_P(MemoryReclaimTest, WorkerAllocationFailsWithoutWaitingForItself) {
  VmHarness h(WithScheduling(GetParam()), SmallSim());
  std::vector<BlobRef> live;
  for (int i = 0; i < 4; ++i) live.push_back(h.NewF32(kStream, kElements));
  // Lazy blobs belong to precomputed batches (the eager builder refuses them).
  BlobRef lazy = h.vm->NewLazyBlob(h.S(kStream), DataType::kF32, Shape({kElements})).value();
  PrecomputedBatch batch;
  batch.AddOpCall(h.K("fill"), {}, {lazy},
                  std::make_shared<const AttrMap>(AttrMap().Set("value", 1.0)), h.S(kStream));
  ASSERT_TRUE(batch.Submit(h.vm.get()).ok());
  const absl::Status synced = h.vm->Sync();
  EXPECT_EQ(synced.code(), absl::StatusCode::kResourceExhausted) << synced;
  EXPECT_THAT(synced.message(), HasSubstr("queued frees not waited for"));
  EXPECT_THAT(synced.message(), HasSubstr("VM worker"));
}

SLUICE_INSTANTIATE_FOR_SCHEDULING(MemoryReclaimTest);

}  // namespace
}  // namespace sluice::vm::memory_reclaim_test
