// The static-graph builder's core: a Program (an ir::ProgramDesc plus a
// name generator and the op registry it is checked against), Var handles to its variables,
// the ProgramGuard that makes a (main, startup) pair current, and the two ways ops enter a
// program — AppendOp (new output variables) and AppendOpInto (outputs that already exist:
// in-place optimizer updates, gradient ops).
//
// Everything that appends checks the op against its schema first: slot arity, attribute
// types (defaults are filled in and stored, so the stored OpDesc is normalized), shape and
// dtype inference. A program the builder made therefore holds only ops that infer; the
// interpreter still re-checks whatever it loads from a file.
//
// Thread-safety: Program and Var are thread-compatible (build a program on one thread,
// then share it read-only). The guard stack is the one piece of thread-local state in the
// builder; see ProgramGuard.
#ifndef SLUICE_FRAMEWORK_BUILDER_PROGRAM_H_
#define SLUICE_FRAMEWORK_BUILDER_PROGRAM_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"
#include "vm/attrs.h"

namespace sluice::framework {

// The attribute an op may carry besides its schema's: a stream such as "compute:1" on which
// the interpreter places the op. AppendOp keeps it out of schema normalization and stores it
// with the normalized attributes.
using ir::kStreamAttr;

// A program under construction. Owns its ProgramDesc; the registry must outlive it.
// Move-only. Var handles and guards refer to a Program by address, so a program must not
// move once any of them exists.
class Program {
 public:
  explicit Program(const ops::OpRegistry* registry);
  Program(Program&&) = default;
  Program& operator=(Program&&) = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const ir::ProgramDesc& desc() const { return desc_; }
  ir::ProgramDesc& mutable_desc() { return desc_; }
  const ops::OpRegistry* registry() const { return registry_; }

  // "<prefix>_<n>" with n counting per prefix from 0, skipping names any block already
  // has: "linear_0", then "linear_0.w"-style names derive from it. Unique among the names
  // this program generated; derived names are checked again when added.
  std::string UniqueName(absl::string_view prefix);

  // The block that AppendOp, AppendOpInto and CreateVar add to: 0 (the global block) unless
  // a control-flow builder (fn::Cond, fn::WhileLoop) is filling one of its sub-blocks.
  // Operands must be visible from it: its own variables or its ancestors'.
  int current_block() const { return current_block_; }
  // Appends a child of the current block and makes it current; returns its index.
  int EnterNewBlock();
  // Makes the current block's parent current again. Requires current_block() != 0.
  void LeaveBlock();
  // Whether any block has a variable `name` (variable names are unique program-wide).
  bool HasVarAnywhere(absl::string_view name) const;

 private:
  const ops::OpRegistry* registry_;
  ir::ProgramDesc desc_;
  absl::flat_hash_map<std::string, int64_t> name_counters_;
  int current_block_ = 0;
};

// Makes (main, startup) the current programs of the calling thread while alive — the only
// thread-local state of the builder, scoped by the guard as paddle.static.program_guard
// scopes its pair. Guards nest; destroying one restores the pair that was current before
// it (so guards must end in reverse order of creation, which block scoping gives). Both
// programs must outlive the guard. A guard affects only the thread that made it and must
// be destroyed on that thread; other threads keep their own stacks. Non-copyable.
class ProgramGuard {
 public:
  ProgramGuard(Program& main, Program& startup);
  ~ProgramGuard();
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;
};

// The current programs of the calling thread; null outside any guard.
Program* CurrentMainProgram();
Program* CurrentStartupProgram();

// A handle to a variable of a program: the program's address and the name (variable names
// are unique across the program's blocks). Copyable value type; default-constructed handles
// are invalid. The accessors other than valid(), name() and program() require the variable
// to exist (a handle from this API always does unless someone removed it from the desc, or
// a control-flow builder removed the sub-block of a branch that failed).
class Var {
 public:
  Var() = default;
  Var(Program* program, std::string name) : program_(program), name_(std::move(name)) {}

  bool valid() const { return program_ != nullptr; }
  const std::string& name() const { return name_; }
  Program* program() const { return program_; }

  // The VarDesc, in whichever block has it. The reference stays valid until the next
  // variable or block is added to the program.
  const ir::VarDesc& desc() const;
  DataType dtype() const { return desc().dtype; }
  Shape shape() const { return desc().shape; }
  bool stop_gradient() const { return desc().stop_gradient; }
  // Autodiff neither propagates through nor computes a gradient for a stop_gradient var.
  // Const like a pointer: it changes the variable, not the handle.
  void set_stop_gradient(bool stop) const;

  friend bool operator==(const Var& a, const Var& b) {
    return a.program_ == b.program_ && a.name_ == b.name_;
  }

 private:
  Program* program_ = nullptr;
  std::string name_;
};

// Adds `desc` to the program's current block. AlreadyExists naming the variable when any
// block has the name; InvalidArgument as BlockDesc::AddVar.
absl::StatusOr<Var> CreateVar(Program& program, ir::VarDesc desc);

// A feed variable of the current main program: stop_gradient, not persistable.
// FailedPrecondition outside a ProgramGuard or inside a sub-block; AlreadyExists naming
// `name` when taken.
absl::StatusOr<Var> Data(absl::string_view name, Shape shape, DataType dtype = DataType::kF32);

// Appends op `type` reading `inputs` (per schema input slot, in order; trailing optional
// slots may be left out) and returns its new output variables per output slot. The outputs
// are named "<type>_<n>.<slot>" ("add_3.out"; variadic slots add "_<i>"), have the inferred
// dtypes and shapes, and are neither persistable nor stop_gradient. `output_counts` sizes
// variadic output slots (empty: 1 per plain slot, inference decides the rest).
// Errors (nothing is appended): NotFound for an unknown op; InvalidArgument for a wrong
// number of slots or tensors, an input of another Program or missing from it, a bad
// attribute or "stream" value, or failed inference — each naming the op and the operand.
absl::StatusOr<std::vector<std::vector<Var>>> AppendOp(Program& program, absl::string_view type,
                                                       const std::vector<std::vector<Var>>& inputs,
                                                       vm::AttrMap attrs = {},
                                                       std::vector<int> output_counts = {});

// Appends op `type` writing existing variables: `outputs` per output slot, whose dtypes and
// shapes must be what inference gives (InvalidArgument naming the op and the output
// otherwise), and which, inside a sub-block, belong to the current block. For in-place updates (an
// optimizer's ParamOut is its Param) and for ops whose output names are chosen by the caller
// (gradients). Other errors as AppendOp.
absl::Status AppendOpInto(Program& program, absl::string_view type,
                          const std::vector<std::vector<Var>>& inputs,
                          const std::vector<std::vector<Var>>& outputs, vm::AttrMap attrs = {});

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_BUILDER_PROGRAM_H_
