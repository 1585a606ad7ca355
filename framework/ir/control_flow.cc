#include "framework/ir/control_flow.h"

#include <algorithm>
#include <set>

namespace sluice::framework::ir {

bool IsControlFlowOp(const OpDesc& op) { return op.type == kCondOp || op.type == kWhileOp; }

namespace {

// The blocks of `roots`' subtrees (each root and its descendants).
std::set<int> Subtree(const ProgramDesc& program, const std::vector<int>& roots) {
  std::set<int> blocks(roots.begin(), roots.end());
  // Children come after their parents (Validate checks it), so one pass in index order
  // finds every descendant.
  for (int b = 0; b < program.num_blocks(); ++b) {
    if (blocks.contains(program.block(b).parent_idx())) blocks.insert(b);
  }
  return blocks;
}

}  // namespace

std::vector<std::string> OuterReads(const ProgramDesc& program, const OpDesc& op) {
  std::vector<int> roots;
  for (const auto& [attr, index] : SubBlockRefs(op)) roots.push_back(static_cast<int>(index));
  const std::set<int> inside = Subtree(program, roots);
  std::set<std::string> seen;
  std::vector<std::string> reads;
  for (const std::string& name : op.InputNames()) {
    if (seen.insert(name).second) reads.push_back(name);
  }
  if (op.type == kWhileOp) {
    for (const std::string& name : op.Output(kOutSlot)) seen.insert(name);
  }
  for (int b : inside) {
    for (const OpDesc& inner : program.block(b).ops()) {
      for (const std::string& name : inner.InputNames()) {
        const int owner = OwnerBlock(program, b, name);
        if (owner >= 0 && !inside.contains(owner) && seen.insert(name).second) {
          reads.push_back(name);
        }
      }
    }
  }
  return reads;
}

void ListCaptures(const ProgramDesc& program, OpDesc& op) {
  const std::vector<std::string> own = op.InputNames();
  std::vector<std::string> captured = OuterReads(program, op);
  std::erase_if(captured, [&own](const std::string& name) {
    return std::find(own.begin(), own.end(), name) != own.end();
  });
  if (!captured.empty()) op.inputs.emplace_back(std::string(kCapturedSlot), captured);
}

}  // namespace sluice::framework::ir
