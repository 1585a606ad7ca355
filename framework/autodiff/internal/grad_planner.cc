#include "framework/autodiff/internal/grad_planner.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autodiff/internal/control_flow_grad.h"
#include "framework/ir/control_flow.h"
#include "ops/op_schema.h"

namespace sluice::framework::autodiff_internal {
namespace {

// The forward op's stream attribute alone (empty when it has none): its grad ops run there.
vm::AttrMap StreamOf(const ir::OpDesc& op) {
  vm::AttrMap attrs;
  if (auto it = op.attrs.values().find(kStreamAttr); it != op.attrs.values().end()) {
    attrs.Set(std::string(kStreamAttr), it->second);
  }
  return attrs;
}

// What an op reads: a cond's or while's inputs are everything its blocks read from outside.
std::vector<std::string> ReadsOf(const ir::ProgramDesc& program, const ir::OpDesc& op) {
  return ir::IsControlFlowOp(op) ? ir::OuterReads(program, op) : op.InputNames();
}

}  // namespace

GradPlanner::GradPlanner(Config config) : config_(std::move(config)) {}

absl::StatusOr<std::unique_ptr<BlockGradPlanner>> GradPlanner::PlanSubBlock(
    int forward_block, int grad_block, LocalView view,
    const std::vector<std::optional<std::string>>& seeds) {
  Config config;
  config.program = config_.program;
  config.forward_block = forward_block;
  config.grad_block = grad_block;
  config.parent = this;
  config.local_view = std::move(view);
  config.no_grad_set = config_.no_grad_set;
  auto planner = std::make_unique<GradPlanner>(std::move(config));
  SLUICE_RETURN_IF_ERROR(planner->PlanFromSeeds(seeds));
  SLUICE_RETURN_IF_ERROR(planner->Append());
  return planner;
}

std::string GradPlanner::GradVar(const std::string& name) const {
  const std::string grad = ops::GradContext::GradName(name);
  if (config_.parent == nullptr) return grad;
  return absl::StrCat(grad, "@b", config_.grad_block);
}

std::string GradPlanner::OpWhere(size_t index, const std::string& type) const {
  return absl::StrCat("block ", config_.forward_block, " op #", index, " '", type, "'");
}

bool GradPlanner::Differentiable(const std::string& name) const {
  const ir::VarDesc* var = ir::ResolveVar(config_.program->desc(), config_.forward_block, name);
  return var != nullptr && IsFloating(var->dtype) && !var->stop_gradient &&
         (config_.no_grad_set == nullptr || !config_.no_grad_set->contains(name));
}

bool GradPlanner::ParentNeeds(const std::string& name) const {
  return config_.parent == nullptr || config_.parent->NeedsGrad(name);
}

absl::StatusOr<std::string> GradPlanner::Visible(const std::string& name) {
  if (auto it = visible_.find(name); it != visible_.end()) return it->second;
  std::string result = name;
  std::optional<std::string> local;
  if (config_.local_view) {
    SLUICE_ASSIGN_OR_RETURN(local, config_.local_view(name));
  }
  if (local.has_value()) {
    result = *std::move(local);
  } else if (config_.parent != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(result, config_.parent->Visible(name));
  }
  visible_[name] = result;
  return result;
}

void GradPlanner::FindPathAndNeeds(size_t count, absl::flat_hash_set<std::string> wanted) {
  const ir::ProgramDesc& desc = config_.program->desc();
  const std::vector<ir::OpDesc>& ops = desc.block(config_.forward_block).ops();
  std::vector<std::vector<std::string>> reads(count);
  for (size_t i = 0; i < count; ++i) reads[i] = ReadsOf(desc, ops[i]);
  std::vector<bool> on_path(count, false);
  for (size_t i = count; i-- > 0;) {
    bool writes_wanted = false;
    for (const std::string& out : ops[i].OutputNames()) writes_wanted |= wanted.contains(out);
    if (!writes_wanted) continue;
    on_path[i] = true;
    for (const std::string& in : reads[i]) wanted.insert(in);
  }
  differentiated_.assign(count, false);
  absl::flat_hash_set<std::string> written;
  for (size_t i = 0; i < count; ++i) {
    if (on_path[i]) {
      for (const std::string& in : reads[i]) {
        const bool leaf = !written.contains(in);
        if ((leaf && Differentiable(in) && ParentNeeds(in)) || needs_.contains(in)) {
          if (leaf) needs_.insert(in);
          differentiated_[i] = true;
        }
      }
      if (differentiated_[i]) {
        for (const std::string& out : ops[i].OutputNames()) {
          if (Differentiable(out)) needs_.insert(out);
        }
      }
    }
    for (const std::string& out : ops[i].OutputNames()) written.insert(out);
  }
}

absl::StatusOr<bool> GradPlanner::PlanFromLoss(const std::string& loss) {
  op_count_ = config_.program->desc().block(config_.forward_block).ops().size();
  FindPathAndNeeds(op_count_, {loss});
  if (!NeedsGrad(loss)) return false;
  const ir::VarDesc* var = ir::ResolveVar(config_.program->desc(), config_.forward_block, loss);
  has_grad_.insert(loss);
  const std::string seed = GradVar(loss);
  grad_vars_.emplace(seed, loss);
  grad_var_order_.push_back(seed);
  plan_.push_back(
      {"fill_constant",
       {},
       {{"Out", {seed}}},
       vm::AttrMap()
           .Set("shape", std::vector<int64_t>(var->shape.dims().begin(), var->shape.dims().end()))
           .Set("value", 1.0)
           .Set("dtype", std::string(DataTypeName(var->dtype))),
       nullptr});
  SLUICE_RETURN_IF_ERROR(PlanOps());
  return true;
}

absl::Status GradPlanner::PlanFromSeeds(const std::vector<std::optional<std::string>>& seeds) {
  SLUICE_ASSIGN_OR_RETURN(const std::vector<std::string> yielded,
                          ir::YieldedNames(config_.program->desc(), config_.forward_block));
  op_count_ = config_.program->desc().block(config_.forward_block).ops().size() - 1;
  absl::flat_hash_set<std::string> wanted;
  for (size_t j = 0; j < yielded.size() && j < seeds.size(); ++j) {
    if (seeds[j].has_value()) wanted.insert(yielded[j]);
  }
  FindPathAndNeeds(op_count_, wanted);
  // A yielded value no op of the block writes (a capture or a loop's current value,
  // yielded as is) is a leaf the path did not reach.
  absl::flat_hash_set<std::string> written;
  for (size_t i = 0; i < op_count_; ++i) {
    for (const std::string& out :
         config_.program->desc().block(config_.forward_block).ops()[i].OutputNames()) {
      written.insert(out);
    }
  }
  for (const std::string& name : wanted) {
    if (!written.contains(name) && Differentiable(name) && ParentNeeds(name)) {
      needs_.insert(name);
    }
  }
  for (size_t j = 0; j < yielded.size() && j < seeds.size(); ++j) {
    if (!seeds[j].has_value() || !NeedsGrad(yielded[j])) continue;
    AddContribution(yielded[j], 0, 0);
    plan_.push_back(
        {"assign", {{"X", {*seeds[j]}}}, {{"Out", {GradVar(yielded[j])}}}, {}, nullptr});
  }
  return PlanOps();
}

absl::Status GradPlanner::PlanOps() {
  // Walk backwards; an op's output gradients are complete when it is reached, since only
  // later ops read its outputs.
  for (size_t i = differentiated_.size(); i-- > 0;) {
    if (!differentiated_[i]) continue;
    SLUICE_RETURN_IF_ERROR(PlanOp(i));
  }
  Accumulate();
  return absl::OkStatus();
}

void GradPlanner::AddContribution(const std::string& var, size_t slot, size_t position) {
  auto [it, inserted] = contributions_.try_emplace(var);
  if (inserted) contribution_order_.push_back(var);
  it->second.push_back({plan_.size(), slot, position});
  has_grad_.insert(var);
}

absl::Status GradPlanner::PlanOp(size_t index) {
  // A copy: planning a control-flow op's gradient may add ops to this block.
  const ir::OpDesc fwd = config_.program->desc().block(config_.forward_block).ops()[index];
  bool any_output_grad = false;
  for (const std::string& out : fwd.OutputNames()) any_output_grad |= has_grad_.contains(out);
  if (!any_output_grad) return absl::OkStatus();  // nothing flows back through it
  if (ir::IsControlFlowOp(fwd)) return PlanControlFlowOp(index, fwd);

  absl::StatusOr<const ops::OpSchema*> schema = config_.program->registry()->FindSchema(fwd.type);
  if (!schema.ok()) {
    return absl::NotFoundError(
        absl::StrCat("AppendBackward: ", OpWhere(index, fwd.type), " is not registered"));
  }
  if (!(*schema)->has_grad()) {
    return absl::UnimplementedError(
        absl::StrCat("AppendBackward: ", OpWhere(index, fwd.type),
                     " lies between a variable that needs a gradient and the loss but has no "
                     "grad maker"));
  }
  vm::AttrMap attrs;
  for (const auto& [name, value] : fwd.attrs.values()) {
    if (name != kStreamAttr) attrs.Set(name, value);
  }
  const ops::GradContext context(fwd.inputs, fwd.outputs, &attrs);
  for (ops::GradOpDesc& grad : (*schema)->grad_maker()(context)) {
    SLUICE_RETURN_IF_ERROR(
        PlanGradOp(fwd, {std::move(grad.type), std::move(grad.inputs), std::move(grad.outputs),
                         std::move(grad.attrs), nullptr})
            .status());
  }
  return absl::OkStatus();
}

absl::Status GradPlanner::PlanControlFlowOp(size_t index, const ir::OpDesc& fwd) {
  SLUICE_ASSIGN_OR_RETURN(std::optional<ControlFlowGrad> grad,
                          PlanControlFlowGrad(*this, fwd, OpWhere(index, fwd.type)));
  if (!grad.has_value()) return absl::OkStatus();
  for (size_t j = 0; j < grad->grads_of.size(); ++j) {
    const std::string& var = grad->grads_of[j];
    grad_vars_.emplace(GradVar(var), var);
    AddContribution(var, 0, j);
  }
  plan_.push_back(std::move(grad->op));
  return absl::OkStatus();
}

PlannedOp GradPlanner::Zeros(const std::string& like, const std::string& name,
                             const vm::AttrMap& stream) {
  if (config_.parent == nullptr) {
    return {"fill_zeros_like", {{"X", {like}}}, {{"Out", {name}}}, stream, nullptr};
  }
  const ir::VarDesc* var = ir::ResolveVar(config_.program->desc(), config_.forward_block, like);
  vm::AttrMap attrs = stream;
  attrs.Set("shape", std::vector<int64_t>(var->shape.dims().begin(), var->shape.dims().end()))
      .Set("value", 0.0)
      .Set("dtype", std::string(DataTypeName(var->dtype)));
  return {"fill_constant", {}, {{"Out", {name}}}, std::move(attrs), nullptr};
}

absl::StatusOr<bool> GradPlanner::PlanGradOp(const ir::OpDesc& fwd, PlannedOp grad) {
  absl::flat_hash_map<std::string, std::string> input_of_grad, output_of_grad;
  for (const std::string& in : fwd.InputNames()) input_of_grad[ops::GradContext::GradName(in)] = in;
  for (const std::string& out : fwd.OutputNames()) {
    output_of_grad[ops::GradContext::GradName(out)] = out;
  }

  // Outputs first: an op with nothing needed is dropped before it asks for zeros.
  bool any_needed = false;
  for (const auto& [slot, names] : grad.outputs) {
    for (const std::string& name : names) {
      auto it = input_of_grad.find(name);
      if (it == input_of_grad.end()) {
        return absl::InternalError(
            absl::StrCat("AppendBackward: the grad maker of op '", fwd.type, "' writes '", name,
                         "', which is not the gradient of one of the op's inputs"));
      }
      any_needed |= NeedsGrad(it->second);
    }
  }
  if (!any_needed) return false;

  PlannedOp planned;
  planned.type = grad.type;
  std::vector<std::pair<std::string, std::pair<size_t, size_t>>> contributions;
  for (auto& [slot, names] : grad.outputs) {
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string var = input_of_grad.at(names[i]);
      if (NeedsGrad(var)) {
        contributions.push_back({var, {planned.outputs.size(), i}});
        names[i] = GradVar(var);
      } else {
        names[i] = config_.program->UniqueName(absl::StrCat(GradVar(var), "@UNUSED"));
        grad_vars_.emplace(names[i], var);
        grad_var_order_.push_back(names[i]);
      }
    }
    planned.outputs.emplace_back(slot, std::move(names));
  }

  absl::StatusOr<const ops::OpSchema*> schema = config_.program->registry()->FindSchema(grad.type);
  if (!schema.ok()) {
    return absl::InternalError(absl::StrCat("AppendBackward: the grad maker of op '", fwd.type,
                                            "' names op '", grad.type,
                                            "', which is not registered"));
  }
  const vm::AttrMap stream = StreamOf(fwd);
  for (auto& [slot, names] : grad.inputs) {
    const int slot_index = (*schema)->InputSlot(slot);
    const bool optional = slot_index >= 0 && (*schema)->inputs()[slot_index].optional;
    std::vector<std::string> kept;
    for (const std::string& name : names) {
      auto it = output_of_grad.find(name);
      if (it == output_of_grad.end()) {
        // A forward variable, as the gradient block reads it.
        SLUICE_ASSIGN_OR_RETURN(std::string visible, Visible(name));
        kept.push_back(std::move(visible));
        continue;
      }
      const std::string& out = it->second;
      if (!has_grad_.contains(out)) {
        if (optional) continue;
        // A gradient the grad op needs but nobody produced: zeros.
        plan_.push_back(Zeros(out, GradVar(out), stream));
        grad_vars_.emplace(GradVar(out), out);
        grad_var_order_.push_back(GradVar(out));
        has_grad_.insert(out);
      }
      kept.push_back(GradVar(out));
    }
    if (!kept.empty()) planned.inputs.emplace_back(slot, std::move(kept));
  }
  planned.attrs = std::move(grad.attrs);
  for (const auto& [name, value] : stream.values()) planned.attrs.Set(name, value);
  for (const auto& [var, where] : contributions) {
    AddContribution(var, where.first, where.second);  // after any zero fills planned above
  }
  plan_.push_back(std::move(planned));
  return true;
}

void GradPlanner::Accumulate() {
  // Sums to insert after plan index -> ops.
  absl::flat_hash_map<size_t, std::vector<PlannedOp>> sums;
  for (const std::string& var : contribution_order_) {
    const std::vector<Contribution>& parts = contributions_[var];
    const std::string grad = GradVar(var);
    grad_vars_.emplace(grad, var);
    grad_var_order_.push_back(grad);
    if (parts.size() == 1) continue;
    std::vector<std::string> renamed;
    size_t last = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      std::string name = absl::StrCat(grad, "@RENAME@", k);
      plan_[parts[k].op].outputs[parts[k].slot].second[parts[k].index] = name;
      grad_vars_.emplace(name, var);
      grad_var_order_.push_back(name);
      renamed.push_back(std::move(name));
      last = std::max(last, parts[k].op);
    }
    sums[last].push_back({"sum", {{"X", std::move(renamed)}}, {{"Out", {grad}}}, {}, nullptr});
  }
  if (sums.empty()) return;
  std::vector<PlannedOp> merged;
  for (size_t i = 0; i < plan_.size(); ++i) {
    merged.push_back(std::move(plan_[i]));
    if (auto it = sums.find(i); it != sums.end()) {
      for (PlannedOp& sum : it->second) merged.push_back(std::move(sum));
    }
  }
  plan_ = std::move(merged);
}

absl::Status GradPlanner::Append() {
  Program& program = *config_.program;
  SLUICE_CHECK(program.current_block() == config_.grad_block);
  for (const std::string& name : grad_var_order_) {
    if (program.HasVarAnywhere(name)) {
      return absl::AlreadyExistsError(
          absl::StrCat("AppendBackward: the program already has a variable '", name,
                       "' (was the backward pass of this loss appended before?)"));
    }
  }
  for (const std::string& name : grad_var_order_) {
    const ir::VarDesc* fwd =
        ir::ResolveVar(program.desc(), config_.forward_block, grad_vars_.at(name));
    SLUICE_CHECK(fwd != nullptr);
    ir::VarDesc desc;
    desc.name = name;
    desc.dtype = fwd->dtype;
    desc.shape = fwd->shape;
    SLUICE_RETURN_IF_ERROR(CreateVar(program, std::move(desc)).status());
  }
  for (PlannedOp& op : plan_) {
    if (op.build) {
      SLUICE_RETURN_IF_ERROR(op.build(op.outputs));
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(const ops::OpSchema* schema, program.registry()->FindSchema(op.type));
    auto to_vars = [&](const Slots& slots, const std::vector<ops::ArgDef>& defs,
                       absl::string_view role) -> absl::StatusOr<std::vector<std::vector<Var>>> {
      std::vector<std::vector<Var>> vars(defs.size());
      for (const auto& [slot, names] : slots) {
        size_t s = 0;
        while (s < defs.size() && defs[s].name != slot) ++s;
        if (s == defs.size()) {
          return absl::InternalError(absl::StrCat("AppendBackward: grad op '", op.type, "' has no ",
                                                  role, " slot '", slot, "'"));
        }
        for (const std::string& name : names) vars[s].emplace_back(&program, name);
      }
      return vars;
    };
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> inputs,
                            to_vars(op.inputs, schema->inputs(), "input"));
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> outputs,
                            to_vars(op.outputs, schema->outputs(), "output"));
    SLUICE_RETURN_IF_ERROR(AppendOpInto(program, op.type, inputs, outputs, std::move(op.attrs)));
  }
  return absl::OkStatus();
}

}  // namespace sluice::framework::autodiff_internal
