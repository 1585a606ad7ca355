// The Program IR: ProgramDesc → BlockDesc → OpDesc / VarDesc. A Program is
// data: what the builder appends to, what autodiff and optimizers extend, what the
// interpreter analyses and lowers, and what `docs/program-format.md` writes to a file.
//
// Variables are named within a block; an op refers to its operands by name, per schema slot
// (`X`, `Y`, `Out`, ...). Attributes are vm::AttrMap values, type-checked against the op's
// schema by whoever runs the program (the interpreter), not here: the IR can hold a program
// whose ops are unknown to this build, and the loader reports that only when asked to check.
//
// Value types; thread-compatible (build on one thread, then share read-only).
#ifndef SLUICE_FRAMEWORK_IR_PROGRAM_DESC_H_
#define SLUICE_FRAMEWORK_IR_PROGRAM_DESC_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "vm/attrs.h"

namespace sluice::framework::ir {

// The version of the file format the writer writes (docs/program-format.md): 2 added block
// reference attributes (`b:INDEX`, for control flow). The reader reads every version from
// kOldestProgramFormatVersion on.
inline constexpr int kProgramFormatVersion = 2;
inline constexpr int kOldestProgramFormatVersion = 1;

// The reserved op attribute that places an op on another compute stream of the program's
// device ("compute:1"). Not part of any op schema: the builder keeps it apart from schema
// checks and the interpreter strips it before normalizing attributes.
inline constexpr absl::string_view kStreamAttr = "stream";

// Removes kStreamAttr from `attrs` and returns its value ("" when absent), so the rest can
// be checked against the op's schema. InvalidArgument when it is not a string.
absl::StatusOr<std::string> TakeStreamAttr(vm::AttrMap& attrs);

struct VarDesc {
  std::string name;
  DataType dtype = DataType::kF32;
  Shape shape;                 // static: every dimension known
  bool persistable = false;    // lives in the root scope across runs (parameters, optimizer state)
  bool is_parameter = false;   // trainable: optimizers update it
  bool stop_gradient = false;  // autodiff does not propagate through it

  friend bool operator==(const VarDesc& a, const VarDesc& b) {
    return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape &&
           a.persistable == b.persistable && a.is_parameter == b.is_parameter &&
           a.stop_gradient == b.stop_gradient;
  }
};

// Operand names per slot, in the order the op lists them.
using OpSlots = std::vector<std::pair<std::string, std::vector<std::string>>>;

struct OpDesc {
  std::string type;
  OpSlots inputs;
  OpSlots outputs;
  vm::AttrMap attrs;

  // Names in a slot; empty when the slot is absent.
  const std::vector<std::string>& Input(absl::string_view slot) const;
  const std::vector<std::string>& Output(absl::string_view slot) const;
  // Every input (output) name, slots in order.
  std::vector<std::string> InputNames() const;
  std::vector<std::string> OutputNames() const;

  friend bool operator==(const OpDesc& a, const OpDesc& b) {
    return a.type == b.type && a.inputs == b.inputs && a.outputs == b.outputs && a.attrs == b.attrs;
  }
};

// Variables (kept in insertion order; names unique) and ops (in program order).
class BlockDesc {
 public:
  BlockDesc(int idx, int parent_idx) : idx_(idx), parent_idx_(parent_idx) {}

  int idx() const { return idx_; }
  int parent_idx() const { return parent_idx_; }  // -1 for the root block

  // AlreadyExists naming the variable when the name is taken; InvalidArgument for an empty
  // name or a name with whitespace, ',', '=' or ';' (the file format's separators).
  absl::StatusOr<VarDesc*> AddVar(VarDesc var);
  // Null when absent. Pointers stay valid until the next AddVar. Renaming through the
  // mutable pointer breaks lookups (Validate reports it).
  const VarDesc* FindVar(absl::string_view name) const;
  VarDesc* FindMutableVar(absl::string_view name);
  bool HasVar(absl::string_view name) const { return FindVar(name) != nullptr; }
  const std::vector<VarDesc>& vars() const { return vars_; }
  // Renames variable `from` to `to` here and in every operand of this block's ops (not in
  // sub-blocks: rename before any sub-block refers to it). NotFound naming `from` when the
  // block lacks it; AlreadyExists / InvalidArgument for `to` as AddVar. Nothing changes on
  // error.
  absl::Status RenameVar(absl::string_view from, const std::string& to);

  // Appends (returns the op's index). No checking: see ProgramDesc::Validate.
  int AppendOp(OpDesc op);
  const std::vector<OpDesc>& ops() const { return ops_; }
  std::vector<OpDesc>& mutable_ops() { return ops_; }

  friend bool operator==(const BlockDesc& a, const BlockDesc& b) {
    return a.idx_ == b.idx_ && a.parent_idx_ == b.parent_idx_ && a.vars_ == b.vars_ &&
           a.ops_ == b.ops_;
  }

 private:
  int idx_;
  int parent_idx_;
  std::vector<VarDesc> vars_;
  absl::flat_hash_map<std::string, size_t> var_index_;
  std::vector<OpDesc> ops_;
};

class ProgramDesc {
 public:
  // One empty root block.
  ProgramDesc();

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  const BlockDesc& block(int idx) const { return blocks_[idx]; }
  BlockDesc& mutable_block(int idx) { return blocks_[idx]; }
  const BlockDesc& global_block() const { return blocks_[0]; }
  BlockDesc& mutable_global_block() { return blocks_[0]; }
  // Appends a block whose parent is `parent_idx`; returns its index. May move the blocks:
  // references to BlockDescs do not survive it.
  int AppendBlock(int parent_idx);

  // Structural checks, each error naming the block, the op (index and type) or variable at
  // fault: block parents exist and precede their children; every op has a type; every
  // operand names a variable of its block or an ancestor block; control-flow ops
  // (framework/ir/control_flow.h) and their sub-blocks follow the control-flow rules, each
  // error InvalidArgument naming the block, the op and the variable or attribute at fault:
  //  - a block reference names a block after 0 whose parent is the op's block, and no block
  //    is referenced twice;
  //  - `yield` appears only as the last op of a block a cond or while references, with no
  //    outputs;
  //  - cond: one bool scalar Cond; both branch attributes; each branch yields as many values
  //    as Out names, each with the dtype and shape of its Out variable;
  //  - while: as many X as Out, Out[i] with X[i]'s dtype and shape, no Out name twice or
  //    among X, no X name twice; the condition block yields one bool scalar; the body
  //    yields one value per Out with its dtype and shape; max_iterations and
  //    parallel_iterations, when present, are ints of at least 1;
  //  - a yield has exactly the X slot, no outputs and no attributes.
  // Order (a variable read before anything writes it) depends on feeds and scopes, so the
  // interpreter checks it.
  absl::Status Validate() const;

  // The canonical text form (docs/program-format.md). Deterministic: equal programs give
  // equal text.
  std::string ToText() const;
  // Parses the text form. Every error is InvalidArgument (or DataLoss for a truncated
  // file) naming the line number and what is wrong; unsupported versions are
  // InvalidArgument naming the version.
  static absl::StatusOr<ProgramDesc> FromText(absl::string_view text);

  // File I/O on the text form. Errors name the path (NotFound, PermissionDenied, ...) and,
  // for parse errors, path:line.
  absl::Status Save(const std::string& path) const;
  static absl::StatusOr<ProgramDesc> Load(const std::string& path);

  // A stable 64-bit content hash of the canonical text (the same on every machine and
  // build: a fixed byte-wise hash, not std::hash).
  uint64_t Hash() const;

  friend bool operator==(const ProgramDesc& a, const ProgramDesc& b) {
    return a.blocks_ == b.blocks_;
  }

 private:
  std::vector<BlockDesc> blocks_;
};

// Queries that Validate and the control-flow ops (control_flow.h) share.

// The block on `block`'s parent chain (itself first) that has `name`; -1 when none has.
int OwnerBlock(const ProgramDesc& program, int block, absl::string_view name);

// The variable `name` as seen from block `block`: its own, or the nearest ancestor's. Null
// when no block on the chain has it.
const VarDesc* ResolveVar(const ProgramDesc& program, int block, absl::string_view name);

// The block-reference attributes of `op`: (attribute name, block index), by name.
std::vector<std::pair<std::string, int64_t>> SubBlockRefs(const OpDesc& op);

// The names block `block` yields: the X slot of its last op, which must be a `yield`
// (InvalidArgument naming the block otherwise).
absl::StatusOr<std::vector<std::string>> YieldedNames(const ProgramDesc& program, int block);

}  // namespace sluice::framework::ir

#endif  // SLUICE_FRAMEWORK_IR_PROGRAM_DESC_H_
