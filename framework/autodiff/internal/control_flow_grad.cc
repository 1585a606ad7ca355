#include "framework/autodiff/internal/control_flow_grad.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/ir/control_flow.h"

namespace sluice::framework::autodiff_internal {
namespace {

std::vector<int64_t> Dims(const Shape& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

// The program index of the block declaring `name`; -1 when no block does.
int OwnerBlockOf(const ir::ProgramDesc& program, const std::string& name) {
  for (int b = 0; b < program.num_blocks(); ++b) {
    if (program.block(b).HasVar(name)) return b;
  }
  return -1;
}

// The declaration of `name`, wherever it is (names are unique program-wide).
ir::VarDesc VarOf(const ir::ProgramDesc& desc, const std::string& name) {
  const int block = OwnerBlockOf(desc, name);
  SLUICE_CHECK(block >= 0);
  return *desc.block(block).FindVar(name);
}

absl::Status Declare(Program& program, int block, const std::string& name, DataType dtype,
                     const Shape& shape) {
  if (program.HasVarAnywhere(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("AppendBackward: the program already has a variable '", name, "'"));
  }
  ir::VarDesc var;
  var.name = name;
  var.dtype = dtype;
  var.shape = shape;
  return program.mutable_desc().mutable_block(block).AddVar(std::move(var)).status();
}

std::vector<std::string>& MutableSlot(ir::OpSlots& slots, absl::string_view slot) {
  for (auto& [name, names] : slots) {
    if (name == slot) return names;
  }
  slots.emplace_back(std::string(slot), std::vector<std::string>{});
  return slots.back().second;
}

// The index of the op of `block` whose Out slot starts with `out0` (the control-flow op
// being differentiated: ops may have been inserted before it since it was planned).
size_t FindOpWriting(const ir::ProgramDesc& desc, int block, const std::string& out0) {
  const std::vector<ir::OpDesc>& ops = desc.block(block).ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::vector<std::string>& out = ops[i].Output(ir::kOutSlot);
    if (!out.empty() && out[0] == out0) return i;
  }
  SLUICE_CHECK(false);
  return 0;
}

ir::OpDesc Op(std::string type, ir::OpSlots inputs, ir::OpSlots outputs, vm::AttrMap attrs = {}) {
  return ir::OpDesc{std::move(type), std::move(inputs), std::move(outputs), std::move(attrs)};
}

vm::AttrMap FillAttrs(DataType dtype, const Shape& shape, double value) {
  return vm::AttrMap()
      .Set("shape", Dims(shape))
      .Set("dtype", std::string(DataTypeName(dtype)))
      .Set("value", value);
}

// Inserts `op` just before the yield that ends `block`.
void InsertBeforeYield(Program& program, int block, ir::OpDesc op) {
  std::vector<ir::OpDesc>& ops = program.mutable_desc().mutable_block(block).mutable_ops();
  ops.insert(ops.end() - 1, std::move(op));
}

std::vector<std::string>& MutableYield(Program& program, int block) {
  ir::OpDesc& yield = program.mutable_desc().mutable_block(block).mutable_ops().back();
  return MutableSlot(yield.inputs, ir::kLoopVarsSlot);
}

// Appends op `type` with new outputs to the current block; its first output's name.
absl::StatusOr<std::string> AppendOne(Program& program, absl::string_view type,
                                      const std::vector<std::vector<std::string>>& inputs,
                                      vm::AttrMap attrs = {}) {
  std::vector<std::vector<Var>> vars;
  for (const std::vector<std::string>& slot : inputs) {
    vars.emplace_back();
    for (const std::string& name : slot) vars.back().emplace_back(&program, name);
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> out,
                          AppendOp(program, type, vars, std::move(attrs)));
  return out[0][0].name();
}

absl::StatusOr<std::string> AppendZeros(Program& program, DataType dtype, const Shape& shape) {
  return AppendOne(program, "fill_constant", {}, FillAttrs(dtype, shape, 0.0));
}

void AppendYield(Program& program, std::vector<std::string> values) {
  program.mutable_desc()
      .mutable_block(program.current_block())
      .AppendOp(
          Op(std::string(ir::kYieldOp), {{std::string(ir::kLoopVarsSlot), std::move(values)}}, {}));
}

// ---- cond ----

// Makes `name`, a temporary of branch `branch` of the cond whose first output is `out0`, a
// new output of that cond: `branch` yields it, `other` yields zeros. The output's name.
absl::StatusOr<std::string> SaveFromBranch(Program& program, const std::string& out0, int branch,
                                           int other, const std::string& name) {
  const ir::VarDesc var = VarOf(program.desc(), name);
  const int block = OwnerBlockOf(program.desc(), out0);
  const std::string saved = program.UniqueName(absl::StrCat(name, "@SAVED"));
  SLUICE_RETURN_IF_ERROR(Declare(program, block, saved, var.dtype, var.shape));
  const std::string zero = program.UniqueName(absl::StrCat(saved, "@ZERO"));
  SLUICE_RETURN_IF_ERROR(Declare(program, other, zero, var.dtype, var.shape));
  InsertBeforeYield(program, other,
                    Op("fill_constant", {}, {{"Out", {zero}}}, FillAttrs(var.dtype, var.shape, 0)));
  MutableYield(program, branch).push_back(name);
  MutableYield(program, other).push_back(zero);
  ir::OpDesc& cond = program.mutable_desc()
                         .mutable_block(block)
                         .mutable_ops()[FindOpWriting(program.desc(), block, out0)];
  MutableSlot(cond.outputs, ir::kOutSlot).push_back(saved);
  return saved;
}

absl::Status BuildCondGrad(BlockGradPlanner& outer, const ir::OpDesc& op,
                           const std::vector<std::string>& needed,
                           const std::vector<std::optional<std::string>>& seeds,
                           const std::vector<std::string>& out_names) {
  Program& program = outer.program();
  const int grad_block = program.current_block();
  SLUICE_ASSIGN_OR_RETURN(const std::string pred, outer.Visible(op.Input(ir::kCondSlot)[0]));
  SLUICE_ASSIGN_OR_RETURN(const vm::BlockRef true_block, op.attrs.GetBlock(ir::kTrueBlockAttr));
  SLUICE_ASSIGN_OR_RETURN(const vm::BlockRef false_block, op.attrs.GetBlock(ir::kFalseBlockAttr));
  const int branches[2] = {static_cast<int>(true_block.index), static_cast<int>(false_block.index)};
  const std::string out0 = op.Output(ir::kOutSlot)[0];
  int grad_branches[2];
  for (int b = 0; b < 2; ++b) {
    const int branch = branches[b];
    const int other = branches[1 - b];
    grad_branches[b] = program.EnterNewBlock();
    BlockGradPlanner::LocalView view =
        [&program, &outer, out0, branch,
         other](const std::string& name) -> absl::StatusOr<std::optional<std::string>> {
      if (OwnerBlockOf(program.desc(), name) != branch) return std::optional<std::string>();
      SLUICE_ASSIGN_OR_RETURN(const std::string saved,
                              SaveFromBranch(program, out0, branch, other, name));
      SLUICE_ASSIGN_OR_RETURN(std::string visible, outer.Visible(saved));
      return std::optional<std::string>(std::move(visible));
    };
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<BlockGradPlanner> planner,
                            outer.PlanSubBlock(branch, grad_branches[b], std::move(view), seeds));
    std::vector<std::string> yields;
    for (const std::string& name : needed) {
      if (planner->HasGrad(name)) {
        yields.push_back(planner->GradVar(name));
        continue;
      }
      const ir::VarDesc var = VarOf(program.desc(), name);
      SLUICE_ASSIGN_OR_RETURN(std::string zeros, AppendZeros(program, var.dtype, var.shape));
      yields.push_back(std::move(zeros));
    }
    AppendYield(program, std::move(yields));
    program.LeaveBlock();
  }
  ir::OpDesc grad = Op(std::string(ir::kCondOp), {{std::string(ir::kCondSlot), {pred}}},
                       {{std::string(ir::kOutSlot), out_names}});
  grad.attrs.Set(std::string(ir::kTrueBlockAttr), vm::BlockRef{grad_branches[0]})
      .Set(std::string(ir::kFalseBlockAttr), vm::BlockRef{grad_branches[1]});
  ir::ListCaptures(program.desc(), grad);
  program.mutable_desc().mutable_block(grad_block).AppendOp(std::move(grad));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ControlFlowGrad>> PlanCondGrad(BlockGradPlanner& outer,
                                                            const ir::OpDesc& op) {
  const std::string& pred = op.Input(ir::kCondSlot)[0];
  std::vector<std::string> needed;
  for (const std::string& name : ir::OuterReads(outer.program().desc(), op)) {
    if (name != pred && outer.NeedsGrad(name)) needed.push_back(name);
  }
  if (needed.empty()) return std::nullopt;
  std::vector<std::optional<std::string>> seeds;
  for (const std::string& out : op.Output(ir::kOutSlot)) {
    seeds.push_back(outer.HasGrad(out) ? std::optional<std::string>(outer.GradVar(out))
                                       : std::nullopt);
  }
  ControlFlowGrad grad;
  grad.op.type = std::string(ir::kCondOp);
  std::vector<std::string> names;
  for (const std::string& name : needed) names.push_back(outer.GradVar(name));
  grad.op.outputs = {{std::string(ir::kOutSlot), std::move(names)}};
  grad.grads_of = needed;
  grad.op.build = [&outer, op, needed, seeds](const Slots& outputs) {
    return BuildCondGrad(outer, op, needed, seeds, outputs[0].second);
  };
  return grad;
}

// ---- while ----

// What a while's gradient needs to know of the forward loop.
struct WhileGradSpec {
  ir::OpDesc op;
  int body = 0;
  int64_t max_iterations = 0;
  std::vector<size_t> carried;        // loop variables whose gradient the backward loop carries
  std::vector<size_t> x_grads;        // of those, the ones whose X needs a gradient
  std::vector<std::string> captures;  // outer variables the body reads that need one
  std::vector<std::optional<std::string>> seeds;  // per carried: the gradient of its Out
};

// Adds a loop variable to the while whose first output is `out0`: initial value
// fill_constant 0 (inserted before the loop), current value "<base>_<n>" (returned), next
// value written in the body by next_op(current, next).
absl::StatusOr<std::string> AddLoopVar(
    Program& program, const std::string& out0, int body, const std::string& base, DataType dtype,
    const Shape& shape,
    const std::function<ir::OpDesc(const std::string&, const std::string&)>& next_op) {
  const int block = OwnerBlockOf(program.desc(), out0);
  const std::string current = program.UniqueName(base);
  SLUICE_RETURN_IF_ERROR(Declare(program, block, current, dtype, shape));
  const std::string init = program.UniqueName(absl::StrCat(current, "@INIT"));
  SLUICE_RETURN_IF_ERROR(Declare(program, block, init, dtype, shape));
  const std::string next = program.UniqueName(absl::StrCat(current, "@NEXT"));
  SLUICE_RETURN_IF_ERROR(Declare(program, body, next, dtype, shape));
  std::vector<ir::OpDesc>& ops = program.mutable_desc().mutable_block(block).mutable_ops();
  const size_t at = FindOpWriting(program.desc(), block, out0);
  ops.insert(ops.begin() + at,
             Op("fill_constant", {}, {{"Out", {init}}}, FillAttrs(dtype, shape, 0)));
  ir::OpDesc& loop = ops[at + 1];
  MutableSlot(loop.inputs, ir::kLoopVarsSlot).push_back(init);
  MutableSlot(loop.outputs, ir::kOutSlot).push_back(current);
  InsertBeforeYield(program, body, next_op(current, next));
  MutableYield(program, body).push_back(next);
  return current;
}

// The backward loop's variables of BuildWhileGrad: its initial values `x` and outputs `out`
// — the iteration count (from the forward loop's `counter`), then one per carried loop
// variable (its seed or zeros in; its gradient out, or an unused variable), then one
// accumulator per capture (zeros in; the capture's gradient out).
absl::Status BackwardLoopVars(BlockGradPlanner& outer, const WhileGradSpec& spec,
                              const std::string& counter, const std::vector<std::string>& out_names,
                              std::vector<std::string>& x, std::vector<std::string>& out) {
  Program& program = outer.program();
  const int grad_block = program.current_block();
  const std::vector<std::string> fwd_out = spec.op.Output(ir::kOutSlot);
  const std::string base = program.UniqueName(absl::StrCat(fwd_out[0], "@GRAD_LOOP"));
  SLUICE_ASSIGN_OR_RETURN(std::string count, outer.Visible(counter));
  x.push_back(std::move(count));
  out.push_back(absl::StrCat(base, ".counter"));
  SLUICE_RETURN_IF_ERROR(Declare(program, grad_block, out.back(), DataType::kI64, Shape()));
  size_t next_out = 0;
  for (size_t k = 0; k < spec.carried.size(); ++k) {
    const size_t i = spec.carried[k];
    const ir::VarDesc var = VarOf(program.desc(), fwd_out[i]);
    if (spec.seeds[k].has_value()) {
      x.push_back(*spec.seeds[k]);
    } else {
      SLUICE_ASSIGN_OR_RETURN(std::string zeros, AppendZeros(program, var.dtype, var.shape));
      x.push_back(std::move(zeros));
    }
    if (std::find(spec.x_grads.begin(), spec.x_grads.end(), i) != spec.x_grads.end()) {
      out.push_back(out_names[next_out++]);
    } else {
      out.push_back(absl::StrCat(base, ".unused_", i));
      SLUICE_RETURN_IF_ERROR(Declare(program, grad_block, out.back(), var.dtype, var.shape));
    }
  }
  for (const std::string& capture : spec.captures) {
    const ir::VarDesc var = VarOf(program.desc(), capture);
    SLUICE_ASSIGN_OR_RETURN(std::string zeros, AppendZeros(program, var.dtype, var.shape));
    x.push_back(std::move(zeros));
    out.push_back(out_names[next_out++]);
  }
  return absl::OkStatus();
}

// A new block that yields whether `counter` is above 0: the backward loop's condition.
// Returns the block's index.
absl::StatusOr<int> AppendCountCond(Program& program, const std::string& counter) {
  const int block = program.EnterNewBlock();
  SLUICE_ASSIGN_OR_RETURN(const std::string zero, AppendZeros(program, DataType::kI64, Shape()));
  SLUICE_ASSIGN_OR_RETURN(const std::string more,
                          AppendOne(program, "greater_than", {{counter}, {zero}}));
  AppendYield(program, {more});
  program.LeaveBlock();
  return block;
}

absl::Status BuildWhileGrad(BlockGradPlanner& outer, const WhileGradSpec& spec,
                            const std::vector<std::string>& out_names) {
  Program& program = outer.program();
  const int grad_block = program.current_block();
  const std::vector<std::string> fwd_out = spec.op.Output(ir::kOutSlot);
  const std::string out0 = fwd_out[0];
  const int body = spec.body;

  // The forward loop counts its iterations.
  SLUICE_ASSIGN_OR_RETURN(
      const std::string counter,
      AddLoopVar(program, out0, body, absl::StrCat(out0, "@COUNTER"), DataType::kI64, Shape(),
                 [](const std::string& current, const std::string& next) {
                   return Op("increment", {{"X", {current}}}, {{"Out", {next}}},
                             vm::AttrMap().Set("value", 1.0));
                 }));

  // The backward loop's variables: the counter, the carried gradients, the accumulators.
  std::vector<std::string> x, out;
  SLUICE_RETURN_IF_ERROR(BackwardLoopVars(outer, spec, counter, out_names, x, out));
  const std::string& backward_counter = out[0];

  SLUICE_ASSIGN_OR_RETURN(const int grad_cond, AppendCountCond(program, backward_counter));

  // Body: k = counter - 1; the stacks' rows k; the forward body's gradient.
  const int grad_body = program.EnterNewBlock();
  SLUICE_ASSIGN_OR_RETURN(const std::string k, AppendOne(program, "increment", {{backward_counter}},
                                                         vm::AttrMap().Set("value", -1.0)));
  const absl::flat_hash_set<std::string> current_values(fwd_out.begin(), fwd_out.end());
  auto pops = std::make_shared<size_t>(0);
  BlockGradPlanner::LocalView view =
      [&program, &outer, out0, body, current_values, counter, grad_body, k, pops,
       max = spec.max_iterations](
          const std::string& name) -> absl::StatusOr<std::optional<std::string>> {
    if (OwnerBlockOf(program.desc(), name) != body && !current_values.contains(name)) {
      return std::optional<std::string>();
    }
    const ir::VarDesc var = VarOf(program.desc(), name);
    std::vector<int64_t> dims = {max};
    for (int64_t d : var.shape.dims()) dims.push_back(d);
    SLUICE_ASSIGN_OR_RETURN(
        const std::string stack,
        AddLoopVar(program, out0, body, absl::StrCat(name, "@STACK"), var.dtype, Shape(dims),
                   [&](const std::string& current, const std::string& next) {
                     return Op("write_row",
                               {{"Buffer", {current}}, {"Index", {counter}}, {"X", {name}}},
                               {{"Out", {next}}});
                   }));
    SLUICE_ASSIGN_OR_RETURN(const std::string visible, outer.Visible(stack));
    const std::string pop = program.UniqueName(absl::StrCat(name, "@POP"));
    SLUICE_RETURN_IF_ERROR(Declare(program, grad_body, pop, var.dtype, var.shape));
    std::vector<ir::OpDesc>& ops = program.mutable_desc().mutable_block(grad_body).mutable_ops();
    ops.insert(ops.begin() + 1 + static_cast<std::ptrdiff_t>((*pops)++),
               Op("read_row", {{"Buffer", {visible}}, {"Index", {k}}}, {{"Out", {pop}}}));
    return std::optional<std::string>(pop);
  };
  std::vector<std::optional<std::string>> seeds(fwd_out.size());
  for (size_t k2 = 0; k2 < spec.carried.size(); ++k2) seeds[spec.carried[k2]] = out[1 + k2];
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<BlockGradPlanner> planner,
                          outer.PlanSubBlock(body, grad_body, std::move(view), seeds));
  std::vector<std::string> next = {k};
  for (size_t i : spec.carried) {
    if (planner->HasGrad(fwd_out[i])) {
      next.push_back(planner->GradVar(fwd_out[i]));
      continue;
    }
    const ir::VarDesc var = VarOf(program.desc(), fwd_out[i]);
    SLUICE_ASSIGN_OR_RETURN(std::string zeros, AppendZeros(program, var.dtype, var.shape));
    next.push_back(std::move(zeros));
  }
  for (size_t c = 0; c < spec.captures.size(); ++c) {
    const std::string& acc = out[1 + spec.carried.size() + c];
    const std::string& capture = spec.captures[c];
    std::string sum;
    if (planner->HasGrad(capture)) {
      SLUICE_ASSIGN_OR_RETURN(sum, AppendOne(program, "sum", {{acc, planner->GradVar(capture)}}));
    } else {
      SLUICE_ASSIGN_OR_RETURN(sum, AppendOne(program, "assign", {{acc}}));
    }
    next.push_back(std::move(sum));
  }
  AppendYield(program, std::move(next));
  program.LeaveBlock();

  ir::OpDesc grad = Op(std::string(ir::kWhileOp), {{std::string(ir::kLoopVarsSlot), x}},
                       {{std::string(ir::kOutSlot), out}});
  grad.attrs.Set(std::string(ir::kCondBlockAttr), vm::BlockRef{grad_cond})
      .Set(std::string(ir::kBodyBlockAttr), vm::BlockRef{grad_body})
      .Set(std::string(ir::kMaxIterationsAttr), spec.max_iterations)
      .Set(std::string(ir::kParallelIterationsAttr), int64_t{1});
  ir::ListCaptures(program.desc(), grad);
  program.mutable_desc().mutable_block(grad_block).AppendOp(std::move(grad));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ControlFlowGrad>> PlanWhileGrad(BlockGradPlanner& outer,
                                                             const ir::OpDesc& op,
                                                             const std::string& where) {
  WhileGradSpec spec;
  spec.op = op;
  const std::vector<std::string>& x = op.Input(ir::kLoopVarsSlot);
  const std::vector<std::string>& out = op.Output(ir::kOutSlot);
  SLUICE_ASSIGN_OR_RETURN(const vm::BlockRef body, op.attrs.GetBlock(ir::kBodyBlockAttr));
  spec.body = static_cast<int>(body.index);
  for (size_t i = 0; i < out.size(); ++i) {
    if (!outer.NeedsGrad(out[i])) continue;
    spec.carried.push_back(i);
    if (outer.NeedsGrad(x[i])) spec.x_grads.push_back(i);
    spec.seeds.push_back(outer.HasGrad(out[i]) ? std::optional<std::string>(outer.GradVar(out[i]))
                                               : std::nullopt);
  }
  // What the body alone reads from outside the loop.
  ir::OpDesc body_only;
  body_only.type = std::string(ir::kWhileOp);
  body_only.outputs = {{std::string(ir::kOutSlot), out}};
  body_only.attrs.Set(std::string(ir::kBodyBlockAttr), body);
  for (const std::string& name : ir::OuterReads(outer.program().desc(), body_only)) {
    if (outer.NeedsGrad(name)) spec.captures.push_back(name);
  }
  if (spec.x_grads.empty() && spec.captures.empty()) return std::nullopt;
  absl::StatusOr<int64_t> max = op.attrs.GetInt(ir::kMaxIterationsAttr);
  if (!max.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AppendBackward: ", where,
        " has no max_iterations; the gradient of a while keeps each iteration's values in "
        "stacks of that many rows, so the loop needs the bound"));
  }
  spec.max_iterations = *max;

  ControlFlowGrad grad;
  grad.op.type = std::string(ir::kWhileOp);
  std::vector<std::string> names;
  for (size_t i : spec.x_grads) grad.grads_of.push_back(x[i]);
  for (const std::string& capture : spec.captures) grad.grads_of.push_back(capture);
  for (const std::string& var : grad.grads_of) names.push_back(outer.GradVar(var));
  grad.op.outputs = {{std::string(ir::kOutSlot), std::move(names)}};
  grad.op.build = [&outer, spec = std::move(spec)](const Slots& outputs) {
    return BuildWhileGrad(outer, spec, outputs[0].second);
  };
  return grad;
}

}  // namespace

absl::StatusOr<std::optional<ControlFlowGrad>> PlanControlFlowGrad(BlockGradPlanner& planner,
                                                                   const ir::OpDesc& op,
                                                                   const std::string& where) {
  if (op.type == ir::kCondOp) return PlanCondGrad(planner, op);
  return PlanWhileGrad(planner, op, where);
}

}  // namespace sluice::framework::autodiff_internal
