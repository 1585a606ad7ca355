#include "framework/interpreter/inplace_pass.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "vm/kernel.h"

namespace sluice::framework {

namespace {

// A temporary whose storage may go to another variable at its death.
bool MayGive(const VarSlot& var) {
  return var.kind == VarKind::kTemp && !var.fetched && !var.device_fetch;
}

// A temporary that may take a dying one's storage at its first write.
bool MayTake(const VarSlot& var) {
  return var.kind == VarKind::kTemp && !var.fetched && !var.device_fetch && !var.took_storage;
}

// Whether every position of `func` that reads `x` pairs with output position `o` in the
// kernel's declared contract.
bool EveryReadPairs(const OpFunc& func, int x, int o) {
  const vm::InPlaceContract& contract = func.kernel->in_place();
  const int n_in = static_cast<int>(func.inputs.size());
  const int n_out = static_cast<int>(func.outputs.size());
  for (int i = 0; i < n_in; ++i) {
    if (func.inputs[i] == x && !contract.Allows(i, o, n_in, n_out)) return false;
  }
  return true;
}

// The release node of `x` among nodes [begin, end) (the releases right after one op node),
// if it may hand its storage on in place: a release of its own (not a drop of a shared one,
// not already handing off) on `stream`, after touchers of that stream alone.
int InPlaceRelease(const std::vector<Node>& nodes, size_t begin, size_t end, int x, int stream) {
  for (size_t k = begin; k < end; ++k) {
    const Node& release = nodes[k];
    if (release.var != x) continue;
    if (release.drops != 0 || release.handoff_to >= 0 || release.stream != stream) return -1;
    for (int p : release.preds) {
      if (nodes[p].stream != stream) return -1;  // GC plan's waiting case: not ordered
    }
    return static_cast<int>(k);
  }
  return -1;
}

}  // namespace

int PlanInPlace(const std::vector<OpFunc>& funcs, std::vector<Node>& nodes, VarTable& vars) {
  const std::vector<int> first_writer = FirstWriters(funcs, vars.size());
  int reuses = 0;
  for (size_t b = 0; b < nodes.size(); ++b) {
    if (nodes[b].op < 0) continue;
    const int f = nodes[b].op;
    const OpFunc& func = funcs[f];
    if (func.kernel == nullptr || !func.kernel->in_place().declared) continue;
    size_t end = b + 1;  // the releases that follow f: f was their variable's last toucher
    while (end < nodes.size() && nodes[end].op < 0) ++end;
    if (end == b + 1) continue;
    for (int o = 0; o < static_cast<int>(func.outputs.size()); ++o) {
      const int y = func.outputs[o];
      if (first_writer[y] != f || !MayTake(vars.slots[y]) ||
          std::count(func.outputs.begin(), func.outputs.end(), y) != 1) {
        continue;
      }
      for (int x : func.inputs) {
        if (x == y || !MayGive(vars.slots[x]) || !SameStorage(vars.slots[x], vars.slots[y]) ||
            std::find(func.outputs.begin(), func.outputs.end(), x) != func.outputs.end() ||
            !EveryReadPairs(func, x, o)) {
          continue;
        }
        const int r = InPlaceRelease(nodes, b + 1, end, x, nodes[b].stream);
        if (r < 0) continue;
        nodes[r].handoff_to = y;
        vars.slots[y].blob = vars.slots[x].blob;
        vars.slots[y].took_storage = true;
        vars.slots[x].gave_in_place = true;
        ++reuses;
        break;
      }
    }
  }
  return reuses;
}

int64_t PeakTemporaryBytes(const std::vector<OpFunc>& funcs, const std::vector<Node>& nodes,
                           const VarTable& vars) {
  const std::vector<int> first_writer = FirstWriters(funcs, vars.size());
  auto bytes = [&](int v) {
    const VarSlot& slot = vars.slots[v];
    return slot.shape.NumElements() * static_cast<int64_t>(SizeOf(slot.dtype));
  };
  absl::flat_hash_map<int, int> drops_seen;
  int64_t held = 0;
  int64_t peak = 0;
  for (const Node& node : nodes) {
    if (node.op >= 0) {
      const std::vector<int>& outputs = funcs[node.op].outputs;
      for (size_t k = 0; k < outputs.size(); ++k) {
        const int y = outputs[k];
        const VarSlot& slot = vars.slots[y];
        // Each slot once (an op may list one twice), at its first write.
        if (first_writer[y] != node.op ||
            std::find(outputs.begin(), outputs.begin() + static_cast<long>(k), y) !=
                outputs.begin() + static_cast<long>(k)) {
          continue;
        }
        if (slot.kind == VarKind::kTemp && !slot.took_storage) held += bytes(y);
      }
      peak = std::max(peak, held);
      continue;
    }
    if (node.handoff_to >= 0) continue;
    if (node.drops > 0 && ++drops_seen[node.var] < node.drops) continue;
    held -= bytes(node.var);
  }
  return peak;
}

}  // namespace sluice::framework
