#include "framework/interpreter/control_flow/control_step.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/tensor_storage.h"
#include "ep/device.h"
#include "framework/interpreter/control_flow/loop_pipeline.h"
#include "vm/recorder.h"
#include "vm/stream.h"
#include "vm/tracer.h"

namespace sluice::framework::control_flow {

std::unique_ptr<ControlStep> ControlStep::Cond(std::string where, vm::Blob* pred, Frame on_true,
                                               Frame on_false) {
  std::unique_ptr<ControlStep> step(new ControlStep());
  step->where_ = std::move(where);
  step->pred_ = pred;
  step->branches_[0] = std::move(on_true);
  step->branches_[1] = std::move(on_false);
  return step;
}

std::unique_ptr<ControlStep> ControlStep::While(std::string where, LoopFrames loop) {
  std::unique_ptr<ControlStep> step(new ControlStep());
  step->where_ = std::move(where);
  step->is_loop_ = true;
  step->loop_ = std::move(loop);
  if (step->loop_.in_flight > 0) {
    step->pipeline_ = std::make_unique<LoopPipeline>(step->where_, step->loop_);
  }
  return step;
}

ControlStep::~ControlStep() = default;

absl::StatusOr<std::optional<bool>> ControlStep::ReadInOrder(vm::KernelContext& ctx,
                                                             const vm::Blob* pred,
                                                             absl::Status* poison) const {
  ep::Stream* stream = ctx.stream();
  std::optional<bool> value;
  if (!stream->IsAsync()) {
    value = ReadPredicate(pred);
    if (!value.has_value() && pred->poisoned()) *poison = pred->poison();
    return value;
  }
  if (read_event_ == nullptr) {
    SLUICE_ASSIGN_OR_RETURN(read_event_, stream->device()->CreateEvent());
  }
  // The task writes members, not locals: if recording the event failed, the task may
  // still run after this returns. Two pointers fit the task's inline storage. The event's
  // Sync orders the task's write before the read below; the next task is enqueued after it.
  read_ran_ = false;
  // No asynchronous device's memory is host-addressable (sim included): the byte comes over
  // by a copy in stream order into a host buffer, and a task behind it reads that buffer.
  // Where poison settles in launch order (cuda), a producer that failed at launch shows
  // now; where it settles in stream order (sim) only the task sees it; a failure on the
  // device after its launch shows when the task runs either way.
  const vm::Instruction* instruction = ctx.instruction();
  const bool stream_ordered_poison = instruction != nullptr && instruction->stream != nullptr &&
                                     instruction->stream->poison_in_stream_order();
  if (!stream_ordered_poison && pred->poisoned()) {
    *poison = pred->poison();
    return std::optional<bool>();
  }
  if (pred->raw_storage() == nullptr) return std::optional<bool>();  // never written
  read_byte_ = 0;
  SLUICE_RETURN_IF_ERROR(
      stream->Memcpy(&read_byte_, pred->raw_storage()->data(), 1, ep::CopyKind::kDeviceToHost));
  SLUICE_RETURN_IF_ERROR(stream->Launch([this, pred]() -> absl::Status {
    read_value_ = pred->poisoned() ? std::nullopt : std::optional<bool>(read_byte_ != 0);
    read_ran_ = true;
    return absl::OkStatus();
  }));
  SLUICE_RETURN_IF_ERROR(stream->RecordEvent(read_event_.get()));
  // The event reports the stream's first error since it was last cleared, which may be
  // another op's (already reported as that op's): what counts is whether the read ran.
  const absl::Status synced = read_event_->Sync();
  if (!read_ran_) return synced.ok() ? absl::InternalError("predicate read did not run") : synced;
  value = read_value_;
  if (!value.has_value() && pred->poisoned()) *poison = pred->poison();
  return value;
}

absl::Status ControlStep::SetIteration(vm::KernelContext& ctx, int slot, int64_t iteration) const {
  LoopIteration* counter = loop_.iterations[static_cast<size_t>(slot)].get();
  if (!ctx.stream()->IsAsync()) {
    counter->set_value(iteration);
    return absl::OkStatus();
  }
  // Stream work: the steps enqueued before it (the previous iteration's, which may not have
  // run yet) still read the previous number when they fail.
  return ctx.stream()->Launch([counter, iteration]() -> absl::Status {
    counter->set_value(iteration);
    return absl::OkStatus();
  });
}

absl::Status ControlStep::Launch(vm::KernelContext& ctx) const {
  // The outermost control step of a recording run logs every step its frames launch (a
  // nested one adds to this log) and writes them as its line's expansion.
  return vm::RunLoggingSteps(ctx, [&] { return Run(ctx); });
}

absl::Status ControlStep::Run(vm::KernelContext& ctx) const {
  if (is_loop_) return RunLoop(ctx);
  absl::Status poison;
  SLUICE_ASSIGN_OR_RETURN(const std::optional<bool> taken, ReadInOrder(ctx, pred_, &poison));
  if (!taken.has_value()) {
    // Poisoned after this step launched (an asynchronous producer failed): Out inherits the
    // error, in stream order since the stream has run everything enqueued before the read.
    // Never written: a cancel skipped the producer, and Out keeps its contents.
    if (!poison.ok()) PoisonAll(ctx.outputs(), poison);
    return absl::OkStatus();
  }
  return branches_[*taken ? 0 : 1].steps->Launch(ctx);
}

absl::Status ControlStep::RunLoop(vm::KernelContext& ctx) const {
  if (pipeline_ != nullptr) return pipeline_->Drive(ctx);
  SLUICE_RETURN_IF_ERROR(loop_.entry.steps->Launch(ctx));
  // Tracing: one slice per iteration, from its condition's launch to the body's return (on
  // an asynchronous stream, to the next condition's predicate read: the body has run then).
  vm::Tracer* const tracer = ctx.tracer();
  const bool async = ctx.stream()->IsAsync();
  int64_t iteration_begin = 0;
  auto trace_iteration = [&](int64_t iteration) {
    tracer->Add(
        {ctx.instruction()->stream, where_, iteration_begin, vm::Tracer::NowNs(), iteration});
  };
  int parity = 0;
  for (int64_t done = 0;; ++done) {
    if (loop_.cancel != nullptr && loop_.cancel->load(std::memory_order_relaxed)) break;
    if (tracer != nullptr && !async) iteration_begin = vm::Tracer::NowNs();
    SLUICE_RETURN_IF_ERROR(SetIteration(ctx, parity, done));
    SLUICE_RETURN_IF_ERROR(loop_.check[parity].steps->Launch(ctx));
    absl::Status poison;
    SLUICE_ASSIGN_OR_RETURN(const std::optional<bool> again,
                            ReadInOrder(ctx, loop_.check[parity].results[0], &poison));
    if (tracer != nullptr && async) {
      if (done > 0) trace_iteration(done - 1);
      iteration_begin = vm::Tracer::NowNs();
    }
    if (!poison.ok()) {
      // The condition failed, or read a value a failed body op left (the error was
      // reported when it happened): what the loop would have produced is unknown.
      PoisonAll(ctx.outputs(), poison);
      return absl::OkStatus();
    }
    if (!again.has_value() || !*again) break;
    if (loop_.max_iterations.has_value() && done >= *loop_.max_iterations) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": more than ", *loop_.max_iterations,
                                                     " iterations (max_iterations)"));
    }
    SLUICE_RETURN_IF_ERROR(loop_.body[parity].steps->Launch(ctx));
    if (tracer != nullptr && !async) trace_iteration(done);
    parity ^= 1;
  }
  return loop_.exit[parity].steps->Launch(ctx);
}

}  // namespace sluice::framework::control_flow
