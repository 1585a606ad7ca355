#include "vm/internal/instruction_executor.h"

#include <chrono>
#include <exception>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/status_from_call.h"
#include "ep/device.h"
#include "ep/stream.h"
#include "vm/execution_observer.h"
#include "vm/internal/blob_lifecycle.h"
#include "vm/internal/stream_policy.h"
#include "vm/kernel.h"
#include "vm/recorder.h"
#include "vm/release_count.h"
#include "vm/step_sequence.h"
#include "vm/stream.h"
#include "vm/sync_checker.h"

namespace sluice::vm {

// --- KernelContext (declared in kernel.h; it needs the executor's rules). ---

namespace {

// Slot and position within it of flat operand `i` of `n`, over `slots` slots whose last is
// variadic or not. False when the count does not fit the slots (an empty optional slot).
bool LocateOperand(int i, int n, int slots, bool variadic, int* slot, int* position) {
  if (i < 0 || i >= n || slots == 0) return false;
  if (!variadic) {
    if (n != slots) return false;
    *slot = i;
    *position = 0;
    return true;
  }
  const int fixed = slots - 1;
  if (n < fixed) return false;
  *slot = i < fixed ? i : fixed;
  *position = i < fixed ? 0 : i - fixed;
  return true;
}

}  // namespace

bool InPlaceContract::Allows(int input, int output, int num_inputs, int num_outputs) const {
  if (!declared) return true;
  int in_slot = 0, in_pos = 0, out_slot = 0, out_pos = 0;
  if (!LocateOperand(input, num_inputs, input_slots, input_variadic, &in_slot, &in_pos) ||
      !LocateOperand(output, num_outputs, output_slots, output_variadic, &out_slot, &out_pos)) {
    return false;
  }
  if (in_pos != out_pos) return false;
  for (const auto& [in, out] : slot_pairs) {
    if (in == in_slot && out == out_slot) return true;
  }
  return false;
}

bool InPlaceContract::OutputMayAlias(int output, int num_inputs, int num_outputs) const {
  if (!declared) return true;
  for (int input = 0; input < num_inputs; ++input) {
    if (Allows(input, output, num_inputs, num_outputs)) return true;
  }
  return false;
}

absl::Span<Blob* const> KernelContext::inputs() const { return instruction_->inputs; }
absl::Span<Blob* const> KernelContext::outputs() const { return instruction_->outputs; }
const AttrMap& KernelContext::attrs() const {
  static const AttrMap* const kEmpty = new AttrMap();
  return instruction_->attrs != nullptr ? *instruction_->attrs : *kEmpty;
}

namespace {

// True when an input of `instruction` is poisoned (then InstructionExecutor::InputPoison
// says with what): a load per input, no Status built.
// Whether input `i` of `instruction` counts for poison: not one its kernel reads the shape
// of alone (OpKernel::ReadsShapeOnly): its blob may be a later value's by now, through a
// storage hand-off, whose poison is not this op's business. Asked only of a poisoned input.
bool PoisonCounts(const Instruction& instruction, size_t i) {
  return instruction.kind != InstructionKind::kOpCall || instruction.kernel == nullptr ||
         !instruction.kernel->ReadsShapeOnly(static_cast<int>(i));
}

bool AnyInputPoisoned(const Instruction& instruction) {
  for (size_t i = 0; i < instruction.inputs.size(); ++i) {
    if (instruction.inputs[i]->poisoned() && PoisonCounts(instruction, i)) return true;
  }
  return false;
}

// Host work of one op, run now: re-checks poison, and turns its error into the op's.
// `work` null: only settle the outputs' poison.
absl::Status SettleHostWork(Instruction* instruction, ErrorSink* errors,
                            std::atomic<int64_t>* skipped, Tracer* tracer,
                            const absl::FunctionRef<absl::Status()>* work) {
  if (AnyInputPoisoned(*instruction)) {
    absl::Status poison = InstructionExecutor::InputPoison(*instruction);
    if (!poison.ok()) {
      for (Blob* blob : instruction->outputs) blob->Poison(poison);
      instruction->status = poison;
      if (skipped != nullptr) VmCounters::Add(*skipped);
      return absl::OkStatus();
    }
  }
  if (work == nullptr) {
    for (Blob* blob : instruction->outputs) blob->ClearPoison();
    return absl::OkStatus();
  }
  const int64_t begin = tracer != nullptr ? Tracer::NowNs() : 0;
  absl::Status status = StatusFromCall("host work", *work);
  if (tracer != nullptr) {
    tracer->Add({instruction->stream, instruction->name(), begin, Tracer::NowNs()});
  }
  if (status.ok()) {
    for (Blob* blob : instruction->outputs) blob->ClearPoison();
    return absl::OkStatus();
  }
  const absl::Status error(status.code(),
                           absl::StrCat(instruction->DebugString(), ": ", status.message()));
  for (Blob* blob : instruction->outputs) blob->Poison(error);
  instruction->status = error;
  errors->Report(error);
  // Reported here with the op's name; the stream itself need not remember it.
  return absl::OkStatus();
}

// Host work of one op, enqueued: settles as above when the stream runs it. Lives in the
// HostTask; the instruction outlives it (it retires only after the stream passed the
// completion point that follows this work).
struct HostWork {
  Instruction* instruction;
  ErrorSink* errors;
  std::atomic<int64_t>* skipped;            // may be null
  absl::AnyInvocable<absl::Status()> work;  // null: only settle the outputs' poison
  Tracer* tracer = nullptr;                 // times `work` when set

  absl::Status operator()() {
    if (work == nullptr) return SettleHostWork(instruction, errors, skipped, tracer, nullptr);
    auto call = [this] { return work(); };
    const absl::FunctionRef<absl::Status()> ref(call);
    return SettleHostWork(instruction, errors, skipped, tracer, &ref);
  }
};

}  // namespace

absl::Status KernelContext::LaunchHostWork(absl::AnyInvocable<absl::Status()> work) {
  ran_host_work_ = true;
  HostWork host_work{instruction_, errors_, skipped_, std::move(work),
                     executor_ != nullptr ? executor_->tracer() : nullptr};
  // A synchronous stream would run the task at once anyway: skip wrapping it (the wrapper
  // does not fit a HostTask's inline storage, so that would cost an allocation per op).
  if (!stream_->IsAsync()) return host_work();
  // A device that fails the work as a whole (ep::Stream::LaunchFallible) fails the op: its
  // outputs are poisoned in stream order and the error names the op, as for an error the
  // work returns.
  Instruction* instruction = instruction_;
  ErrorSink* errors = errors_;
  return stream_->LaunchFallible(
      std::move(host_work), [instruction, errors](const absl::Status& device_error) {
        const absl::Status error(device_error.code(), absl::StrCat(instruction->DebugString(), ": ",
                                                                   device_error.message()));
        for (Blob* blob : instruction->outputs) blob->Poison(error);
        instruction->status = error;
        errors->Report(error);
      });
}

bool KernelContext::host_work_runs_now() const {
  return !stream_->IsAsync() && (executor_ == nullptr || executor_->tracer() == nullptr);
}

absl::Status KernelContext::RunHostWorkNow(absl::FunctionRef<absl::Status()> work) {
  ran_host_work_ = true;
  return SettleHostWork(instruction_, errors_, skipped_,
                        executor_ != nullptr ? executor_->tracer() : nullptr, &work);
}

void KernelContext::RunStep(Instruction* step, bool check) {
  executor_->RunStep(step, instruction_, check);
}

Recorder* KernelContext::recorder() const {
  return executor_ != nullptr ? executor_->recorder() : nullptr;
}

Tracer* KernelContext::tracer() const {
  return executor_ != nullptr ? executor_->tracer() : nullptr;
}

SyncChecker* KernelContext::sync_checker() const {
  return executor_ != nullptr ? executor_->checker() : nullptr;
}

void KernelContext::NoteSequencePassed(const void* sequence, uint64_t run_tag, uint32_t steps) {
  executor_->checker()->OnSequencePassed(*instruction_, sequence, run_tag, steps);
}

void KernelContext::NoteSequenceWaited(const void* source, uint64_t run_tag, uint32_t steps) {
  executor_->checker()->OnSequenceWaited(*instruction_, source, run_tag, steps);
}

bool KernelContext::vm_cancelling() const {
  return executor_ != nullptr && executor_->cancelling();
}

ParallelScope KernelContext::parallel() const {
  IntraOpPool* pool = stream_->device()->intra_op_pool();
  if (executor_ == nullptr) return ParallelScope(pool, nullptr, nullptr);
  return executor_->parallel_scope(pool);
}

void KernelContext::CountHostCopy(bool to_device) {
  if (executor_ != nullptr) executor_->CountHostCopy(to_device);
}

// --- Tracer (declared in tracer.h). ---

int64_t Tracer::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// --- InstructionExecutor. ---

absl::Status InstructionExecutor::InputPoison(const Instruction& instruction) {
  for (size_t i = 0; i < instruction.inputs.size(); ++i) {
    Blob* blob = instruction.inputs[i];
    if (blob->poisoned() && PoisonCounts(instruction, i)) {
      absl::Status cause = blob->poison();
      if (!cause.ok()) return cause;
    }
  }
  return absl::OkStatus();
}

void InstructionExecutor::Fail(Instruction* instruction, const absl::Status& error) {
  const absl::Status annotated(error.code(),
                               absl::StrCat(instruction->DebugString(), ": ", error.message()));
  instruction->status = annotated;
  PoisonOutputs(instruction, annotated);
  errors_->Report(annotated);
}

void InstructionExecutor::Skip(Instruction* instruction, const absl::Status& cause) {
  instruction->status = cause;
  if (observer_ != nullptr && instruction->kind == InstructionKind::kOpCall &&
      instruction->kernel != nullptr && instruction->kernel->logs_own_steps()) {
    // A control step that did not run ran no steps: an empty expansion keeps the record
    // replayable (its line names no kernel of its own).
    observer_->OnControlExpanded(*instruction, {});
  }
  PoisonOutputs(instruction, cause);
  // A fused run skipped as a whole (cancellation) counts as the calls and releases in it.
  VmCounters::Add(counters_->skipped,
                  instruction->fused != nullptr ? instruction->fused->size() : 1);
}

void InstructionExecutor::PoisonOutputs(Instruction* instruction, const absl::Status& cause) {
  if (instruction->outputs.empty()) return;
  Stream* stream = instruction->stream;
  if (stream != nullptr && stream->poison_in_stream_order()) {
    // In stream order: an earlier write still queued on the stream settles the blob's
    // poison when it runs, and must not clear what this later failure sets. The
    // instruction outlives the task (it retires after the stream passes this point).
    Instruction* i = instruction;
    const absl::Status launched = stream->ep_stream()->Launch([i, cause]() {
      for (Blob* blob : i->outputs) blob->Poison(cause);
      return absl::OkStatus();
    });
    if (launched.ok()) return;
  }
  for (Blob* blob : instruction->outputs) blob->Poison(cause);
}

void InstructionExecutor::CountBorrow(bool reused) {
  VmCounters::Add(reused ? counters_->events_reused : counters_->events_created);
}

void InstructionExecutor::Run(Instruction* instruction) {
  if (cancel_ != nullptr && cancel_->load(std::memory_order_acquire)) {
    Skip(instruction,
         absl::CancelledError(absl::StrCat(instruction->DebugString(), ": cancelled by shutdown")));
    return;
  }
  if (observer_ != nullptr) observer_->OnLaunch(instruction);
  switch (instruction->kind) {
    case InstructionKind::kOpCall:
      RunOpCall(instruction);
      return;
    case InstructionKind::kStreamWait:
      RunStreamWait(instruction);
      return;
    case InstructionKind::kRecordEvent:
      RunRecordEvent(instruction);
      return;
    case InstructionKind::kRelease:
      // A drop of a shared release (a replayed one): the checker gathered it at launch.
      if (instruction->release_count != nullptr) {
        if (!instruction->release_count->Drop()) return;
        if (observer_ != nullptr) observer_->OnLastDrop(instruction, *instruction);
      }
      for (Blob* blob : instruction->outputs) {
        internal::BlobLifecycle::Worker::ReleaseStorage(blob, instruction->keeps_storage);
      }
      return;
    case InstructionKind::kAccessBlob:
      RunAccessBlob(instruction);
      return;
    case InstructionKind::kBarrier:
      return;  // the engine runs barriers; never dispatched
  }
}

void InstructionExecutor::RunStep(Instruction* step, Instruction* outer_instruction, bool check) {
  const Instruction& outer = *outer_instruction;
  // A fused run's producer points its steps at the run's instruction and stream (the
  // worker writes nothing on them: their lines go back to the producer clean). Another
  // sequence's steps are reused every run: write only what changed.
  if (step->outer != &outer) {
    if (step->stream != outer.stream) step->stream = outer.stream;
    // Names the step in errors; a fused step (a StepSequence run as one) has no number of
    // its own: its run's.
    step->seq = outer.outer != nullptr ? outer.outer->seq : outer.seq;
  }
  if (step->release_count != nullptr) {
    // One drop of a shared release: the checker learns of it before the count moves, so
    // the last dropper's check sees every drop of the run.
    if (check) observer_->OnSharedDrop(outer_instruction, *step);
    if (!step->release_count->Drop()) return;
    if (check) observer_->OnLastDrop(outer_instruction, *step);
  } else if (check) {
    observer_->OnStepLaunch(outer_instruction, *step);
  }
  // `status` is left as is: nothing reads a step's status (errors go to the ErrorSink).
  if (step->kind == InstructionKind::kRelease) {
    for (Blob* blob : step->outputs) {
      internal::BlobLifecycle::Worker::ReleaseStorage(blob, step->keeps_storage);
    }
    return;
  }
  RunKernel(step);
  // Steps the kernel ran itself certified only the step (their `outer`); the enclosing
  // instruction's completion must cover them too, even when this step is its last.
  if (check && (step->kernel->checks_own_steps() || step->kernel->logs_own_steps())) {
    observer_->OnNestedStepsDone(outer_instruction);
  }
}

void InstructionExecutor::RunOpCall(Instruction* instruction) {
  const OpKernel* kernel = instruction->kernel;
  if (kernel->handles_poison()) {
    KernelContext ctx(instruction, instruction->stream->ep_stream(), errors_, &counters_->skipped,
                      this);
    const absl::Status status = kernel->Launch(ctx);
    if (!status.ok()) Fail(instruction, status);
    return;
  }
  RunKernel(instruction);
}

void InstructionExecutor::RunKernel(Instruction* instruction) {
  const OpKernel* kernel = instruction->kernel;
  // Poison is settled in stream order on asynchronous streams the host can run work on
  // (sim: the host work re-checks inputs when it runs, after every earlier write on the
  // stream). On cpu, launch order is execution order; on cuda only launch order is known.
  const bool stream_ordered = instruction->stream->poison_in_stream_order();
  if (!stream_ordered && AnyInputPoisoned(*instruction)) {
    absl::Status poison = InputPoison(*instruction);
    if (!poison.ok()) {
      Skip(instruction, poison);
      return;
    }
  }
  if (stream_ordered) {
    for (size_t i = 0; i < instruction->inputs.size(); ++i) {
      // An input the kernel reads the shape of alone needs no bytes, and its storage may be
      // released (or taken) meanwhile by another worker: not even looked at
      // (OpKernel::ReadsShapeOnly).
      if (kernel->ReadsShapeOnly(static_cast<int>(i))) continue;
      Blob* blob = instruction->inputs[i];
      if (blob->raw_storage() != nullptr || !blob->lazy()) continue;
      // A lazy input without storage: its last writer failed before allocating (its poison
      // lands in stream order, so it may not show yet), or nothing wrote it. The kernel
      // would only fail on the missing bytes under its own name: settle in stream order
      // instead, skipped with the input's poison, or failed when it has none.
      const absl::Status launched = instruction->stream->ep_stream()->Launch(
          HostWork{instruction, errors_, &counters_->skipped, [name = blob->DebugName()]() {
                     return absl::FailedPreconditionError(
                         absl::StrCat("input ", name, " was never written"));
                   }});
      if (!launched.ok()) Fail(instruction, launched);
      return;
    }
  }
  for (Blob* blob : instruction->outputs) {
    if (blob->raw_storage() != nullptr) continue;
    const absl::Status allocated = blob->EnsureStorage(instruction->stream->id());
    if (!allocated.ok()) {
      Fail(instruction, allocated);
      return;
    }
  }
  KernelContext ctx(instruction, instruction->stream->ep_stream(), errors_, &counters_->skipped,
                    this);
  Tracer* tracer = this->tracer();
  const int64_t begin = tracer != nullptr ? Tracer::NowNs() : 0;
  absl::Status status = StatusFromCall("kernel", [&] { return kernel->Launch(ctx); });
  if (tracer != nullptr && !ctx.ran_host_work()) {
    tracer->Add({instruction->stream, instruction->name(), begin, Tracer::NowNs()});
  }
  if (!status.ok()) {
    Fail(instruction, status);
    return;
  }
  if (ctx.ran_host_work() || instruction->outputs.empty()) return;
  // A kernel that runs steps of its own (a nested StepSequence, a control step) leaves its
  // outputs as those steps settled them: clearing them here would erase the poison a
  // failed step put there, and what depends on them would run on stale bytes.
  if (kernel->handles_poison() || kernel->logs_own_steps()) return;
  if (stream_ordered) {
    // No work of its own (e.g. an empty tensor): settle the outputs in stream order.
    const absl::Status launched = instruction->stream->ep_stream()->Launch(
        HostWork{instruction, errors_, &counters_->skipped, nullptr});
    if (!launched.ok()) Fail(instruction, launched);
    return;
  }
  for (Blob* blob : instruction->outputs) blob->ClearPoison();
}

void InstructionExecutor::RunStreamWait(Instruction* instruction) {
  ep::Stream* from = instruction->stream->ep_stream();
  ep::Stream* to = instruction->wait_target->ep_stream();
  absl::StatusOr<ep::PooledEvent> event = from->device()->event_pool().Borrow();
  if (!event.ok()) {
    Fail(instruction, event.status());
    return;
  }
  CountBorrow(event->reused());
  absl::Status status = from->RecordEvent(event->get());
  if (status.ok()) status = to->WaitEvent(event->get());
  // The wait captured the recorded point: the event may go back to the pool now.
  if (!status.ok()) Fail(instruction, status);
}

void InstructionExecutor::RunRecordEvent(Instruction* instruction) {
  ep::Stream* stream = instruction->stream->ep_stream();
  absl::StatusOr<ep::PooledEvent> event = stream->device()->event_pool().Borrow();
  if (!event.ok()) {
    Fail(instruction, event.status());
    return;
  }
  CountBorrow(event->reused());
  const absl::Status status = stream->RecordEvent(event->get());
  if (!status.ok()) {
    Fail(instruction, status);
    return;
  }
  instruction->event = *std::move(event);  // returned to its pool at retirement
}

void InstructionExecutor::RunAccessBlob(Instruction* instruction) {
  Stream* stream = instruction->stream;
  // Runs on the stream, in order, so the bytes are final when the host code sees them.
  // The memory is taken now, at dispatch, as a kernel's operands are: a Release of the blob
  // dispatched after this access (its storage goes back to the stream-ordered pool at once,
  // reusable only by later work of the stream) must not make the access find it released.
  Instruction* i = instruction;
  ErrorSink* errors = errors_;
  ExecutionObserver* observer = observer_;
  const bool write = i->inputs.empty();
  Blob* blob = write ? i->outputs.front() : i->inputs.front();
  TensorStorage* storage = blob->raw_storage();
  void* const device_data = storage != nullptr ? storage->data() : nullptr;
  const size_t bytes = storage != nullptr ? storage->bytes() : 0;
  // Memory the host cannot address (sim, cuda): the host code sees a host staging buffer,
  // filled by a device-to-host copy in stream order before it and, for a write, copied
  // back after it. The host never touches device memory.
  ep::Stream* ep_stream = stream->ep_stream();
  const bool staged =
      !stream->policy()->host_accessible() && device_data != nullptr && !i->access_wait_only;
  std::shared_ptr<uint8_t[]> staging;
  void* data = i->access_wait_only ? nullptr : device_data;
  if (staged) {
    staging.reset(new uint8_t[bytes > 0 ? bytes : 1]);
    data = staging.get();
    if (bytes > 0) {
      const absl::Status copied =
          ep_stream->Memcpy(data, device_data, bytes, ep::CopyKind::kDeviceToHost);
      if (!copied.ok()) {
        Fail(instruction, copied);
        return;
      }
    }
  }
  // The task holds the staging buffer too: should a later enqueue below fail, the queued
  // copy and task still find it alive.
  auto task = [i, errors, observer, write, blob, data, bytes, staging]() -> absl::Status {
    if (!write) {
      absl::Status poison = InstructionExecutor::InputPoison(*i);
      if (!poison.ok()) {
        i->status = poison;
        return absl::OkStatus();
      }
    }
    absl::Status status;
    if (i->access_wait_only) {
      status = StatusFromCall("blob callback", [&] { return i->blob_callback(nullptr, 0); });
    } else if (data == nullptr) {
      status = absl::FailedPreconditionError(absl::StrCat(blob->DebugName(), " was released"));
    } else {
      status = StatusFromCall("blob callback", [&] { return i->blob_callback(data, bytes); });
    }
    if (status.ok()) {
      if (write) {
        blob->ClearPoison();
        if (observer != nullptr) {
          observer->OnHostWrite(i->seq,
                                absl::MakeConstSpan(static_cast<const uint8_t*>(data), bytes));
        }
      }
      return absl::OkStatus();
    }
    const absl::Status error(status.code(), absl::StrCat(i->DebugString(), ": ", status.message()));
    i->status = error;
    if (write) blob->Poison(error);
    errors->Report(error);
    return absl::OkStatus();
  };
  absl::Status launched = ep_stream->Launch(std::move(task));
  if (launched.ok() && staged && write && bytes > 0) {
    launched = ep_stream->Memcpy(device_data, data, bytes, ep::CopyKind::kHostToDevice);
  }
  if (launched.ok() && staged) {
    // The staging buffer lives until the stream has passed every copy of it.
    launched = ep_stream->Launch([staging]() { return absl::OkStatus(); });
  }
  if (!launched.ok()) Fail(instruction, launched);
}

}  // namespace sluice::vm
