// Tests for core/tensor_storage.h: sizing, validation, ownership of the bytes and how moving
// a storage to another stream is reported to the allocator.
#include "core/tensor_storage.h"

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/caching_allocator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/fake_memory.h"

namespace sluice::tensor_storage_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr StreamId kS0(0);
constexpr StreamId kS1(1);
constexpr StreamId kS2(2);
const Device kSim0(DeviceType::kSim, 0);

// An Allocator that records every call. Thread-compatible (the tests are single-threaded).
class RecordingAllocator final : public Allocator {
 public:
  struct Request {
    size_t bytes;
    StreamId stream;
  };
  struct Use {
    void* ptr;
    StreamId stream;
    bool operator==(const Use& other) const { return ptr == other.ptr && stream == other.stream; }
  };

  ~RecordingAllocator() override {
    for (auto& [ptr, bytes] : live_) ::operator delete(ptr);
  }

  absl::StatusOr<void*> Allocate(size_t bytes, StreamId stream) override {
    requests_.push_back({bytes, stream});
    if (fail_) return absl::ResourceExhaustedError(absl::StrCat("no room for ", bytes, " bytes"));
    void* ptr = ::operator new(bytes == 0 ? 1 : bytes);
    live_.emplace(ptr, bytes);
    return ptr;
  }
  void RecordStream(void* ptr, StreamId stream) override {
    EXPECT_TRUE(live_.contains(ptr)) << "RecordStream on memory that is not allocated";
    uses_.push_back({ptr, stream});
  }
  void Deallocate(void* ptr) override {
    auto it = live_.find(ptr);
    ASSERT_NE(it, live_.end()) << "Deallocate of memory that is not allocated";
    live_.erase(it);
    deallocated_.push_back(ptr);
    ::operator delete(ptr);
  }
  AllocatorStats stats() const override { return {}; }

  void set_fail(bool fail) { fail_ = fail; }
  const std::vector<Request>& requests() const { return requests_; }
  const std::vector<Use>& uses() const { return uses_; }
  const std::vector<void*>& deallocated() const { return deallocated_; }
  bool IsLive(const void* ptr) const { return live_.contains(const_cast<void*>(ptr)); }

 private:
  bool fail_ = false;
  absl::flat_hash_map<void*, size_t> live_;
  std::vector<Request> requests_;
  std::vector<Use> uses_;
  std::vector<void*> deallocated_;
};

TEST(TensorStorageTest, AllocatesElementCountTimesElementSize) {
  RecordingAllocator allocator;
  absl::StatusOr<std::unique_ptr<TensorStorage>> storage =
      TensorStorage::Allocate(&allocator, kSim0, DataType::kF32, Shape({2, 3}), kS1);
  ASSERT_TRUE(storage.ok()) << storage.status();
  const TensorStorage& t = **storage;
  EXPECT_EQ(t.bytes(), 24u);
  EXPECT_NE(t.data(), nullptr);
  EXPECT_TRUE(allocator.IsLive(t.data()));
  EXPECT_EQ(t.device(), kSim0);
  EXPECT_EQ(t.dtype(), DataType::kF32);
  EXPECT_EQ(t.shape(), Shape({2, 3}));
  EXPECT_EQ(t.last_used_stream(), kS1);
  ASSERT_EQ(allocator.requests().size(), 1u);
  EXPECT_EQ(allocator.requests()[0].bytes, 24u);
  EXPECT_EQ(allocator.requests()[0].stream, kS1);
}

TEST(TensorStorageTest, SizesFollowTheDataType) {
  RecordingAllocator allocator;
  struct Case {
    DataType dtype;
    Shape shape;
    size_t bytes;
  };
  const Case cases[] = {
      {DataType::kF64, Shape(), 8},  // a scalar has one element
      {DataType::kBool, Shape({7}), 7},
      {DataType::kI64, Shape({2, 2, 2}), 64},
      {DataType::kI32, Shape({1, 5}), 20},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<TensorStorage>> storage =
        TensorStorage::Allocate(&allocator, kSim0, c.dtype, c.shape, kS0);
    ASSERT_TRUE(storage.ok()) << storage.status();
    EXPECT_EQ((*storage)->bytes(), c.bytes) << c.shape.ToString();
  }
}

TEST(TensorStorageTest, EmptyShapeGetsZeroBytesAndAValidPointer) {
  testing::FakeRawAllocator raw;
  StreamOrderedCachingAllocator allocator(&raw, /*fences=*/nullptr);
  absl::StatusOr<std::unique_ptr<TensorStorage>> a =
      TensorStorage::Allocate(&allocator, Device::Cpu(), DataType::kF32, Shape({3, 0}), kS0);
  absl::StatusOr<std::unique_ptr<TensorStorage>> b =
      TensorStorage::Allocate(&allocator, Device::Cpu(), DataType::kF32, Shape({0}), kS0);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->bytes(), 0u);
  EXPECT_NE((*a)->data(), nullptr);
  EXPECT_NE((*a)->data(), (*b)->data());
  EXPECT_EQ((*a)->shape(), Shape({3, 0}));
}

TEST(TensorStorageTest, InvalidShapeIsRejectedBeforeAllocating) {
  RecordingAllocator allocator;
  absl::StatusOr<std::unique_ptr<TensorStorage>> storage =
      TensorStorage::Allocate(&allocator, kSim0, DataType::kF32, Shape({2, -1}), kS0);
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(storage.status().message(), HasSubstr("[2, -1]"));
  EXPECT_THAT(allocator.requests(), IsEmpty());
}

TEST(TensorStorageTest, AllocatorErrorIsPropagated) {
  RecordingAllocator allocator;
  allocator.set_fail(true);
  absl::StatusOr<std::unique_ptr<TensorStorage>> storage =
      TensorStorage::Allocate(&allocator, kSim0, DataType::kI64, Shape({4}), kS0);
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(storage.status().message(), HasSubstr("32 bytes"));
}

TEST(TensorStorageTest, DestructionReturnsTheBytesOnce) {
  RecordingAllocator allocator;
  void* data = nullptr;
  {
    std::unique_ptr<TensorStorage> storage =
        TensorStorage::Allocate(&allocator, kSim0, DataType::kF32, Shape({16}), kS0).value();
    data = storage->data();
    EXPECT_THAT(allocator.deallocated(), IsEmpty());
  }
  EXPECT_THAT(allocator.deallocated(), ElementsAre(data));
}

TEST(TensorStorageTest, MovingToOtherStreamsIsReportedToTheAllocator) {
  RecordingAllocator allocator;
  std::unique_ptr<TensorStorage> storage =
      TensorStorage::Allocate(&allocator, kSim0, DataType::kF32, Shape({16}), kS0).value();
  void* data = storage->data();

  storage->set_last_used_stream(kS0);  // the allocating stream: nothing to report
  EXPECT_THAT(allocator.uses(), IsEmpty());
  EXPECT_EQ(storage->last_used_stream(), kS0);

  storage->set_last_used_stream(kS1);
  EXPECT_EQ(storage->last_used_stream(), kS1);
  storage->set_last_used_stream(kS1);  // no change
  storage->set_last_used_stream(kS2);
  storage->set_last_used_stream(kS0);  // back home: stream order covers it
  EXPECT_EQ(storage->last_used_stream(), kS0);
  using Use = RecordingAllocator::Use;
  EXPECT_THAT(allocator.uses(), ElementsAre(Use{data, kS1}, Use{data, kS2}));
}

// End to end with the caching allocator: a storage moved to another stream is not reused
// until that stream's fence is done.
TEST(TensorStorageTest, StorageUsedOnAnotherStreamIsHeldForItsFence) {
  testing::FakeRawAllocator raw;
  testing::FakeFenceRecorder fences;
  StreamOrderedCachingAllocator allocator(&raw, &fences);
  void* first = nullptr;
  {
    std::unique_ptr<TensorStorage> storage =
        TensorStorage::Allocate(&allocator, kSim0, DataType::kF32, Shape({256}), kS0).value();
    first = storage->data();
    storage->set_last_used_stream(kS1);
  }
  allocator.stats();  // applies the free (frees are applied at the allocator's next call)
  EXPECT_EQ(fences.NumRecordsOn(kS1), 1);
  std::unique_ptr<TensorStorage> second =
      TensorStorage::Allocate(&allocator, kSim0, DataType::kF32, Shape({256}), kS0).value();
  EXPECT_NE(second->data(), first);
  fences.CompleteStream(kS1);
  std::unique_ptr<TensorStorage> third =
      TensorStorage::Allocate(&allocator, kSim0, DataType::kF32, Shape({256}), kS0).value();
  EXPECT_EQ(third->data(), first);
}

// NumElements * SizeOf(dtype) can exceed size_t although the element count fits in int64:
// [2^61] f64 is 2^64 bytes. The product must not wrap (it once did: to 0, or to 8 for
// [2^61 + 1], returning a tiny storage for 2^61 elements).
TEST(TensorStorageTest, ByteCountOverflowIsRejected) {
  RecordingAllocator allocator;
  for (const auto& [dtype, dim] :
       {std::pair{DataType::kF64, int64_t{1} << 61}, std::pair{DataType::kF32, int64_t{1} << 62},
        std::pair{DataType::kF64, (int64_t{1} << 61) + 1}}) {
    absl::StatusOr<std::unique_ptr<TensorStorage>> storage =
        TensorStorage::Allocate(&allocator, kSim0, dtype, Shape({dim}), kS0);
    ASSERT_FALSE(storage.ok()) << dim << " elements became " << (*storage)->bytes() << " bytes";
    EXPECT_THAT(storage.status().message(), HasSubstr(Shape({dim}).ToString()));
  }
  EXPECT_THAT(allocator.requests(), IsEmpty());
}

}  // namespace
}  // namespace sluice::tensor_storage_test
