#include "framework/interpreter/storage_handoff.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace sluice::framework {

namespace {

bool CanTake(const VarSlot& var) { return var.kind == VarKind::kTemp && !var.fetched; }

}  // namespace

int PlanStorageHandoffs(const std::vector<OpFunc>& funcs, const std::vector<Segment>& segments,
                        std::vector<Node>& nodes, VarTable& vars,
                        const std::vector<bool>& host_stream) {
  const std::vector<int> first_writer = FirstWriters(funcs, vars.size());
  int handoffs = 0;
  std::vector<bool> placed(vars.size(), false);  // a taker's first write was seen
  // Per stream: its release nodes whose storage has no taker yet. A stream's segments run
  // in order (one lane, or instructions chained on the stream), so a stream's nodes, taken
  // segment by segment, are in the order they run.
  absl::flat_hash_map<int, std::vector<int>> waiting_on;
  for (const Segment& segment : segments) {
    std::vector<int>& waiting = waiting_on[segment.stream];
    if (!OnHostStream(host_stream, segment.stream))
      waiting.clear();  // see the header: device streams hand off in a segment
    for (int b : segment.nodes) {
      Node& node = nodes[b];
      if (node.op < 0) {
        // A shared release's storage is freed by whichever drop runs last: not this one's.
        // A release that hands its storage on in place has none to give.
        if (node.drops == 0 && node.handoff_to < 0) waiting.push_back(b);
        continue;
      }
      bool allocates = false;
      for (int y : funcs[node.op].outputs) {
        // Each slot once (an op may list one twice): its first write, by this op.
        if (first_writer[y] != node.op || placed[y]) continue;
        placed[y] = true;
        // It took a dying input's storage in place (inplace_pass.h): it allocates nothing
        // and takes nothing here.
        if (vars.slots[y].took_storage) continue;
        if (vars.slots[y].gave_in_place) {
          // Its blob is shared with the slot that took it in place: rebinding it would part
          // the two and strand the giver's storage. It allocates as usual.
          allocates = true;
          continue;
        }
        if (!CanTake(vars.slots[y])) {
          // A fetched temporary or a persistable may be allocated here; a feed has storage.
          if (vars.slots[y].kind != VarKind::kFeed) allocates = true;
          continue;
        }
        auto giver = std::find_if(waiting.begin(), waiting.end(), [&](int r) {
          return SameStorage(vars.slots[nodes[r].var], vars.slots[y]);
        });
        if (giver == waiting.end()) {
          allocates = true;
          continue;
        }
        nodes[*giver].handoff_to = y;
        vars.slots[y].blob = vars.slots[nodes[*giver].var].blob;
        vars.slots[y].took_storage = true;
        waiting.erase(giver);
        ++handoffs;
      }
      // An allocation between a release and a later taker would hold the released storage
      // beside the new one: hand-offs only reach the next allocating op.
      if (allocates) waiting.clear();
    }
  }
  return handoffs;
}

}  // namespace sluice::framework
