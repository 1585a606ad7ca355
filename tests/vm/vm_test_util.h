// Shared fixtures for the VM tests: a Runtime with cpu and two sim devices, a VM over it,
// the host kernels, helpers to fill and read f32 blobs, and a wait for Shutdown's barrier.
#ifndef SLUICE_TESTS_VM_VM_TEST_UTIL_H_
#define SLUICE_TESTS_VM_VM_TEST_UTIL_H_

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ep/runtime.h"
#include "gtest/gtest.h"
#include "ops/kernel_registry.h"
#include "ops/stress_kernels.h"
#include "tests/vm/test_kernels.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::testing {

// Holds the scheduler thread inside a barrier callback until Release(). Going out of scope
// releases it and waits until the callback has left (it uses this object).
class SchedulerHold {
 public:
  explicit SchedulerHold(InstructionsBuilder* builder) {
    EXPECT_TRUE(builder
                    ->Barrier([this] {
                      entered_.store(true);
                      gate_.Wait();
                      left_.store(true);  // the callback's last use of this object
                    })
                    .ok());
    EXPECT_TRUE(WaitUntil([this] { return entered_.load(); }));
  }
  ~SchedulerHold() {
    Release();
    if (entered_.load()) {
      EXPECT_TRUE(WaitUntil([this] { return left_.load(); }));
    }
  }
  void Release() { gate_.Open(); }

 private:
  std::atomic<bool> entered_{false};
  std::atomic<bool> left_{false};
  Gate gate_;
};

// What VirtualMachine::Create says of `options` on a cpu-only runtime (option checks).
inline absl::Status CreateStatus(VmOptions options) {
  ep::RuntimeOptions runtime_options;
  runtime_options.enable_cuda = false;
  auto runtime = ep::Runtime::Create(runtime_options).value();
  return VirtualMachine::Create(runtime.get(), std::move(options)).status();
}

struct VmHarness {
  explicit VmHarness(VmOptions options = {}, ep::RuntimeOptions runtime_options = {}) {
    runtime_options.enable_cuda = false;
    runtime = ep::Runtime::Create(runtime_options).value();
    vm = VirtualMachine::Create(runtime.get(), std::move(options)).value();
    EXPECT_TRUE(ops::RegisterStressKernels(&kernels).ok());
    builder = std::make_unique<InstructionsBuilder>(vm.get());
  }
  ~VmHarness() {
    builder.reset();
    vm.reset();
  }

  Stream* S(absl::string_view key) { return vm->GetStream(key).value(); }
  const OpKernel& K(absl::string_view name) { return *kernels.Find(name).value(); }

  BlobRef NewF32(absl::string_view stream, int64_t n, const std::string& name = "") {
    return vm->NewBlob(S(stream), DataType::kF32, Shape({n}), name).value();
  }
  absl::Status Write(const BlobRef& blob, const std::vector<float>& values) {
    return builder->WriteBlob(blob,
                              absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(values.data()),
                                                  values.size() * sizeof(float)));
  }
  absl::StatusOr<std::vector<float>> Read(const BlobRef& blob) {
    absl::StatusOr<std::vector<uint8_t>> bytes = builder->ReadBlob(blob);
    if (!bytes.ok()) return bytes.status();
    std::vector<float> values(bytes->size() / sizeof(float));
    std::memcpy(values.data(), bytes->data(), bytes->size());
    return values;
  }
  absl::Status Fill(const BlobRef& y, double value, absl::string_view stream) {
    return builder->Call(K("fill"), {}, {y}, AttrMap().Set("value", value), S(stream));
  }
  absl::Status Add(const BlobRef& a, const BlobRef& b, const BlobRef& y, absl::string_view stream) {
    return builder->Call(K("add"), {a, b}, {y}, AttrMap(), S(stream));
  }
  // y = a + b as a call whose output was just created for it (what OpDispatcher does: see
  // InstructionsBuilder::CallPtrs, `fresh_outputs`).
  absl::Status FreshAdd(const BlobRef& a, const BlobRef& b, const BlobRef& y,
                        absl::string_view stream) {
    Blob* in[] = {a.get(), b.get()};
    Blob* out[] = {y.get()};
    return builder->CallPtrs(K("add"), in, out, nullptr, S(stream), /*fresh_outputs=*/true);
  }

  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<VirtualMachine> vm;
  ops::KernelRegistry kernels;
  std::unique_ptr<InstructionsBuilder> builder;
};

// After Shutdown was called on another thread: waits until it submitted its final barrier
// (the VM had `barriers_before` barriers before). By then the VM is closed to new work and,
// for kCancel, has raised its cancel flag. False if kHangGuard passed first.
inline bool WaitForShutdownBarrier(VirtualMachine* vm, int64_t barriers_before) {
  return WaitUntil([vm, barriers_before] { return vm->stats().barriers > barriers_before; });
}

// Test-name part for the two scheduling modes.
inline std::string SchedulingName(VmOptions::Scheduling scheduling) {
  return scheduling == VmOptions::Scheduling::kDedicatedThread ? "DedicatedThread" : "CallerThread";
}

// Instantiates a TEST_P suite parameterized by VmOptions::Scheduling over both modes.
#define SLUICE_INSTANTIATE_FOR_SCHEDULING(suite)                                      \
  INSTANTIATE_TEST_SUITE_P(                                                           \
      Scheduling, suite,                                                              \
      ::testing::Values(::sluice::vm::VmOptions::Scheduling::kDedicatedThread,        \
                        ::sluice::vm::VmOptions::Scheduling::kCallerThread),          \
      [](const ::testing::TestParamInfo<::sluice::vm::VmOptions::Scheduling>& info) { \
        return ::sluice::vm::testing::SchedulingName(info.param);                     \
      })

}  // namespace sluice::vm::testing

#endif  // SLUICE_TESTS_VM_VM_TEST_UTIL_H_
