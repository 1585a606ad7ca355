// HostKernel on sim poisons (NaN for floats) every output in no declared in-place pair, and
// one that is also an input of an undeclared pair, before the kernel runs, so a kernel
// launched on aliased operands shows wrong values on sim as it would on a GPU; a declared
// pair runs in place.
#include "ops/cpu/host_kernel.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/ops/op_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::host_kernel_test {
namespace {

using testing::OpsHarness;

TEST(HostKernelTest, SimPoisonsOutputsAliasingUndeclaredInputs) {
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 1;
  runtime_options.enable_cuda = false;
  std::unique_ptr<ep::Runtime> runtime = ep::Runtime::Create(runtime_options).value();
  std::unique_ptr<vm::VirtualMachine> vm = vm::VirtualMachine::Create(runtime.get()).value();
  OpRegistry registry;
  ASSERT_TRUE(RegisterStandardOps(&registry).ok());
  vm::InstructionsBuilder builder(vm.get());
  const Device sim(DeviceType::kSim, 0);
  vm::Stream* stream = vm->GetStream(StreamKey{sim}).value();
  auto upload = [&](const std::vector<float>& v) {
    vm::BlobRef blob = vm->NewBlob(stream, DataType::kF32, Shape({2, 2})).value();
    std::vector<uint8_t> bytes(blob->bytes());
    for (size_t i = 0; i < v.size(); ++i) OpsHarness::Store(DataType::kF32, bytes.data(), i, v[i]);
    EXPECT_TRUE(builder.WriteBlob(blob, bytes).ok());
    return blob;
  };
  auto download = [&](const vm::BlobRef& blob) {
    std::vector<uint8_t> bytes = builder.ReadBlob(blob).value();
    std::vector<double> v(4);
    for (size_t i = 0; i < 4; ++i) v[i] = OpsHarness::Load(DataType::kF32, bytes.data(), i);
    return v;
  };
  const vm::OpKernel& transpose =
      *registry.FindKernel("transpose", DeviceType::kSim, DataType::kF32).value();
  const vm::OpKernel& matmul =
      *registry.FindKernel("matmul", DeviceType::kSim, DataType::kF32).value();
  const vm::OpKernel& add = *registry.FindKernel("add", DeviceType::kSim, DataType::kF32).value();
  // Kernels launched directly take normalized attributes (every one set).
  const vm::AttrMap kNoTranspose =
      vm::AttrMap().Set("transpose_x", int64_t{0}).Set("transpose_y", int64_t{0});
  vm::BlobRef x = upload({1, 2, 3, 4});
  vm::BlobRef y = upload({1, 0, 0, 1});
  ASSERT_TRUE(builder.Call(matmul, {x, y}, {x}, kNoTranspose, stream).ok());
  // The host matmul zeroes its output before it accumulates: X reads as zeros.
  EXPECT_EQ(download(x), (std::vector<double>{0, 0, 0, 0}));
  vm::BlobRef t = upload({1, 2, 3, 4});
  ASSERT_TRUE(
      builder
          .Call(transpose, {t}, {t}, vm::AttrMap().Set("perm", std::vector<int64_t>{1, 0}), stream)
          .ok());
  for (double v : download(t)) EXPECT_TRUE(std::isnan(v)) << v;
  vm::BlobRef a = upload({1, 2, 3, 4});
  ASSERT_TRUE(builder.Call(add, {a, y}, {a}, vm::AttrMap(), stream).ok());
  EXPECT_EQ(download(a), (std::vector<double>{2, 2, 3, 5}));
  ASSERT_TRUE(vm->Sync().ok());
}

}  // namespace
}  // namespace sluice::ops::host_kernel_test
