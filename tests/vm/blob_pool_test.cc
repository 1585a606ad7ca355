// internal::BlobPool: a deleted blob's memory serves the next New (on any thread), the
// blob built there is a fresh one, and memory the pool hands out may be deleted with plain
// `delete` (the reaper does so once its VM is gone). Also: instructions (pooled, fused
// steps) start on a cache line.
#include "vm/internal/blob_pool.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "vm/instruction.h"
#include "vm/step_sequence.h"

namespace sluice::vm::internal {
namespace {

Blob* NewF32(BlobPool& pool, uint64_t id) {
  return pool.New(id, Device(DeviceType::kCpu, 0), DataType::kF32, Shape({2, 3}), "");
}

TEST(BlobPoolTest, DeletedMemoryIsReusedForAFreshBlob) {
  BlobPool pool;
  Blob* first = NewF32(pool, 1);
  first->Poison(absl::InternalError("stale"));
  pool.Delete(first);
  Blob* second = NewF32(pool, 2);
  EXPECT_EQ(second, first);  // the same memory
  EXPECT_EQ(second->id(), 2u);
  EXPECT_FALSE(second->poisoned());
  EXPECT_EQ(second->storage(), nullptr);
  EXPECT_EQ(second->bytes(), 6 * sizeof(float));
  delete second;  // pool memory is ordinary aligned heap memory
}

TEST(BlobPoolTest, DeletesOnOneThreadServeNewOnAnother) {
  BlobPool pool;
  constexpr int kBlobs = 1000;
  std::vector<Blob*> blobs;
  for (int i = 0; i < kBlobs; ++i) blobs.push_back(NewF32(pool, i));
  std::thread deleter([&] {
    for (Blob* blob : blobs) pool.Delete(blob);
  });
  deleter.join();
  // Every New is served from the deleted blobs' memory.
  std::vector<Blob*> again;
  for (int i = 0; i < kBlobs; ++i) {
    again.push_back(NewF32(pool, kBlobs + i));
    EXPECT_NE(std::find(blobs.begin(), blobs.end(), again.back()), blobs.end());
  }
  for (Blob* blob : again) pool.Delete(blob);
}

}  // namespace
}  // namespace sluice::vm::internal

namespace sluice::vm {
namespace {

bool LineAligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// Never launched: the steps below are only built.
class FakeKernel final : public OpKernel {
 public:
  absl::string_view name() const override { return "fake"; }
  absl::Status Launch(KernelContext&) const override { return absl::OkStatus(); }
};

// Instructions start on a cache line wherever they live — the pool's blocks, a fused run's
// steps, the stack — so that the lines a producer fills are the lines prefetched for it.
TEST(InstructionLayoutTest, InstructionsAndFusedStepsStartOnACacheLine) {
  Instruction on_stack;
  EXPECT_TRUE(LineAligned(&on_stack));
  auto block = std::make_unique<Instruction[]>(3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(LineAligned(&block[i])) << i;

  Blob a(1, Device(DeviceType::kCpu, 0), DataType::kF32, Shape({1}), "");
  Blob b(2, Device(DeviceType::kCpu, 0), DataType::kF32, Shape({1}), "");
  const FakeKernel kernel;
  Instruction head;
  head.kind = InstructionKind::kOpCall;
  head.kernel = &kernel;
  head.inputs.push_back(&a);
  head.outputs.push_back(&b);
  head.fused = FusedRun(new StepSequence());
  head.fused->Begin(&head);
  Blob* in[] = {&b};
  Blob* out[] = {&a};
  for (int i = 0; i < 20; ++i) head.fused->AddCall(kernel, in, out, nullptr);
  ASSERT_EQ(head.fused->steps(), 21);
  for (int i = 0; i < head.fused->steps(); ++i) {
    EXPECT_TRUE(LineAligned(&head.fused->step(i))) << "step " << i;
  }
}

}  // namespace
}  // namespace sluice::vm
