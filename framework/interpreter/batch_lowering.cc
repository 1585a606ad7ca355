#include "framework/interpreter/batch_lowering.h"

#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "core/status.h"

namespace sluice::framework {

namespace {

// The OpCall running `item`'s segment as a sequence of its own; returns its batch node.
int AddSegmentCall(const LoweringInput& in, const StreamItem& item, bool list_operands,
                   absl::flat_hash_map<const vm::Blob*, vm::BlobRef>& refs, LoweringOutput& out) {
  std::unique_ptr<vm::StepSequence> sequence = NewSequence(out.counters);
  AppendSegment(in, in.segments[item.segment], *sequence, out.release_counts);
  sequence->Close();
  vm::BlobList inputs, outputs;
  if (list_operands) {
    for (vm::Blob* blob : sequence->union_inputs()) inputs.push_back(refs[blob]);
    for (vm::Blob* blob : sequence->union_outputs()) outputs.push_back(refs[blob]);
  }
  const int node = out.batch.AddOpCall(*sequence, std::move(inputs), std::move(outputs), nullptr,
                                       in.streams[item.to]);
  ++out.stats.op_sequences;
  out.sequences.push_back(std::move(sequence));
  return node;
}

}  // namespace

absl::Status LowerToBatch(const LoweringInput& in, bool list_operands, LoweringOutput& out) {
  const std::vector<StreamItem>& items = in.plan.items;
  absl::flat_hash_map<const vm::Blob*, vm::BlobRef> refs;
  for (const VarSlot& var : in.vars.slots) refs.emplace(var.blob.get(), var.blob);
  std::vector<int> batch_node(items.size(), -1);
  for (int i : in.plan.order) {
    const StreamItem& item = items[i];
    switch (item.kind) {
      case StreamItem::Kind::kStreamWait:
        batch_node[i] = out.batch.AddStreamWait({}, in.streams[item.from], in.streams[item.to]);
        break;
      case StreamItem::Kind::kRecordEvent:
        batch_node[i] = out.batch.AddRecordEvent({}, in.streams[item.from]);
        break;
      case StreamItem::Kind::kSequence:
        batch_node[i] = AddSegmentCall(in, item, list_operands, refs, out);
        break;
    }
  }
  for (const auto& [from, to] : in.plan.edges) {
    ++out.stats.edges;
    SLUICE_RETURN_IF_ERROR(out.batch.AddEdge(batch_node[from], batch_node[to]));
  }
  out.stats.instructions = out.batch.size();
  return absl::OkStatus();
}

}  // namespace sluice::framework
