// OwnedBlob (vm/owned_blob.h): a blob held without reference counting. These tests check
// that dropping the hold goes through the engine like the last BlobRef would (the blob
// outlives the work that uses it, then is parked or deleted), that moves transfer the hold
// exactly once, that an adopted BlobRef is held and let go, that Share keeps the owner
// alive, and that a recording VM still sees the blob. Under AddressSanitizer (CI) a hold
// dropped twice or never shows as an error or a leak.
#include "vm/owned_blob.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/recorder.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::testing::owned_blob_test {
namespace {

OwnedBlob NewOwnedF32(VmHarness& h, int64_t n) {
  return h.vm->NewOwnedBlob(h.S("cpu"), DataType::kF32, Shape({n})).value();
}

absl::Status FillRaw(VmHarness& h, Blob* y, double value) {
  Blob* const outs[] = {y};
  return h.builder->CallPtrs(h.K("fill"), {}, outs,
                             std::make_shared<const AttrMap>(AttrMap().Set("value", value)),
                             h.S("cpu"));
}

// A released owned blob whose hold is dropped while its writer is still held back comes
// back, once that work retired, as a parked blob the next NewBlob recycles.
TEST(OwnedBlobTest, DroppedHoldGoesThroughTheEngine) {
  VmHarness h;
  h.builder->set_fusion(false);  // the engine tracks it (not run-private)
  const void* data = nullptr;
  {
    SchedulerHold hold(h.builder.get());
    OwnedBlob t = NewOwnedF32(h, 1);
    ASSERT_TRUE(t);
    data = t->storage()->data();
    SLUICE_ASSERT_OK(FillRaw(h, t.get(), 2.0));
    SLUICE_ASSERT_OK(h.builder->Release(t.get(), /*dying=*/true));
    t.Reset();  // the fill and the release are still held back
    EXPECT_FALSE(t);
  }
  SLUICE_ASSERT_OK(h.vm->Sync());
  ASSERT_TRUE(WaitUntil([&] { return h.vm->stats().parked_blobs == 1; }))
      << h.vm->stats().ToString();
  BlobRef again = h.NewF32("cpu", 1);
  EXPECT_EQ(h.vm->stats().recycled_blobs, 1);
  EXPECT_EQ(again->storage()->data(), data);
}

// A dying Release that makes the blob private to its run hands the caller's hold to the
// run (hold_taken): the caller abandons it, and the run's hold alone ends the blob — it is
// parked once the run retired (with two holds it would never die: ASan reports the leak,
// and the count below stays 0). Without fusion nothing is taken and the hold is dropped.
TEST(OwnedBlobTest, PrivateReleaseTakesTheHoldOver) {
  VmHarness h;
  OwnedBlob one = NewOwnedF32(h, 1);
  SLUICE_ASSERT_OK(FillRaw(h, one.get(), 1.0));
  SLUICE_ASSERT_OK(h.vm->Sync());
  {
    SchedulerHold hold(h.builder.get());
    OwnedBlob t = NewOwnedF32(h, 1);
    Blob* const in[] = {one.get(), one.get()};
    Blob* const out[] = {t.get()};
    SLUICE_ASSERT_OK(
        h.builder->CallPtrs(h.K("add"), in, out, nullptr, h.S("cpu"), /*fresh_outputs=*/true));
    bool taken = false;
    SLUICE_ASSERT_OK(h.builder->Release(t.get(), /*dying=*/true, &taken));
    EXPECT_TRUE(taken);
    t.Abandon();
    EXPECT_FALSE(t);
  }
  SLUICE_ASSERT_OK(h.vm->Sync());
  ASSERT_TRUE(WaitUntil([&] { return h.vm->stats().parked_blobs == 1; }))
      << h.vm->stats().ToString();

  h.builder->set_fusion(false);
  OwnedBlob u = NewOwnedF32(h, 1);  // the parked blob again
  SLUICE_ASSERT_OK(FillRaw(h, u.get(), 2.0));
  bool taken = true;
  SLUICE_ASSERT_OK(h.builder->Release(u.get(), /*dying=*/true, &taken));
  EXPECT_FALSE(taken);
  u.Reset();
  SLUICE_ASSERT_OK(h.vm->Sync());
  ASSERT_TRUE(WaitUntil([&] { return h.vm->stats().parked_blobs == 1; }))
      << h.vm->stats().ToString();
}

// Moving hands the hold over: the moved-from handle is empty and dropping it does nothing;
// move-assigning drops the target's old hold (here: a released blob, which is parked).
TEST(OwnedBlobTest, MovesTransferTheHoldOnce) {
  VmHarness h;
  h.builder->set_fusion(false);
  OwnedBlob a = NewOwnedF32(h, 1);
  OwnedBlob b = NewOwnedF32(h, 1);
  Blob* const b_blob = b.get();
  SLUICE_ASSERT_OK(FillRaw(h, a.get(), 1.0));
  SLUICE_ASSERT_OK(h.builder->Release(a.get(), /*dying=*/true));
  a = std::move(b);
  EXPECT_EQ(a.get(), b_blob);
  EXPECT_FALSE(b);
  OwnedBlob c(std::move(a));
  EXPECT_FALSE(a);
  EXPECT_EQ(c.get(), b_blob);
  SLUICE_ASSERT_OK(h.vm->Sync());
  // The first blob died once (parked); the second is alive and usable.
  ASSERT_TRUE(WaitUntil([&] { return h.vm->stats().parked_blobs == 1; }))
      << h.vm->stats().ToString();
  SLUICE_ASSERT_OK(FillRaw(h, c.get(), 5.0));
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(static_cast<const float*>(c->storage()->data())[0], 5.0f);
  EXPECT_EQ(h.vm->stats().parked_blobs, 1);
}

// An adopted BlobRef is held until the OwnedBlob goes; Share keeps the owner alive.
TEST(OwnedBlobTest, AdoptsABlobRefAndSharesThroughItsOwner) {
  VmHarness h;
  std::weak_ptr<Blob> weak;
  {
    BlobRef shared = h.NewF32("cpu", 1);
    weak = shared;
    OwnedBlob owned(std::move(shared));
    EXPECT_FALSE(weak.expired());
    owned.Reset();
    EXPECT_TRUE(weak.expired());
  }
  struct Owner {
    OwnedBlob blob;
  };
  auto owner = std::make_shared<Owner>();
  owner->blob = NewOwnedF32(h, 1);
  BlobRef ref = owner->blob.Share(owner);
  std::weak_ptr<Owner> weak_owner = owner;
  owner.reset();
  EXPECT_FALSE(weak_owner.expired());  // `ref` keeps the owner, and so the blob
  SLUICE_ASSERT_OK(h.Fill(ref, 3.0, "cpu"));
  EXPECT_EQ(h.Read(ref).value(), std::vector<float>{3.0f});
  ref.reset();
  EXPECT_TRUE(weak_owner.expired());
}

// A recording VM gives out adopted blobs, so the recorder still follows them.
TEST(OwnedBlobTest, RecordingVmStillSeesTheBlob) {
  VmOptions options;
  options.record_path = ::testing::TempDir() + "/owned_blob_record.txt";
  VmHarness h(options);
  OwnedBlob t = NewOwnedF32(h, 1);
  bool seen = false;
  for (const BlobRef& live : h.vm->recorder()->LiveBlobs()) seen = seen || live.get() == t.get();
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace sluice::vm::testing::owned_blob_test
