#include "vm/op_sequence.h"

namespace sluice::vm {

OpSequence::~OpSequence() = default;

void OpSequence::AddOpCall(const OpKernel& kernel, BlobPtrs inputs, BlobPtrs outputs,
                           std::shared_ptr<const AttrMap> attrs) {
  for (Blob* blob : inputs) {
    if (!written_set_.contains(blob) && external_set_.insert(blob).second) {
      external_inputs_.push_back(blob);
    }
  }
  for (Blob* blob : outputs) {
    if (written_set_.insert(blob).second) all_outputs_.push_back(blob);
  }
  auto step = std::make_unique<Instruction>();
  step->kind = InstructionKind::kOpCall;
  step->kernel = &kernel;
  step->inputs = std::move(inputs);
  step->outputs = std::move(outputs);
  step->attrs = std::move(attrs);
  steps_.push_back(std::move(step));
  ++op_calls_;
}

void OpSequence::AddRelease(Blob* blob) {
  if (written_set_.insert(blob).second) all_outputs_.push_back(blob);
  auto step = std::make_unique<Instruction>();
  step->kind = InstructionKind::kRelease;
  step->outputs.push_back(blob);
  steps_.push_back(std::move(step));
}

absl::Status OpSequence::Launch(KernelContext& ctx) const {
  int64_t launched = 0;
  for (const std::unique_ptr<Instruction>& step : steps_) {
    if (step->kind == InstructionKind::kOpCall) {
      // Relaxed: cancellation is a request; a step that misses it just runs.
      if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) continue;
      ++launched;
    }
    ctx.RunStep(step.get());
  }
  if (ops_run_ != nullptr) ops_run_->fetch_add(launched, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace sluice::vm
