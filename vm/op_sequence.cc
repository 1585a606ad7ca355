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
  Instruction& step = steps_.emplace_back();
  step.kind = InstructionKind::kOpCall;
  step.kernel = &kernel;
  step.inputs = std::move(inputs);
  step.outputs = std::move(outputs);
  step.attrs = std::move(attrs);
  ++op_calls_;
}

void OpSequence::AddRelease(Blob* blob) {
  if (written_set_.insert(blob).second) all_outputs_.push_back(blob);
  Instruction& step = steps_.emplace_back();
  step.kind = InstructionKind::kRelease;
  step.outputs.push_back(blob);
}

absl::Status OpSequence::Launch(KernelContext& ctx) const {
  int64_t launched = 0;
  const size_t n = steps_.size();
  for (size_t i = 0; i < n; ++i) {
    // const_cast: steps are per-run scratch of this sequence (see the class comment); the
    // kernel interface is const because the same kernel object may serve many sequences.
    Instruction* step = const_cast<Instruction*>(&steps_[i]);
    if (i + 1 < n) {
      // The next step's header and operand lists, and the blob it writes: a sequence walks
      // thousands of steps once per run, mostly out of cache.
      const Instruction& next = steps_[i + 1];
      __builtin_prefetch(&next);
      __builtin_prefetch(reinterpret_cast<const char*>(&next) + 64);
      __builtin_prefetch(reinterpret_cast<const char*>(&next) + 128);
      if (!next.outputs.empty()) __builtin_prefetch(next.outputs.front());
    }
    if (step->kind == InstructionKind::kOpCall) {
      // Relaxed: cancellation is a request; a step that misses it just runs.
      if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) continue;
      ++launched;
    }
    ctx.RunStep(step);
  }
  if (ops_run_ != nullptr) ops_run_->fetch_add(launched, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace sluice::vm
