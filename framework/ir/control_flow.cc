#include "framework/ir/control_flow.h"

#include <algorithm>
#include <set>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::framework::ir {
namespace {

// "block 0 op #3 'while'": how errors name an op.
std::string OpWhere(int block, size_t index, const OpDesc& op) {
  return absl::StrCat("block ", block, " op #", index, " '", op.type, "'");
}

std::string MetaText(const VarDesc& var) {
  return absl::StrCat(DataTypeName(var.dtype), var.shape.ToString());
}

bool SameMeta(const VarDesc& a, const VarDesc& b) {
  return a.dtype == b.dtype && a.shape == b.shape;
}

// Where `op` (op #index of `block`) names a sub-block by attribute `attr`: its index, or
// InvalidArgument when absent or not a block reference.
absl::StatusOr<int> RequiredBlock(const std::string& where, const OpDesc& op,
                                  absl::string_view attr) {
  auto it = op.attrs.values().find(attr);
  if (it == op.attrs.values().end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing attribute '", attr, "'"));
  }
  const vm::BlockRef* ref = std::get_if<vm::BlockRef>(&it->second);
  if (ref == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": attribute '", attr, "' is not a block reference"));
  }
  return static_cast<int>(ref->index);
}

// A positive int attribute, when present.
absl::Status OptionalPositiveInt(const std::string& where, const OpDesc& op,
                                 absl::string_view attr) {
  auto it = op.attrs.values().find(attr);
  if (it == op.attrs.values().end()) return absl::OkStatus();
  const int64_t* value = std::get_if<int64_t>(&it->second);
  if (value == nullptr || *value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": attribute '", attr, "' must be an int of at least 1"));
  }
  return absl::OkStatus();
}

// YieldedNames, its error prefixed with the op that references the block.
absl::StatusOr<std::vector<std::string>> YieldedNamesAt(const ProgramDesc& program,
                                                        const std::string& where, int sub) {
  absl::StatusOr<std::vector<std::string>> names = YieldedNames(program, sub);
  if (!names.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", names.status().message()));
  }
  return names;
}

// No name twice in `names`, and none of them among `others` (X, for Out); `what` names
// the slot.
absl::Status DistinctNames(const std::string& where, absl::string_view what,
                           const std::vector<std::string>& names,
                           const std::vector<std::string>& others) {
  const std::set<std::string> taken(others.begin(), others.end());
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (taken.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", what, " names '", name, "', which is also in X"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", what, " names '", name, "' twice"));
    }
  }
  return absl::OkStatus();
}

// Block `sub` yields values matching `want` (by dtype and shape, in order); `what` names
// the block's role ("the true branch"), `want_role` what each wanted variable is ("output").
absl::Status CheckYields(const ProgramDesc& program, const std::string& where, int sub,
                         absl::string_view what, const std::vector<const VarDesc*>& want,
                         absl::string_view want_role) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> yielded, YieldedNamesAt(program, where, sub));
  if (yielded.size() != want.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what, " (block ", sub, ") yields ",
                                                   yielded.size(), " values, ", want.size(),
                                                   " expected"));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const VarDesc* got = ResolveVar(program, sub, yielded[i]);
    if (!SameMeta(*got, *want[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", want_role, " '", want[i]->name, "' is ", MetaText(*want[i]), " but ", what,
          " (block ", sub, ") yields '", got->name, "' ", MetaText(*got)));
    }
  }
  return absl::OkStatus();
}

// The variables of `op`'s slot, resolved from `block` (Validate checked they exist).
std::vector<const VarDesc*> SlotVars(const ProgramDesc& program, int block, const OpDesc& op,
                                     absl::string_view slot, bool output) {
  std::vector<const VarDesc*> vars;
  for (const std::string& name : output ? op.Output(slot) : op.Input(slot)) {
    vars.push_back(ResolveVar(program, block, name));
  }
  return vars;
}

absl::Status IsBoolScalar(const std::string& where, absl::string_view what, const VarDesc& var) {
  if (var.dtype != DataType::kBool || var.shape.rank() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what, " '", var.name,
                                                   "' must be a bool scalar, not ", MetaText(var)));
  }
  return absl::OkStatus();
}

absl::Status ValidateCond(const ProgramDesc& program, int block, const std::string& where,
                          const OpDesc& op) {
  const std::vector<const VarDesc*> pred = SlotVars(program, block, op, kCondSlot, false);
  if (pred.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": slot Cond names ", pred.size(), " variables, 1 expected"));
  }
  SLUICE_RETURN_IF_ERROR(IsBoolScalar(where, "predicate", *pred[0]));
  SLUICE_ASSIGN_OR_RETURN(const int true_block, RequiredBlock(where, op, kTrueBlockAttr));
  SLUICE_ASSIGN_OR_RETURN(const int false_block, RequiredBlock(where, op, kFalseBlockAttr));
  const std::vector<const VarDesc*> out = SlotVars(program, block, op, kOutSlot, true);
  SLUICE_RETURN_IF_ERROR(CheckYields(program, where, true_block, "the true branch", out, "output"));
  return CheckYields(program, where, false_block, "the false branch", out, "output");
}

absl::Status ValidateWhile(const ProgramDesc& program, int block, const std::string& where,
                           const OpDesc& op) {
  SLUICE_RETURN_IF_ERROR(DistinctNames(where, "X", op.Input(kLoopVarsSlot), {}));
  SLUICE_RETURN_IF_ERROR(DistinctNames(where, "Out", op.Output(kOutSlot), op.Input(kLoopVarsSlot)));
  const std::vector<const VarDesc*> x = SlotVars(program, block, op, kLoopVarsSlot, false);
  const std::vector<const VarDesc*> out = SlotVars(program, block, op, kOutSlot, true);
  if (x.size() != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", x.size(), " loop variables (X) but ", out.size(), " outputs (Out)"));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!SameMeta(*x[i], *out[i])) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": output '", out[i]->name, "' is ",
                                                     MetaText(*out[i]), " but loop variable '",
                                                     x[i]->name, "' is ", MetaText(*x[i])));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(const int cond_block, RequiredBlock(where, op, kCondBlockAttr));
  SLUICE_ASSIGN_OR_RETURN(const int body_block, RequiredBlock(where, op, kBodyBlockAttr));
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> cond,
                          YieldedNamesAt(program, where, cond_block));
  if (cond.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the condition (block ", cond_block,
                                                   ") yields ", cond.size(),
                                                   " values, 1 expected"));
  }
  SLUICE_RETURN_IF_ERROR(IsBoolScalar(where,
                                      absl::StrCat("the condition (block ", cond_block, ") yields"),
                                      *ResolveVar(program, cond_block, cond[0])));
  SLUICE_RETURN_IF_ERROR(CheckYields(program, where, body_block, "the body", out, "loop variable"));
  SLUICE_RETURN_IF_ERROR(OptionalPositiveInt(where, op, kMaxIterationsAttr));
  return OptionalPositiveInt(where, op, kParallelIterationsAttr);
}

// Every block reference names a child of the op's block, each block at most once; returns
// the owners (block index -> the referencing op's type) in `owner_type`.
absl::Status CheckReferences(const ProgramDesc& program,
                             absl::flat_hash_map<int64_t, std::string>& owner_type) {
  absl::flat_hash_map<int64_t, std::string> owner;  // block -> where it was referenced
  for (int b = 0; b < program.num_blocks(); ++b) {
    const std::vector<OpDesc>& ops = program.block(b).ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      const std::string where = OpWhere(b, k, ops[k]);
      for (const auto& [attr, index] : SubBlockRefs(ops[k])) {
        if (index <= 0 || index >= program.num_blocks()) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": attribute '", attr,
                                                         "' references block ", index,
                                                         ", which is not a sub-block of the "
                                                         "program"));
        }
        if (program.block(static_cast<int>(index)).parent_idx() != b) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": attribute '", attr, "' references block ", index, ", whose parent is ",
              program.block(static_cast<int>(index)).parent_idx(), ", not ", b));
        }
        auto [it, fresh] = owner.emplace(index, absl::StrCat(where, " attribute '", attr, "'"));
        if (!fresh) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": attribute '", attr,
                                                         "' references block ", index,
                                                         ", already referenced by ", it->second));
        }
        owner_type[index] = ops[k].type;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsControlFlowOp(const OpDesc& op) { return op.type == kCondOp || op.type == kWhileOp; }

std::vector<std::pair<std::string, int64_t>> SubBlockRefs(const OpDesc& op) {
  std::vector<std::pair<std::string, int64_t>> refs;
  for (const auto& [name, value] : op.attrs.values()) {
    if (const vm::BlockRef* ref = std::get_if<vm::BlockRef>(&value)) {
      refs.emplace_back(name, ref->index);
    }
  }
  return refs;
}

namespace {

// The block on `block`'s parent chain (itself first) that has `name`; -1 when none has.
int OwnerBlock(const ProgramDesc& program, int block, absl::string_view name) {
  int owner = block;
  while (owner >= 0 && !program.block(owner).HasVar(name)) {
    owner = program.block(owner).parent_idx();
  }
  return owner;
}

}  // namespace

const VarDesc* ResolveVar(const ProgramDesc& program, int block, absl::string_view name) {
  const int owner = OwnerBlock(program, block, name);
  return owner >= 0 ? program.block(owner).FindVar(name) : nullptr;
}

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

absl::StatusOr<std::vector<std::string>> YieldedNames(const ProgramDesc& program, int block) {
  const std::vector<OpDesc>& ops = program.block(block).ops();
  if (ops.empty() || ops.back().type != kYieldOp) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", block, " does not end in a '", kYieldOp, "' op"));
  }
  return ops.back().Input(kLoopVarsSlot);
}

absl::Status ValidateControlFlow(const ProgramDesc& program) {
  absl::flat_hash_map<int64_t, std::string> owner_type;
  SLUICE_RETURN_IF_ERROR(CheckReferences(program, owner_type));
  // Each cond and while names its blocks; then yields, so that a misplaced one is named as
  // such, not as a branch that yields nothing; then the ops' full rules.
  for (int b = 0; b < program.num_blocks(); ++b) {
    const std::vector<OpDesc>& ops = program.block(b).ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      if (!IsControlFlowOp(ops[k])) continue;
      const bool is_cond = ops[k].type == kCondOp;
      for (absl::string_view attr : {is_cond ? kTrueBlockAttr : kCondBlockAttr,
                                     is_cond ? kFalseBlockAttr : kBodyBlockAttr}) {
        SLUICE_RETURN_IF_ERROR(RequiredBlock(OpWhere(b, k, ops[k]), ops[k], attr).status());
      }
    }
  }
  for (int b = 0; b < program.num_blocks(); ++b) {
    const std::vector<OpDesc>& ops = program.block(b).ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].type != kYieldOp) continue;
      const std::string where = OpWhere(b, k, ops[k]);
      auto owner = owner_type.find(b);
      const bool owned =
          owner != owner_type.end() && (owner->second == kCondOp || owner->second == kWhileOp);
      if (k + 1 != ops.size() || !owned) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": a yield must be the last op of a block that a cond or while references"));
      }
      if (!ops[k].outputs.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": a yield has no outputs"));
      }
      if (!ops[k].attrs.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": a yield has no attributes"));
      }
      for (const auto& [slot, names] : ops[k].inputs) {
        if (slot != kLoopVarsSlot) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": a yield has one input slot, X, not '", slot, "'"));
        }
      }
    }
  }
  for (int b = 0; b < program.num_blocks(); ++b) {
    const std::vector<OpDesc>& ops = program.block(b).ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].type == kCondOp) {
        SLUICE_RETURN_IF_ERROR(ValidateCond(program, b, OpWhere(b, k, ops[k]), ops[k]));
      } else if (ops[k].type == kWhileOp) {
        SLUICE_RETURN_IF_ERROR(ValidateWhile(program, b, OpWhere(b, k, ops[k]), ops[k]));
      }
    }
  }
  return absl::OkStatus();
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
