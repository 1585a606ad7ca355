// CUDA provider tests. They run only where a GPU exists; elsewhere they skip, except the
// checks that a GPU-less machine is reported cleanly.
#include "ep/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include <vector>

#include "ep/runtime.h"

namespace sluice::ep::cuda_device_test {
namespace {

TEST(CudaDeviceTest, MissingDeviceIsNotFound) {
  StreamIdTable ids;
  const int count = CudaDeviceCount();
  absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice(count, &ids);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(device.status().message().find(absl::StrCat("cuda:", count)), absl::string_view::npos);
}

TEST(CudaDeviceTest, RoundTripAndCrossStreamWait) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto runtime = *Runtime::Create();
  Device* device = *runtime->GetDevice("cuda:0");
  Stream* h2d = *device->GetStream(StreamType::kHost2Device);
  Stream* d2h = *device->GetStream(StreamType::kDevice2Host);
  std::vector<float> in(1024), out(1024, 0.f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  void* buffer = *device->allocator().Allocate(in.size() * sizeof(float), h2d->id());
  ASSERT_TRUE(h2d->Memcpy(buffer, in.data(), in.size() * 4, CopyKind::kHostToDevice).ok());
  PooledEvent event = *device->event_pool().Borrow();
  ASSERT_TRUE(h2d->RecordEvent(event.get()).ok());
  ASSERT_TRUE(d2h->WaitEvent(event.get()).ok());
  ASSERT_TRUE(d2h->Memcpy(out.data(), buffer, out.size() * 4, CopyKind::kDeviceToHost).ok());
  ASSERT_TRUE(d2h->Sync().ok());
  EXPECT_EQ(in, out);
  device->allocator().Deallocate(buffer);
}

TEST(CudaDeviceTest, HostTaskErrorSurfacesAtSync) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto runtime = *Runtime::Create();
  Stream* stream = *runtime->GetStream("cuda:0/compute");
  ASSERT_TRUE(stream->Launch([] { return absl::InternalError("boom"); }).ok());
  EXPECT_EQ(stream->Sync().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(stream->Sync().ok());
}

TEST(CudaDeviceTest, AbsurdAllocationIsResourceExhausted) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto runtime = *Runtime::Create();
  Device* device = *runtime->GetDevice("cuda:0");
  absl::StatusOr<void*> ptr = device->device_memory().Allocate(size_t{1} << 50);
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace sluice::ep::cuda_device_test
