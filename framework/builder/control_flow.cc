#include "framework/builder/control_flow.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/program.h"
#include "framework/ir/control_flow.h"

namespace sluice::fn {
namespace {

namespace ir = framework::ir;
using framework::Program;
using framework::Var;

DataType DtypeOf(const Value& v) { return v.is_static() ? v.var().dtype() : v.tensor().dtype(); }
Shape ShapeOf(const Value& v) { return v.is_static() ? v.var().shape() : v.tensor().shape(); }
std::string MetaText(const Value& v) {
  return absl::StrCat(DataTypeName(DtypeOf(v)), ShapeOf(v).ToString());
}
bool SameMeta(const Value& a, const Value& b) {
  return DtypeOf(a) == DtypeOf(b) && ShapeOf(a) == ShapeOf(b);
}

absl::Status RequireBoolScalar(const Value& pred, absl::string_view op, absl::string_view what) {
  if (DtypeOf(pred) != DataType::kBool || ShapeOf(pred).rank() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " must be a bool scalar, not ", MetaText(pred)));
  }
  return absl::OkStatus();
}

// Every value of `values` in `program`'s static mode, visible from its current block.
absl::StatusOr<std::vector<Var>> ToVars(const std::vector<Value>& values, const Program& program,
                                        absl::string_view op, absl::string_view what) {
  std::vector<Var> vars;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string where = absl::StrCat(op, ": ", what, " value ", i);
    if (!values[i].is_static()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is an eager Tensor in a static ", op));
    }
    const Var& var = values[i].var();
    if (var.program() != &program) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " ('", var.name(), "') belongs to another Program"));
    }
    if (ir::ResolveVar(program.desc(), program.current_block(), var.name()) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, " ('", var.name(),
                                                     "') is a variable of a block this one "
                                                     "cannot see"));
    }
    vars.push_back(var);
  }
  return vars;
}

std::vector<std::string> Names(const std::vector<Var>& vars) {
  std::vector<std::string> names;
  for (const Var& var : vars) names.push_back(var.name());
  return names;
}

// Undoes a control-flow call that fails part-way: unless committed, returns to the block
// that was current and puts back the program as it was (a copy, as AppendBackward keeps).
// Names the call generated stay used (later generated names may differ).
class Rollback {
 public:
  explicit Rollback(Program& program)
      : program_(program), current_(program.current_block()), before_(program.desc()) {}
  ~Rollback() {
    if (committed_) return;
    while (program_.current_block() != current_) program_.LeaveBlock();
    program_.mutable_desc() = std::move(before_);
  }
  Rollback(const Rollback&) = delete;
  Rollback& operator=(const Rollback&) = delete;

  void Commit() { committed_ = true; }

 private:
  Program& program_;
  const int current_;
  ir::ProgramDesc before_;
  bool committed_ = false;
};

// Calls `fn` with a new sub-block current, ends the block with a yield of its results and
// returns to the parent. On error the caller's Rollback restores the current block.
template <typename Fn>
absl::StatusOr<std::pair<int, std::vector<Var>>> BuildBlock(Program& program, const Fn& fn,
                                                            absl::string_view op,
                                                            absl::string_view what) {
  const int block = program.EnterNewBlock();
  absl::StatusOr<std::vector<Value>> results = fn();
  if (!results.ok()) return results.status();
  if (program.current_block() != block) {
    return absl::FailedPreconditionError(absl::StrCat(
        op, ": ", what, " function left block ", program.current_block(), " current, not ", block));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<Var> vars, ToVars(*results, program, op, what));
  ir::OpDesc yield;
  yield.type = std::string(ir::kYieldOp);
  yield.inputs.emplace_back(std::string(ir::kLoopVarsSlot), Names(vars));
  program.mutable_desc().mutable_block(block).AppendOp(std::move(yield));
  program.LeaveBlock();
  return std::make_pair(block, std::move(vars));
}

// New variables "<prefix>_<n>.out_<i>" in the current block, like `like` (dtype and shape);
// <n> is chosen so that every name is free.
absl::StatusOr<std::vector<Var>> NewOutputs(Program& program, absl::string_view prefix,
                                            const std::vector<Var>& like) {
  std::string base;
  for (bool free = false; !free;) {
    base = program.UniqueName(prefix);
    free = true;
    for (size_t i = 0; i < like.size(); ++i) {
      free = free && !program.HasVarAnywhere(absl::StrCat(base, ".out_", i));
    }
  }
  std::vector<Var> outs;
  for (size_t i = 0; i < like.size(); ++i) {
    ir::VarDesc desc;
    desc.name = absl::StrCat(base, ".out_", i);
    desc.dtype = like[i].dtype();
    desc.shape = like[i].shape();
    SLUICE_ASSIGN_OR_RETURN(Var out, framework::CreateVar(program, std::move(desc)));
    outs.push_back(std::move(out));
  }
  return outs;
}

std::vector<Value> ToValues(const std::vector<Var>& vars) {
  return std::vector<Value>(vars.begin(), vars.end());
}

absl::Status MatchBranches(const std::vector<Var>& yes, const std::vector<Var>& no) {
  if (yes.size() != no.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cond: the true branch returns ", yes.size(),
                                                   " values but the false branch ", no.size()));
  }
  for (size_t i = 0; i < yes.size(); ++i) {
    if (!SameMeta(yes[i], no[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cond: value ", i, " is ", MetaText(yes[i]), " ('", yes[i].name(),
          "') in the true branch but ", MetaText(no[i]), " ('", no[i].name(), "') in the false"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> StaticCond(const Var& pred, const BranchFn& true_fn,
                                              const BranchFn& false_fn) {
  Program& program = *pred.program();
  SLUICE_RETURN_IF_ERROR(ToVars({pred}, program, "cond", "the predicate").status());
  Rollback rollback(program);
  SLUICE_ASSIGN_OR_RETURN(auto yes, BuildBlock(program, true_fn, "cond", "the true branch's"));
  SLUICE_ASSIGN_OR_RETURN(auto no, BuildBlock(program, false_fn, "cond", "the false branch's"));
  SLUICE_RETURN_IF_ERROR(MatchBranches(yes.second, no.second));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Var> outs, NewOutputs(program, "cond", yes.second));
  ir::OpDesc op;
  op.type = std::string(ir::kCondOp);
  op.inputs.emplace_back(std::string(ir::kCondSlot), std::vector<std::string>{pred.name()});
  op.outputs.emplace_back(std::string(ir::kOutSlot), Names(outs));
  op.attrs.Set(std::string(ir::kTrueBlockAttr), vm::BlockRef{yes.first})
      .Set(std::string(ir::kFalseBlockAttr), vm::BlockRef{no.first});
  ir::ListCaptures(program.desc(), op);
  program.mutable_desc().mutable_block(program.current_block()).AppendOp(std::move(op));
  rollback.Commit();
  return ToValues(outs);
}

absl::StatusOr<bool> ReadPredicate(const Value& pred, absl::string_view op,
                                   absl::string_view what) {
  SLUICE_RETURN_IF_ERROR(RequireBoolScalar(pred, op, what));
  SLUICE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, pred.tensor().ToBytes());
  return !bytes.empty() && bytes[0] != 0;
}

// Static loop variables: one program, distinct names.
absl::StatusOr<std::vector<Var>> LoopVars(const std::vector<Value>& loop_vars) {
  Program* program = loop_vars[0].var().program();
  SLUICE_ASSIGN_OR_RETURN(std::vector<Var> vars,
                          ToVars(loop_vars, *program, "while_loop", "loop variable"));
  std::set<std::string> names;
  for (const Var& var : vars) {
    if (!names.insert(var.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("while_loop: '", var.name(), "' is given twice as a loop variable"));
    }
  }
  return vars;
}

absl::Status MatchLoopVars(const std::vector<Value>& next, const std::vector<Value>& vars,
                           absl::string_view when) {
  if (next.size() != vars.size()) {
    return absl::InvalidArgumentError(absl::StrCat("while_loop: the body returns ", next.size(),
                                                   " values for ", vars.size(), " loop variables",
                                                   when));
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!SameMeta(next[i], vars[i])) {
      return absl::InvalidArgumentError(absl::StrCat("while_loop: the body returns ",
                                                     MetaText(next[i]), " for loop variable ", i,
                                                     ", which is ", MetaText(vars[i]), when));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> StaticWhile(const LoopCondFn& cond, const LoopBodyFn& body,
                                               const std::vector<Value>& loop_vars,
                                               const WhileOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<Var> vars, LoopVars(loop_vars));
  Program& program = *vars[0].program();
  Rollback rollback(program);
  // The outputs hold the current values inside the loop: the functions get their handles.
  SLUICE_ASSIGN_OR_RETURN(std::vector<Var> outs, NewOutputs(program, "while", vars));
  const std::vector<Value> current = ToValues(outs);
  auto cond_block = [&]() -> absl::StatusOr<std::vector<Value>> {
    SLUICE_ASSIGN_OR_RETURN(Value pred, cond(current));
    SLUICE_RETURN_IF_ERROR(RequireBoolScalar(pred, "while_loop", "the condition"));
    return std::vector<Value>{pred};
  };
  SLUICE_ASSIGN_OR_RETURN(auto check,
                          BuildBlock(program, cond_block, "while_loop", "the condition's"));
  auto body_block = [&] { return body(current); };
  SLUICE_ASSIGN_OR_RETURN(auto step, BuildBlock(program, body_block, "while_loop", "the body's"));
  SLUICE_RETURN_IF_ERROR(MatchLoopVars(ToValues(step.second), loop_vars, ""));
  ir::OpDesc op;
  op.type = std::string(ir::kWhileOp);
  op.inputs.emplace_back(std::string(ir::kLoopVarsSlot), Names(vars));
  op.outputs.emplace_back(std::string(ir::kOutSlot), Names(outs));
  op.attrs.Set(std::string(ir::kCondBlockAttr), vm::BlockRef{check.first})
      .Set(std::string(ir::kBodyBlockAttr), vm::BlockRef{step.first})
      .Set(std::string(ir::kParallelIterationsAttr), options.parallel_iterations);
  if (options.max_iterations.has_value()) {
    op.attrs.Set(std::string(ir::kMaxIterationsAttr), *options.max_iterations);
  }
  ir::ListCaptures(program.desc(), op);
  program.mutable_desc().mutable_block(program.current_block()).AppendOp(std::move(op));
  rollback.Commit();
  return current;
}

absl::StatusOr<std::vector<Value>> EagerWhile(const LoopCondFn& cond, const LoopBodyFn& body,
                                              std::vector<Value> vars,
                                              const WhileOptions& options) {
  for (int64_t done = 0;; ++done) {
    SLUICE_ASSIGN_OR_RETURN(Value pred, cond(vars));
    if (pred.is_static()) {
      return absl::InvalidArgumentError(
          "while_loop: the condition returned a static Var in an "
          "eager loop");
    }
    SLUICE_ASSIGN_OR_RETURN(const bool again, ReadPredicate(pred, "while_loop", "the condition"));
    if (!again) return vars;
    if (options.max_iterations.has_value() && done >= *options.max_iterations) {
      return absl::InvalidArgumentError(absl::StrCat(
          "while_loop: more than ", *options.max_iterations, " iterations (max_iterations)"));
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<Value> next, body(vars));
    for (size_t i = 0; i < next.size(); ++i) {
      if (next[i].is_static()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "while_loop: the body returned a static Var as value ", i, " in an eager loop"));
      }
    }
    SLUICE_RETURN_IF_ERROR(MatchLoopVars(next, vars, absl::StrCat(" (iteration ", done, ")")));
    vars = std::move(next);
  }
}

absl::Status CheckOptions(const WhileOptions& options) {
  if (options.max_iterations.has_value() && *options.max_iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("while_loop: max_iterations must be at least "
                     "1, not ",
                     *options.max_iterations));
  }
  if (options.parallel_iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "while_loop: parallel_iterations must be at least 1, not ", options.parallel_iterations));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Value>> Cond(const Value& pred, const BranchFn& true_fn,
                                        const BranchFn& false_fn) {
  if (pred.is_static()) {
    SLUICE_RETURN_IF_ERROR(RequireBoolScalar(pred, "cond", "the predicate"));
    return StaticCond(pred.var(), true_fn, false_fn);
  }
  SLUICE_ASSIGN_OR_RETURN(const bool taken, ReadPredicate(pred, "cond", "the predicate"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> results, taken ? true_fn() : false_fn());
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].is_static()) {
      return absl::InvalidArgumentError(absl::StrCat("cond: the ", taken ? "true" : "false",
                                                     " branch returned a static Var as value ", i,
                                                     " in an eager cond"));
    }
  }
  return results;
}

absl::StatusOr<std::vector<Value>> WhileLoop(const LoopCondFn& cond, const LoopBodyFn& body,
                                             const std::vector<Value>& loop_vars,
                                             const WhileOptions& options) {
  if (loop_vars.empty()) {
    return absl::InvalidArgumentError("while_loop: no loop variables");
  }
  SLUICE_RETURN_IF_ERROR(CheckOptions(options));
  for (size_t i = 1; i < loop_vars.size(); ++i) {
    if (loop_vars[i].is_static() != loop_vars[0].is_static()) {
      return absl::InvalidArgumentError(
          absl::StrCat("while_loop: loop variable ", i, " is ",
                       loop_vars[i].is_static() ? "a static Var" : "an eager Tensor",
                       " but loop variable 0 is not; one loop takes values of one mode"));
    }
  }
  if (loop_vars[0].is_static()) return StaticWhile(cond, body, loop_vars, options);
  return EagerWhile(cond, body, loop_vars, options);
}

}  // namespace sluice::fn
