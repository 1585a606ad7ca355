#include "framework/interpreter/sequence_lowering.h"

#include <utility>

namespace sluice::framework {

std::unique_ptr<vm::StepSequence> NewSequence(const SequenceCounters& counters) {
  auto sequence = std::make_unique<vm::StepSequence>();
  sequence->set_cancel_flag(counters.cancel);
  sequence->set_ops_counter(counters.ops_run);
  sequence->set_run_counter(counters.run_number);
  return sequence;
}

vm::ReleaseCount* ReleaseCounts::For(int var, int drops) {
  std::unique_ptr<vm::ReleaseCount>& count = counts_[var];
  if (count == nullptr) count = std::make_unique<vm::ReleaseCount>(static_cast<uint32_t>(drops));
  return count.get();
}

void AppendSegment(const LoweringInput& in, const Segment& segment, vm::StepSequence& sequence,
                   ReleaseCounts& counts, absl::FunctionRef<void(int node, int step)> on_call) {
  for (int b : segment.nodes) {
    const Node& node = in.nodes[b];
    if (node.op >= 0) {
      const OpFunc& func = in.funcs[node.op];
      vm::BlobPtrs inputs, outputs;
      for (int v : func.inputs) inputs.push_back(in.vars.slots[v].blob.get());
      for (int v : func.outputs) outputs.push_back(in.vars.slots[v].blob.get());
      sequence.AddCall(*func.kernel, std::move(inputs), std::move(outputs), func.attrs);
      on_call(b, sequence.steps() - 1);
    } else if (node.drops > 0) {
      sequence.AddSharedRelease(in.vars.slots[node.var].blob.get(),
                                counts.For(node.var, node.drops));
    } else if (node.handoff_to < 0) {
      sequence.AddRelease(in.vars.slots[node.var].blob.get());
    }
  }
}

}  // namespace sluice::framework
