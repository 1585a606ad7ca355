// PtxKernel: PTX from CompileToPtx loaded through the driver API and launched on a cuda
// provider stream. The launches need a GPU and skip without one; on a machine without one the
// load must fail cleanly (FailedPrecondition, or Unimplemented in a build without CUDA).
#include "ep/cuda/ptx_kernel.h"

#include <gtest/gtest.h>

#include <vector>

#include "ep/cuda/cuda_device.h"
#include "ep/cuda/ptx_compiler.h"
#include "ep/runtime.h"

namespace sluice::ep::ptx_kernel_test {
namespace {

constexpr char kSaxpy[] =
    "extern \"C\" __global__ void saxpy(const float* x, float* y, float a, long long n) {\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    y[i] = a * x[i] + y[i];\n"
    "  }\n"
    "}\n";

TEST(PtxKernelTest, WithoutDeviceLoadIsRefusedCleanly) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  absl::StatusOr<std::string> ptx = CompileToPtx(kSaxpy, "saxpy.cu");
  absl::StatusOr<std::unique_ptr<PtxKernel>> kernel =
      LoadPtxKernel(0, ptx.ok() ? *ptx : std::string(), "saxpy");
  ASSERT_FALSE(kernel.ok());
  if (!CudaProviderBuilt()) {
    EXPECT_EQ(kernel.status().code(), absl::StatusCode::kUnimplemented);
  } else {
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    EXPECT_EQ(kernel.status().code(), absl::StatusCode::kFailedPrecondition) << kernel.status();
  }
}

TEST(PtxKernelTest, LaunchOnAProviderStream) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::string> ptx = CompileToPtx(kSaxpy, "saxpy.cu");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  absl::StatusOr<std::unique_ptr<PtxKernel>> kernel = LoadPtxKernel(0, *ptx, "saxpy");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->entry(), "saxpy");

  auto runtime = *Runtime::Create();
  Device* device = *runtime->GetDevice("cuda:0");
  Stream* stream = *device->GetStream(StreamType::kCompute);
  const long long n = 3000;  // more than one block, fewer threads than elements
  std::vector<float> x(n), y(n), out(n);
  for (long long i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i) * 0.5f;
    y[i] = static_cast<float>(n - i);
  }
  const size_t bytes = n * sizeof(float);
  void* dx = *device->allocator().Allocate(bytes, stream->id());
  void* dy = *device->allocator().Allocate(bytes, stream->id());
  ASSERT_TRUE(stream->Memcpy(dx, x.data(), bytes, CopyKind::kHostToDevice).ok());
  ASSERT_TRUE(stream->Memcpy(dy, y.data(), bytes, CopyKind::kHostToDevice).ok());
  float a = 3.0f;
  long long count = n;
  void* args[] = {&dx, &dy, &a, &count};
  ASSERT_TRUE((*kernel)->Launch(stream->native_handle(), 4, 256, args).ok());
  ASSERT_TRUE(stream->Memcpy(out.data(), dy, bytes, CopyKind::kDeviceToHost).ok());
  ASSERT_TRUE(stream->Sync().ok());
  for (long long i = 0; i < n; ++i) ASSERT_EQ(out[i], a * x[i] + y[i]) << i;

  EXPECT_EQ((*kernel)->Launch(stream->native_handle(), 0, 256, args).code(),
            absl::StatusCode::kInvalidArgument);
  device->allocator().Deallocate(dx);
  device->allocator().Deallocate(dy);
}

TEST(PtxKernelTest, MissingEntryAndBadPtx) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::string> ptx = CompileToPtx(kSaxpy, "saxpy.cu");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_EQ(LoadPtxKernel(0, *ptx, "no_such_kernel").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadPtxKernel(0, "this is not PTX", "saxpy").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::ep::ptx_kernel_test
