#include "framework/interpreter/addto_pass.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "ops/op_schema.h"
#include "vm/kernel.h"

namespace sluice::framework {

namespace {

// Per var slot: the funcs that write it and that read it, each once per listing.
struct Touches {
  std::vector<std::vector<int>> writers;
  std::vector<std::vector<int>> readers;
};

Touches TouchesOf(const std::vector<OpFunc>& funcs, int num_vars) {
  Touches t;
  t.writers.resize(static_cast<size_t>(num_vars));
  t.readers.resize(static_cast<size_t>(num_vars));
  for (int f = 0; f < static_cast<int>(funcs.size()); ++f) {
    for (int v : funcs[f].outputs) t.writers[v].push_back(f);
    for (int v : funcs[f].inputs) t.readers[v].push_back(f);
    for (int v : funcs[f].accumulates) t.readers[v].push_back(f);
  }
  return t;
}

bool IsSum(const OpFunc& func) { return func.schema != nullptr && func.schema->name() == "sum"; }

// One contribution: func `writer` writes g at output position `position`.
struct Contribution {
  int writer = -1;
  int position = -1;
};

// The contributions of sum func `s`, in the sum's order, when every rule holds.
bool Contributions(const std::vector<OpFunc>& funcs, const VarTable& vars, const Touches& touches,
                   int s, std::vector<Contribution>& out) {
  const OpFunc& sum = funcs[static_cast<size_t>(s)];
  if (sum.outputs.size() != 1 || sum.inputs.size() < 2) return false;
  const int result = sum.outputs[0];
  const VarSlot& target = vars.slots[static_cast<size_t>(result)];
  auto first = [](const std::vector<int>& fs) { return fs.empty() ? -1 : fs.front(); };
  const int first_writer = first(touches.writers[result]);
  const int first_reader = first(touches.readers[result]);
  if (first_writer != s || (first_reader >= 0 && first_reader <= s)) return false;
  out.clear();
  int previous = -1;
  for (int g : sum.inputs) {
    const VarSlot& slot = vars.slots[static_cast<size_t>(g)];
    if (slot.kind != VarKind::kTemp || slot.fetched || slot.device_fetch || g == result ||
        !SameStorage(slot, target)) {
      return false;
    }
    if (touches.writers[g].size() != 1 || touches.readers[g] != std::vector<int>{s}) return false;
    const int w = touches.writers[g][0];
    if (w <= previous || w >= s) return false;
    const OpFunc& writer = funcs[static_cast<size_t>(w)];
    const auto at = std::find(writer.outputs.begin(), writer.outputs.end(), g);
    const int position = static_cast<int>(at - writer.outputs.begin());
    // Every contributor's kernel is known here, and binds its outputs by position: a
    // control-flow func (its step is built later, binding outputs by variable name) is not.
    if (writer.device != sum.device || writer.kernel == nullptr || writer.schema == nullptr) {
      return false;
    }
    if (!out.empty()) {
      if (!writer.kernel->CanAddTo(position)) return false;
      if (std::find(writer.accumulates.begin(), writer.accumulates.end(), result) !=
          writer.accumulates.end()) {
        return false;
      }
    }
    out.push_back({w, position});
    previous = w;
  }
  return true;
}

// Sets bit `position` of `func`'s kAddToAttr (its attributes are shared: copy them).
void MarkAddTo(OpFunc& func, int position) {
  auto attrs = func.attrs != nullptr ? std::make_shared<vm::AttrMap>(*func.attrs)
                                     : std::make_shared<vm::AttrMap>();
  const int64_t bits = attrs->GetInt(vm::kAddToAttr).value_or(0);
  attrs->Set(vm::kAddToAttr, bits | (int64_t{1} << position));
  func.attrs = std::move(attrs);
}

}  // namespace

AddToStats PlanAddTo(std::vector<OpFunc>& funcs, const VarTable& vars) {
  AddToStats stats;
  std::vector<bool> removed(funcs.size(), false);
  for (int s = 0; s < static_cast<int>(funcs.size()); ++s) {
    if (!IsSum(funcs[static_cast<size_t>(s)])) continue;
    // Recomputed per sum: an earlier rewrite changed who writes what.
    const Touches touches = TouchesOf(funcs, vars.size());
    std::vector<Contribution> contributions;
    if (!Contributions(funcs, vars, touches, s, contributions)) continue;
    const int result = funcs[static_cast<size_t>(s)].outputs[0];
    for (size_t i = 0; i < contributions.size(); ++i) {
      OpFunc& writer = funcs[static_cast<size_t>(contributions[i].writer)];
      writer.outputs[static_cast<size_t>(contributions[i].position)] = result;
      if (i == 0) continue;
      MarkAddTo(writer, contributions[i].position);
      writer.accumulates.push_back(result);
      ++stats.addto_writes;
    }
    // The sum reads and writes nothing now; dropped below.
    funcs[static_cast<size_t>(s)].inputs.clear();
    funcs[static_cast<size_t>(s)].outputs.clear();
    removed[static_cast<size_t>(s)] = true;
    ++stats.sums_removed;
  }
  if (stats.sums_removed > 0) {
    std::vector<OpFunc> kept;
    kept.reserve(funcs.size());
    for (size_t f = 0; f < funcs.size(); ++f) {
      if (!removed[f]) kept.push_back(std::move(funcs[f]));
    }
    funcs = std::move(kept);
  }
  return stats;
}

}  // namespace sluice::framework
