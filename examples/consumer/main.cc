// A minimal embedder, built against the installed Sluice package by scripts/install_test.sh.
// Two ways in: the eager front end (relu(x @ w) on sim:0, read back and checked), and the VM
// directly (a Runtime, a VM and the host kernels; y = a + b on sim:0 with a on another
// stream, so soft sync inserts a StreamWait). Prints OK on stdout when both agree with the
// expected numbers; details go to stderr.
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "core/status.h"
#include "ep/runtime.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "ops/kernel_registry.h"
#include "ops/stress_kernels.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace {

absl::Status RunEager() {
  using sluice::Device;
  using sluice::DeviceType;
  using sluice::Shape;
  namespace eager = sluice::eager;
  SLUICE_ASSIGN_OR_RETURN(eager::Context ctx, eager::Context::Create());
  const Device sim0(DeviceType::kSim, 0);
  SLUICE_ASSIGN_OR_RETURN(eager::Tensor x,
                          ctx.FromVector(std::vector<float>{1, -2, 3, -4}, Shape({2, 2}), sim0));
  SLUICE_ASSIGN_OR_RETURN(eager::Tensor w,
                          ctx.FromVector(std::vector<float>{1, 0, 0, 1}, Shape({2, 2}), sim0));
  SLUICE_ASSIGN_OR_RETURN(eager::Tensor xw, sluice::fn::Matmul(x, w));
  SLUICE_ASSIGN_OR_RETURN(eager::Tensor y, sluice::fn::Relu(xw));
  SLUICE_ASSIGN_OR_RETURN(std::vector<float> out, y.ToVector<float>());
  if (out != std::vector<float>{1, 0, 3, 0}) return absl::InternalError("relu(x @ I) != relu(x)");
  // Bad input is a Status naming the op, not a crash.
  SLUICE_ASSIGN_OR_RETURN(eager::Tensor v, ctx.FromVector(std::vector<float>{1, 2, 3}, Shape({3})));
  if (sluice::fn::Add(x, v).ok())
    return absl::InternalError("adding [2, 2] and [3] on two devices");
  std::fprintf(stderr, "eager: relu(x @ w) = [%g %g %g %g]\n", out[0], out[1], out[2], out[3]);
  return ctx.Sync();
}

absl::Status Run() {
  using sluice::vm::AttrMap;
  SLUICE_ASSIGN_OR_RETURN(auto runtime, sluice::ep::Runtime::Create());
  SLUICE_ASSIGN_OR_RETURN(auto vm, sluice::vm::VirtualMachine::Create(runtime.get()));
  sluice::ops::KernelRegistry kernels;
  SLUICE_RETURN_IF_ERROR(sluice::ops::RegisterStressKernels(&kernels));
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
  std::fprintf(stderr, "vm: y = a + b = %.1f; %s\n", values[0], vm->stats().ToString().c_str());
  return absl::OkStatus();
}

}  // namespace

int main() {
  absl::Status status = RunEager();
  if (status.ok()) status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "consumer: %s\n", status.ToString().c_str());
    return 1;
  }
  std::puts("OK");
  return 0;
}
