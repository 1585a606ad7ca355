// A minimal embedder, built against the installed Sluice package by scripts/install_test.sh:
// a Runtime, a VM over it and the host kernels; y = a + b computed eagerly on sim:0 with a
// on another stream (so soft sync inserts a StreamWait), then read back and checked.
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "core/status.h"
#include "ep/runtime.h"
#include "ops/host_kernels.h"
#include "ops/kernel_registry.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace {

absl::Status Run() {
  using sluice::vm::AttrMap;
  SLUICE_ASSIGN_OR_RETURN(auto runtime, sluice::ep::Runtime::Create());
  SLUICE_ASSIGN_OR_RETURN(auto vm, sluice::vm::VirtualMachine::Create(runtime.get()));
  sluice::ops::KernelRegistry kernels;
  SLUICE_RETURN_IF_ERROR(sluice::ops::RegisterHostKernels(&kernels));
  SLUICE_ASSIGN_OR_RETURN(const sluice::vm::OpKernel* fill, kernels.Find("fill"));
  SLUICE_ASSIGN_OR_RETURN(const sluice::vm::OpKernel* add, kernels.Find("add"));
  SLUICE_ASSIGN_OR_RETURN(sluice::vm::Stream * compute, vm->GetStream("sim:0/compute"));
  SLUICE_ASSIGN_OR_RETURN(sluice::vm::Stream * h2d, vm->GetStream("sim:0/h2d"));

  const sluice::Shape shape({4});
  SLUICE_ASSIGN_OR_RETURN(auto a, vm->NewBlob(h2d, sluice::DataType::kF32, shape, "a"));
  SLUICE_ASSIGN_OR_RETURN(auto b, vm->NewBlob(compute, sluice::DataType::kF32, shape, "b"));
  SLUICE_ASSIGN_OR_RETURN(auto y, vm->NewBlob(compute, sluice::DataType::kF32, shape, "y"));

  sluice::vm::InstructionsBuilder builder(vm.get());
  SLUICE_RETURN_IF_ERROR(builder.Call(*fill, {}, {a}, AttrMap().Set("value", 1.5), h2d));
  SLUICE_RETURN_IF_ERROR(builder.Call(*fill, {}, {b}, AttrMap().Set("value", 2.0), compute));
  SLUICE_RETURN_IF_ERROR(builder.Call(*add, {a, b}, {y}, AttrMap(), compute));
  SLUICE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, builder.ReadBlob(y));
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  for (float v : values) {
    if (v != 3.5f) return absl::InternalError("y != a + b");
  }
  SLUICE_RETURN_IF_ERROR(vm->Sync());
  std::printf("y = a + b = %.1f; %s\n", values[0], vm->stats().ToString().c_str());
  return absl::OkStatus();
}

}  // namespace

int main() {
  const absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "consumer: %s\n", status.ToString().c_str());
    return 1;
  }
  std::puts("OK");
  return 0;
}
