// The aliasing rule on cuda:0 (docs/design.md, "Aliasing"): OpDispatcher::CallInto with
// matmul's output being its own X gives the product of distinct operands, because the
// dispatcher hands the kernel a fresh output and copies it back. Without that, the kernel's
// threads overwrite X while others still read it (shown, not asserted: a race). Needs a GPU:
// every case skips without one.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "ep/cuda/cuda_device.h"
#include "gtest/gtest.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/ops/op_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/sync_checker.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::aliasing_cuda_test {
namespace {

const Device kCpu(DeviceType::kCpu, 0);
const Device kCuda(DeviceType::kCuda, 0);

class AliasingCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ep::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    ep::RuntimeOptions runtime_options;
    runtime_options.num_sim_devices = 0;
    runtime_options.enable_cuda = true;
    runtime_ = ep::Runtime::Create(runtime_options).value();
    vm::VmOptions vm_options;
    vm_options.check_sync = true;
    vm_ = vm::VirtualMachine::Create(runtime_.get(), vm_options).value();
    ASSERT_TRUE(RegisterStandardOps(&registry_).ok());
    builder_ = std::make_unique<vm::InstructionsBuilder>(vm_.get());
    dispatcher_ = std::make_unique<OpDispatcher>(&registry_, vm_.get(), builder_.get());
  }
  void TearDown() override {
    if (vm_ != nullptr) EXPECT_TRUE(vm_->Sync().ok());
    dispatcher_.reset();
    builder_.reset();
    vm_.reset();
  }

  vm::BlobRef Upload(const std::vector<float>& values, const Shape& shape, Device device) {
    vm::Stream* stream = vm_->GetStream(StreamKey{kCpu}).value();
    vm::BlobRef blob = vm_->NewBlob(stream, DataType::kF32, shape).value();
    std::vector<uint8_t> bytes(blob->bytes());
    std::memcpy(bytes.data(), values.data(), bytes.size());
    EXPECT_TRUE(builder_->WriteBlob(blob, bytes).ok());
    if (device == kCpu) return blob;
    absl::StatusOr<SlotBlobs> moved = dispatcher_->Call(
        "memcpy_h2d", {{blob}}, vm::AttrMap().Set("device", std::string("cuda:0")));
    EXPECT_TRUE(moved.ok()) << moved.status();
    return moved.ok() ? (*moved)[0][0] : nullptr;
  }
  std::vector<float> Download(vm::BlobRef blob) {
    if (blob->device().type() == DeviceType::kCuda) {
      absl::StatusOr<SlotBlobs> back = dispatcher_->Call("memcpy_d2h", {{blob}}, {});
      EXPECT_TRUE(back.ok()) << back.status();
      if (!back.ok()) return {};
      blob = (*back)[0][0];
    }
    absl::StatusOr<std::vector<uint8_t>> bytes = builder_->ReadBlob(blob);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (!bytes.ok()) return {};
    std::vector<float> values(blob->bytes() / sizeof(float));
    std::memcpy(values.data(), bytes->data(), blob->bytes());
    return values;
  }

  std::unique_ptr<ep::Runtime> runtime_;
  std::unique_ptr<vm::VirtualMachine> vm_;
  OpRegistry registry_;
  std::unique_ptr<vm::InstructionsBuilder> builder_;
  std::unique_ptr<OpDispatcher> dispatcher_;
};

TEST_F(AliasingCudaTest, MatmulIntoItsOwnInputMatchesCpu) {
  const int n = 256;
  const Shape shape({n, n});
  std::vector<float> x(n * n), y(n * n);
  for (int i = 0; i < n * n; ++i) {
    x[i] = std::cos(0.37f * i);
    y[i] = std::sin(0.11f * i);
  }
  const vm::AttrMap attrs =
      vm::AttrMap().Set("transpose_x", int64_t{1}).Set("transpose_y", int64_t{0});
  absl::StatusOr<SlotBlobs> reference =
      dispatcher_->Call("matmul", {{Upload(x, shape, kCpu)}, {Upload(y, shape, kCpu)}}, attrs);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::vector<float> want = Download((*reference)[0][0]);

  vm::BlobRef dx = Upload(x, shape, kCuda);
  vm::BlobRef dy = Upload(y, shape, kCuda);
  ASSERT_TRUE(dispatcher_->CallInto("matmul", {{dx}, {dy}}, {{dx}}, attrs).ok());
  const std::vector<float> got = Download(dx);
  ASSERT_EQ(got.size(), want.size());
  int wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-3f * (1.0f + std::fabs(want[i])))) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(vm_->sync_checker()->violation_count(), 0);

  // The hazard itself: the kernel launched on one blob as X and Out (the checker names it).
  vm::BlobRef raw = Upload(x, shape, kCuda);
  vm::Stream* stream = vm_->GetStream(StreamKey{kCuda}).value();
  const vm::OpKernel* matmul =
      registry_.FindKernel("matmul", DeviceType::kCuda, DataType::kF32).value();
  ASSERT_TRUE(builder_->Call(*matmul, {raw, dy}, {raw}, attrs, stream).ok());
  const std::vector<float> racy = Download(raw);
  int racy_wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(racy[i] - want[i]) <= 1e-3f * (1.0f + std::fabs(want[i])))) ++racy_wrong;
  }
  std::printf("matmul launched in place on cuda: %d of %zu elements wrong\n", racy_wrong,
              want.size());
  EXPECT_EQ(vm_->sync_checker()->alias_count(), 1);
  EXPECT_EQ(vm_->sync_checker()->status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sluice::ops::aliasing_cuda_test
