// internal::BlobLifecycle (vm/internal/blob_lifecycle.h): the transitions of a blob's state
// machine that a caller or the VM can observe, taken one at a time on a blob no instruction
// uses (the accessors are called as their owner thread would call them). The VM-level paths
// through the same transitions are in parked_blob_test.cc, run_private_test.cc and
// owned_blob_test.cc.
#include "vm/internal/blob_lifecycle.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/vm/vm_test_util.h"
#include "vm/blob.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::blob_lifecycle_test {
namespace {

using internal::BlobLifecycle;
using testing::VmHarness;

int64_t CpuBytesInUse(VmHarness& h) {
  return h.runtime->GetDevice("cpu").value()->caching_allocator().stats().bytes_in_use;
}

// A lazy blob has no storage until a writer's worker ensures it; a Release frees it and the
// blob stays usable: the next writer allocates again. It never keeps storage for parking.
TEST(BlobLifecycleTest, LazyBlobStorageComesAndGoes) {
  VmHarness h;
  Stream* cpu = h.S("cpu");
  BlobRef lazy = h.vm->NewLazyBlob(cpu, DataType::kF32, Shape({16})).value();
  const int64_t baseline = CpuBytesInUse(h);
  ASSERT_TRUE(lazy->lazy());
  EXPECT_EQ(lazy->storage(), nullptr);
  EXPECT_EQ(lazy->raw_storage(), nullptr);

  for (int round = 0; round < 2; ++round) {
    SLUICE_ASSERT_OK(lazy->EnsureStorage(cpu->id()));
    ASSERT_NE(lazy->storage(), nullptr) << round;
    EXPECT_EQ(lazy->storage()->bytes(), 16 * sizeof(float));
    EXPECT_EQ(lazy->storage()->alloc_stream(), cpu->id());
    EXPECT_GT(CpuBytesInUse(h), baseline) << round;
    SLUICE_ASSERT_OK(lazy->EnsureStorage(cpu->id()));  // has storage: nothing to do

    // Even a Release that would keep storage frees a lazy blob's: it is never parked.
    BlobLifecycle::Producer::SetDying(lazy.get(), true);
    EXPECT_FALSE(BlobLifecycle::Producer::ParksStorage(*lazy));
    BlobLifecycle::Worker::ReleaseStorage(lazy.get(), /*keep=*/false);
    EXPECT_EQ(lazy->storage(), nullptr) << round;
    EXPECT_EQ(lazy->raw_storage(), nullptr) << round;
    EXPECT_EQ(CpuBytesInUse(h), baseline) << round;
  }
}

// A released eager blob has no storage to come back: EnsureStorage names it.
TEST(BlobLifecycleTest, ReleasedEagerBlobDoesNotAllocateAgain) {
  VmHarness h;
  BlobRef blob = h.NewF32("cpu", 4, "w");
  ASSERT_NE(blob->storage(), nullptr);
  BlobLifecycle::Worker::ReleaseStorage(blob.get(), /*keep=*/false);
  EXPECT_EQ(blob->storage(), nullptr);
  const absl::Status status = blob->EnsureStorage(h.S("cpu")->id());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find(blob->DebugName()), std::string::npos) << status;
}

// Which Releases keep the storage for parking: only a small, unnamed, eager blob whose
// Release is the end of it (dying, or run-private).
TEST(BlobLifecycleTest, OnlyASmallUnnamedEagerBlobAtTheEndOfItsLifeParksItsStorage) {
  VmHarness h;
  BlobRef small = h.NewF32("cpu", 4);
  EXPECT_FALSE(BlobLifecycle::Producer::ParksStorage(*small));  // its releaser keeps it
  BlobLifecycle::Producer::SetDying(small.get(), true);
  EXPECT_TRUE(BlobLifecycle::Producer::ParksStorage(*small));
  BlobLifecycle::Producer::SetDying(small.get(), false);
  EXPECT_FALSE(BlobLifecycle::Producer::ParksStorage(*small));

  BlobRef named = h.NewF32("cpu", 4, "w");
  BlobLifecycle::Producer::SetDying(named.get(), true);
  EXPECT_FALSE(BlobLifecycle::Producer::ParksStorage(*named));

  const int64_t too_many = static_cast<int64_t>(Blob::kMaxParkedBytes / sizeof(float)) + 1;
  BlobRef large = h.NewF32("cpu", too_many);
  BlobLifecycle::Producer::SetDying(large.get(), true);
  EXPECT_FALSE(BlobLifecycle::Producer::ParksStorage(*large));
}

// A kept Release hides the storage from storage() but not from raw_storage() (kernels of a
// batch that names the blob anyway run on the kept bytes); a second Release of the same blob
// does nothing; the blob is then parkable, and parking clears its poison and kept mark.
// Recycling gives it a new id and clears the producer's marks, and the storage comes back
// with it.
TEST(BlobLifecycleTest, KeptStorageIsParkedAndRecycledUnderANewId) {
  VmHarness h;
  BlobRef blob = h.NewF32("cpu", 4);
  TensorStorage* const storage = blob->storage();
  ASSERT_NE(storage, nullptr);
  BlobLifecycle::Producer::SetDying(blob.get(), true);
  ASSERT_TRUE(BlobLifecycle::Producer::ParksStorage(*blob));
  BlobLifecycle::Producer::MarkReleased(blob.get());
  EXPECT_FALSE(BlobLifecycle::Parking::Parkable(*blob));  // nothing kept yet

  BlobLifecycle::Worker::ReleaseStorage(blob.get(), /*keep=*/true);
  EXPECT_EQ(blob->storage(), nullptr);
  EXPECT_EQ(blob->raw_storage(), storage);
  BlobLifecycle::Worker::ReleaseStorage(blob.get(), /*keep=*/false);  // a second Release
  EXPECT_EQ(blob->raw_storage(), storage);
  EXPECT_TRUE(BlobLifecycle::Parking::Parkable(*blob));

  blob->Poison(absl::InternalError("failed writer"));
  BlobLifecycle::Parking::Park(blob.get());
  EXPECT_FALSE(blob->poisoned());
  EXPECT_EQ(blob->storage(), storage);  // no longer marked kept

  const uint64_t old_id = blob->id();
  BlobLifecycle::Parking::Recycle(blob.get(), old_id + 100);
  EXPECT_EQ(blob->id(), old_id + 100);
  EXPECT_FALSE(BlobLifecycle::Producer::released(*blob));
  EXPECT_FALSE(BlobLifecycle::Producer::run_private(*blob));
  EXPECT_FALSE(BlobLifecycle::Producer::ParksStorage(*blob));  // the dying mark is gone
  EXPECT_EQ(blob->storage(), storage);
}

// A run-private blob's holds: whichever drop is the last reports it (its caller deletes the
// blob), whether the releaser kept its hold (two) or gave it up with the Release (one).
TEST(BlobLifecycleTest, LastPrivateHoldReportsItself) {
  VmHarness h;
  BlobRef blob = h.NewF32("cpu", 4);
  BlobLifecycle::Producer::MakeRunPrivate(blob.get(), 2);
  EXPECT_TRUE(BlobLifecycle::Producer::run_private(*blob));
  EXPECT_TRUE(BlobLifecycle::Producer::ParksStorage(*blob));  // run-private: the end of it
  EXPECT_FALSE(BlobLifecycle::Holds::DropPrivateHold(blob.get()));
  EXPECT_TRUE(BlobLifecycle::Holds::DropPrivateHold(blob.get()));

  BlobRef alone = h.NewF32("cpu", 4);
  BlobLifecycle::Producer::MakeRunPrivate(alone.get(), 1);
  EXPECT_TRUE(BlobLifecycle::Holds::DropPrivateHold(alone.get()));
  // Both stay referenced by their BlobRefs here, which delete them through the VM as
  // ordinary blobs: reset the run-private marks the way Recycle would.
  BlobLifecycle::Parking::Recycle(blob.get(), blob->id());
  BlobLifecycle::Parking::Recycle(alone.get(), alone->id());
}

// The engine's dependence state on a blob starts empty, and a dead blob with a use left is
// deleted by the drop of that use.
TEST(BlobLifecycleTest, DeadBlobIsDeletedByItsLastUse) {
  VmHarness h;
  BlobRef blob = h.NewF32("cpu", 4);
  Blob* raw = blob.get();
  EXPECT_EQ(BlobLifecycle::Scheduler::uses(*raw), 0);
  EXPECT_EQ(BlobLifecycle::Scheduler::last_writer(*raw), nullptr);
  BlobLifecycle::Scheduler::AddUse(raw);
  BlobLifecycle::Scheduler::AddUse(raw);
  EXPECT_FALSE(BlobLifecycle::Scheduler::DropUse(raw));  // not dead: nothing to delete
  BlobLifecycle::Scheduler::MarkDead(raw);
  EXPECT_TRUE(BlobLifecycle::Scheduler::DropUse(raw));  // dead, and that was the last use
  // Undo the death mark (Park's job for a parked blob) so the BlobRef's own path runs.
  BlobLifecycle::Parking::Park(raw);
  EXPECT_EQ(BlobLifecycle::Scheduler::uses(*raw), 0);
}

}  // namespace
}  // namespace sluice::vm::blob_lifecycle_test
