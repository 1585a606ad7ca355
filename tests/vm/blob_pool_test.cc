// internal::BlobPool: a deleted blob's memory serves the next New (on any thread), the
// blob built there is a fresh one, and memory the pool hands out may be deleted with plain
// `delete` (the reaper does so once its VM is gone).
#include "vm/internal/blob_pool.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

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
