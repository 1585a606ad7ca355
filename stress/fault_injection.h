// Fault injection for `sluice stress --fail-rate` (eager mode): the kernel hook, the names
// that let a checker trace each injected fault through the VM's errors, and the reference
// rule for which tensors a failure must poison.
//
// The three hooks and where they live:
//  - kernels: FaultInjectingKernel (here) wraps a stress kernel; its Launch fails before
//    the kernel runs when its FaultInjector fires for the op's `fault_key` attribute.
//  - devices: SimOptions::device_faults (ep/sim/sim_device.h) fails a sim work item that
//    the VM launched with ep::Stream::LaunchFallible (a kernel's work).
//  - allocations: FaultInjectingAllocator (core/fault_injecting_allocator.h) around a
//    device's allocator, given to VirtualMachine::NewBlob when the runner creates a tensor
//    for the op that first writes it (an eager blob allocates when created, so the refusal
//    is that op's error at once; a lazy blob, which the eager builder refuses, would make
//    it the instruction's error — tests/vm/fault_paths_test.cc covers that path).
// Every injected error carries FaultInjector::Describe's text ("injected kernel fault #3"),
// and the runner points each op at a StressOpOrigin, so the VM's error names the op's
// kernel and its place in the program: "op 'add' #12 on sim:0/compute:1 (stress op 17):
// injected kernel fault #3".
#ifndef SLUICE_STRESS_FAULT_INJECTION_H_
#define SLUICE_STRESS_FAULT_INJECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/fault_injector.h"
#include "ops/kernel_registry.h"
#include "stress/stress_program.h"
#include "vm/instruction.h"
#include "vm/kernel.h"

namespace sluice::stress {

// The attribute that keys an op's kernel fault (an int; an op without it never fails).
inline constexpr absl::string_view kFaultKeyAttr = "fault_key";

// Wraps `inner` (which must outlive it) under the same name. Launch fails with Internal
// "injected kernel fault #N" when `faults` fires for the op's kFaultKeyAttr, and runs
// `inner` otherwise. With `swallow` (a check of the checks, see
// EagerStressOptions::swallow_kernel_faults), a fired fault instead returns OK without
// running the kernel: counted as injected, but neither reported nor poisoning anything.
// Thread-safe, like every kernel; `faults` must outlive it.
class FaultInjectingKernel final : public vm::OpKernel {
 public:
  FaultInjectingKernel(const vm::OpKernel* inner, FaultInjector* faults, bool swallow)
      : inner_(inner), faults_(faults), swallow_(swallow) {}
  absl::string_view name() const override { return inner_->name(); }
  absl::Status Launch(vm::KernelContext& ctx) const override;

 private:
  const vm::OpKernel* const inner_;
  FaultInjector* const faults_;
  const bool swallow_;
};

// Registers a FaultInjectingKernel around each kernel a stress program uses (fill, add,
// mul, scale, copy: found in `inner`, which must outlive `out`) in `out`.
absl::Status RegisterFaultInjectingKernels(const ops::KernelRegistry& inner, FaultInjector* faults,
                                           bool swallow, ops::KernelRegistry* out);

// "stress op 17": how an op's errors name its place in its program. Immutable; any thread.
class StressOpOrigin final : public vm::InstructionOrigin {
 public:
  explicit StressOpOrigin(int op) : op_(op) {}
  std::string Describe() const override;
  int op() const { return op_; }

 private:
  const int op_;
};

// What an error text says about the faults in it: every "injected <kind> fault #N" it
// carries, and the op it names (-1 and "" when it names none), parsed from the VM's
// "op 'KERNEL' ... (stress op I)" prefix.
struct FaultTrace {
  std::vector<std::string> faults;  // "kernel fault #3", ...
  std::string kernel;
  int op = -1;
};
FaultTrace TraceFaults(absl::string_view error);

// The reference's rule for failures: a tensor is tainted when its last write was by an op
// in `failed` or by an op that read a tainted tensor (the VM skips such an op and poisons
// its outputs); any other write — an op that ran, with untainted inputs — clears it, as
// the VM's ClearPoison does. Tainted tensors must read back as errors; the others hold
// RunStressReference's values bit for bit. `failed[i]` is op i of `program.ops`.
std::vector<bool> TaintedTensors(const StressProgram& program, const std::vector<bool>& failed);

}  // namespace sluice::stress

#endif  // SLUICE_STRESS_FAULT_INJECTION_H_
