// The fixture the cuda op tests share: a runtime with the CUDA device (the test is skipped
// without one), a VM, the standard ops and a dispatcher; blobs uploaded from host values to
// cpu or cuda:0, and downloaded back to host values from either.
//
// One test thread; not thread-safe.
#ifndef SLUICE_TESTS_OPS_CUDA_CUDA_OP_FIXTURE_H_
#define SLUICE_TESTS_OPS_CUDA_CUDA_OP_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ep/cuda/cuda_device.h"
#include "gtest/gtest.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/ops/op_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::testing {

class CudaOpFixture : public ::testing::Test {
 protected:
  static inline const Device kHost{DeviceType::kCpu, 0};

  void SetUp() override {
    if (ep::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    ep::RuntimeOptions runtime_options;
    runtime_options.num_sim_devices = 0;
    runtime_options.enable_cuda = true;
    runtime_ = ep::Runtime::Create(runtime_options).value();
    vm_ = vm::VirtualMachine::Create(runtime_.get(), vm::VmOptions()).value();
    ASSERT_TRUE(RegisterStandardOps(&registry_).ok());
    builder_ = std::make_unique<vm::InstructionsBuilder>(vm_.get());
    dispatcher_ = std::make_unique<OpDispatcher>(&registry_, vm_.get(), builder_.get());
  }
  void TearDown() override {
    if (vm_ != nullptr) {
      const absl::Status synced = vm_->Sync();
      EXPECT_TRUE(synced.ok()) << synced;
    }
    dispatcher_.reset();
    builder_.reset();
    vm_.reset();
  }

  // A blob of `dtype` and `shape` holding `values`, on the cpu (`device` cpu) or copied to
  // cuda:0.
  vm::BlobRef Upload(DataType dtype, const Shape& shape, const std::vector<double>& values,
                     Device device) {
    vm::Stream* stream = vm_->GetStream(StreamKey{kHost}).value();
    vm::BlobRef blob = vm_->NewBlob(stream, dtype, shape).value();
    std::vector<uint8_t> bytes(blob->bytes());
    for (size_t i = 0; i < values.size(); ++i) {
      OpsHarness::Store(dtype, bytes.data(), i, values[i]);
    }
    const absl::Status written = builder_->WriteBlob(blob, bytes);
    EXPECT_TRUE(written.ok()) << written;
    if (device == kHost) return blob;
    absl::StatusOr<SlotBlobs> moved = dispatcher_->Call(
        "memcpy_h2d", {{blob}}, vm::AttrMap().Set("device", std::string("cuda:0")));
    EXPECT_TRUE(moved.ok()) << moved.status();
    return moved.ok() ? (*moved)[0][0] : nullptr;
  }
  // `blob`'s values (copied back to the host first when it is on cuda).
  std::vector<double> Download(vm::BlobRef blob) {
    if (blob->device().type() == DeviceType::kCuda) {
      absl::StatusOr<SlotBlobs> back = dispatcher_->Call("memcpy_d2h", {{blob}}, {});
      EXPECT_TRUE(back.ok()) << back.status();
      if (!back.ok()) return {};
      blob = (*back)[0][0];
    }
    absl::StatusOr<std::vector<uint8_t>> bytes = builder_->ReadBlob(blob);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (!bytes.ok()) return {};
    std::vector<double> values(blob->bytes() / SizeOf(blob->dtype()));
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = OpsHarness::Load(blob->dtype(), bytes->data(), i);
    }
    return values;
  }

  std::unique_ptr<ep::Runtime> runtime_;
  std::unique_ptr<vm::VirtualMachine> vm_;
  OpRegistry registry_;
  std::unique_ptr<vm::InstructionsBuilder> builder_;
  std::unique_ptr<OpDispatcher> dispatcher_;
};

}  // namespace sluice::ops::testing

#endif  // SLUICE_TESTS_OPS_CUDA_CUDA_OP_FIXTURE_H_
