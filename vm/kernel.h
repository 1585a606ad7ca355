// OpKernel and KernelContext: what an OpCall instruction runs. A kernel validates its
// operands and enqueues its work on the instruction's ep::Stream; it never blocks on the
// device. Kernels live in ops/ (registered per op and device type); the VM only needs this
// interface.
#ifndef SLUICE_VM_KERNEL_H_
#define SLUICE_VM_KERNEL_H_

#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/intra_op_pool.h"
#include "ep/stream.h"
#include "vm/attrs.h"
#include "vm/blob.h"

namespace sluice::vm {

class Instruction;
class ErrorSink;
class InstructionExecutor;
class SyncChecker;
class Tracer;
class Recorder;

// Built by the ThreadCtx worker for one Launch call; valid only during it.
class KernelContext {
 public:
  KernelContext(Instruction* instruction, ep::Stream* stream, ErrorSink* errors,
                std::atomic<int64_t>* skipped = nullptr, InstructionExecutor* executor = nullptr)
      : instruction_(instruction),
        stream_(stream),
        errors_(errors),
        skipped_(skipped),
        executor_(executor) {}

  // The operands. A kernel reads their bytes through Blob::raw_storage() (storage() also
  // works, but reads a line the scheduler writes).
  absl::Span<Blob* const> inputs() const;
  absl::Span<Blob* const> outputs() const;
  const AttrMap& attrs() const;
  ep::Stream* stream() const { return stream_; }
  // The instruction being run (its vm::Stream, its sequence number).
  const Instruction* instruction() const { return instruction_; }

  // Enqueues host code on the stream (cpu runs it now). The work runs in stream order and
  // re-checks the inputs' poison when it runs: if an earlier failure on the device poisoned
  // an input, the work is skipped and the outputs inherit the error. An error it returns
  // poisons the outputs and is reported as this op's error. Use it for kernels whose
  // memory the host can address (cpu, sim).
  absl::Status LaunchHostWork(absl::AnyInvocable<absl::Status()> work);
  // True when LaunchHostWork would run the work at once on this thread (a synchronous
  // stream, no tracer): a kernel may then hand it to RunHostWorkNow by reference instead of
  // building an AnyInvocable (which allocates for captures over two pointers).
  bool host_work_runs_now() const;
  // LaunchHostWork where host_work_runs_now(): runs `work` now under the same rules.
  absl::Status RunHostWorkNow(absl::FunctionRef<absl::Status()> work);

  // True once LaunchHostWork was called (the work then settles the outputs' poison).
  bool ran_host_work() const { return ran_host_work_; }

  // Runs `step` (an OpCall or Release not owned by the VM; see StepSequence) on this
  // instruction's stream now, with a lone instruction's rules. Its errors are reported
  // under its own name; nothing is returned. Only for contexts the VM's executor built.
  // `check` (only with a sync_checker()): the checker sees the step's accesses as it is
  // launched, in this instruction's stream order (SyncChecker::OnStepLaunch).
  void RunStep(Instruction* step, bool check = false);
  // The VM's recorder, or null when it records nothing (or the context has no executor).
  Recorder* recorder() const;
  // The tracer timing this run's work, or null (also without an executor).
  Tracer* tracer() const;
  // The VM's sync checker, or null when it checks nothing (or the context has no executor).
  // A kernel that runs steps and orders them against other work itself (StepSequence) tests
  // this once per Launch and reports through RunStep(step, true) and the two calls below,
  // which require it to be non-null.
  SyncChecker* sync_checker() const;
  // The kernel running here (`sequence`) has passed its first `steps` steps in the run
  // tagged `run_tag`, and another sequence may wait for that: call before the progress
  // that releases the waiter becomes visible.
  void NoteSequencePassed(const void* sequence, uint64_t run_tag, uint32_t steps);
  // The kernel running here waited until `source` passed its first `steps` steps in the
  // run tagged `run_tag` (an ordering edge, like a StreamWait honoured on the host).
  void NoteSequenceWaited(const void* source, uint64_t run_tag, uint32_t steps);
  // True once the VM cancels its work (Shutdown(kCancel)): a kernel that waits for other
  // work (StepSequence's cross-sequence waits) stops waiting. False without an executor.
  bool vm_cancelling() const;
  // A kernel that copies bytes between host memory and a device (memcpy_h2d: `to_device`,
  // memcpy_d2h: not) calls this once per launch, so that VmStats::host_to_device_copies /
  // device_to_host_copies count it. A relaxed counter update; nothing without an executor.
  void CountHostCopy(bool to_device);
  // How this kernel splits its work across the host's cores: the stream's device's intra-op
  // pool (ep::Device::intra_op_pool; none on cuda and sim, whose scope runs everything on the
  // calling thread), the VM's cancel flag and its statistics (VmStats::parallel_*). A value
  // the kernel may capture in host work that runs later in stream order.
  ParallelScope parallel() const;
  // parallel().For(...), now (during Launch, or in work RunHostWorkNow runs).
  absl::Status ParallelFor(int64_t n, int64_t grain,
                           absl::FunctionRef<void(int64_t, int64_t)> fn) const {
    return parallel().For(n, grain, fn, "kernel's parallel region");
  }

 private:
  Instruction* const instruction_;
  ep::Stream* const stream_;
  ErrorSink* const errors_;
  std::atomic<int64_t>* const skipped_;  // counts work skipped for a poisoned input
  InstructionExecutor* const executor_;
  bool ran_host_work_ = false;
};

// The attribute (an int, a bit per flat output position) that makes a kernel add into its
// outputs instead of overwriting them; see OpKernel::CanAddTo.
inline constexpr char kAddToAttr[] = "addto";

// Which of a kernel's (input, output) operand pairs may be one blob. Kernels written for
// distinct operands (a cuda matmul's threads read operands other threads' outputs overwrite)
// compute wrong values when an output is also an input; ops declare the pairs whose kernels
// read each element before they write it (ops::OpSchema::InPlace), and the registry hands
// the declaration to each kernel it registers. Pairs are by slot: (input slot, output slot),
// the k-th tensor of one with the k-th tensor of the other. A kernel outside an op registry
// declares nothing (`declared` false): the sync checker and the sim's output poisoning then
// leave it alone. Value type.
struct InPlaceContract {
  bool declared = false;
  // Slots per side; the last of a side may be variadic. An optional input slot that was
  // left empty makes operand positions ambiguous: Allows then answers false.
  int input_slots = 0;
  int output_slots = 0;
  bool input_variadic = false;                             // the last input slot
  bool output_variadic = false;                            // the last output slot
  absl::InlinedVector<std::pair<int, int>, 2> slot_pairs;  // (input slot, output slot)

  // May flat input operand `input` (of `num_inputs`) share its blob with flat output operand
  // `output` (of `num_outputs`)? True for an undeclared contract (nothing is known).
  bool Allows(int input, int output, int num_inputs, int num_outputs) const;
  // Is output operand `output` in a declared pair with some input (it may then be written in
  // place, and holds an input's value when the kernel starts)?
  bool OutputMayAlias(int output, int num_inputs, int num_outputs) const;
};

// Thread-safe: Launch may run on several workers at once; kernels keep no mutable state —
// except a kernel that one instruction or step alone runs (a StepSequence, a control step),
// which may keep per-launch state, since its launches follow one another.
class OpKernel {
 public:
  virtual ~OpKernel() = default;
  // The op's name, as recorded and as errors report it ("add", "fill").
  virtual absl::string_view name() const = 0;
  // Worker thread. Validates operands and attributes (returning InvalidArgument naming the
  // culprit) and enqueues the work. An error becomes the op's error (see ErrorSink).
  virtual absl::Status Launch(KernelContext& ctx) const = 0;
  // True for kernels that settle their operands' poison themselves (StepSequence: each step
  // checks its own inputs); the executor then neither skips nor clears around Launch.
  virtual bool handles_poison() const { return false; }
  // True when Launch reports each access to the sync checker itself, step by step
  // (KernelContext::RunStep with `check`), so the checker does not check the enclosing
  // instruction's listed operands (StepSequence).
  virtual bool checks_own_steps() const { return false; }
  // True for kernels whose Launch runs steps it decides on at run time (control flow) and
  // logs them for the recorder (vm/step_log.h): a StepSequence logging its steps leaves
  // such a step out, since its own steps are logged.
  virtual bool logs_own_steps() const { return false; }

  // True when the kernel honours kAddToAttr for flat output `output`: with that bit set it
  // adds its result into the output's current value instead of overwriting it (Paddle's
  // use_addto; the add-to pass, framework/interpreter/addto_pass.h). Such an output is read:
  // the sim leaves it unpoisoned. Must hold on every device the kernel is registered for.
  virtual bool CanAddTo(int /*output*/) const { return false; }
  // True when the kernel reads only flat input `input`'s shape and dtype, never its values
  // (Paddle's "no need buffer" inputs: add_grad's X and Y). The interpreter's GC plan then
  // does not keep the input's storage alive for this op, the host kernels see its data
  // pointer as null (so a kernel that reads it anyway crashes in every test, on every host
  // device), and the sync checker does not count it as an access.
  virtual bool ReadsShapeOnly(int /*input*/) const { return false; }

  // The op's in-place contract (InPlaceContract). Set once by the op registry as it
  // registers the kernel, before any lookup; read-only afterwards.
  const InPlaceContract& in_place() const { return in_place_; }
  void set_in_place(InPlaceContract contract) { in_place_ = std::move(contract); }

 private:
  InPlaceContract in_place_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_KERNEL_H_
