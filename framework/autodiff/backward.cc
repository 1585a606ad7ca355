#include "framework/autodiff/backward.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/op_schema.h"

namespace sluice::framework {
namespace {

using Slots = std::vector<std::pair<std::string, std::vector<std::string>>>;

std::string GradName(absl::string_view var) { return ops::GradContext::GradName(var); }

// The forward op's stream attribute alone (empty when it has none): its grad ops run there.
vm::AttrMap StreamOf(const ir::OpDesc& op) {
  vm::AttrMap attrs;
  if (auto it = op.attrs.values().find(kStreamAttr); it != op.attrs.values().end()) {
    attrs.Set(std::string(kStreamAttr), it->second);
  }
  return attrs;
}

// One op of the backward pass, by variable names, before anything is appended.
struct PlannedOp {
  std::string type;
  Slots inputs;
  Slots outputs;
  vm::AttrMap attrs;
};

// Where a planned gradient output goes: plan index, slot, position.
struct Contribution {
  size_t op;
  size_t slot;
  size_t index;
};

// Plans the backward pass (steps 1-5 of the header), then appends it (step 6).
class BackwardBuilder {
 public:
  BackwardBuilder(Program& program, std::string loss,
                  const absl::flat_hash_set<std::string>& no_grad_set)
      : program_(program),
        block_(program.desc().global_block()),
        loss_(std::move(loss)),
        no_grad_set_(no_grad_set) {}

  absl::StatusOr<std::vector<std::pair<Var, Var>>> Run();

 private:
  // Float, not stop_gradient, not in no_grad_set.
  bool Differentiable(const std::string& name) const;
  bool NeedsGrad(const std::string& name) const { return needs_.contains(name); }
  void FindPathAndNeeds();
  absl::Status PlanOp(size_t index);
  // Step 4 for one grad op of forward op `fwd`; false when the op is dropped.
  absl::StatusOr<bool> PlanGradOp(const ir::OpDesc& fwd, ops::GradOpDesc grad);
  void Accumulate();
  absl::Status Append();

  Program& program_;
  const ir::BlockDesc& block_;
  const std::string loss_;
  const absl::flat_hash_set<std::string>& no_grad_set_;

  std::vector<bool> differentiated_;           // per forward op
  absl::flat_hash_set<std::string> needs_;     // forward vars that need a gradient
  absl::flat_hash_set<std::string> has_grad_;  // forward vars whose gradient is planned
  std::vector<PlannedOp> plan_;
  absl::flat_hash_map<std::string, std::vector<Contribution>> contributions_;  // by fwd var
  std::vector<std::string> contribution_order_;  // forward vars, first contribution first
  // Every variable the plan writes -> the forward variable whose dtype and shape it takes.
  absl::flat_hash_map<std::string, std::string> grad_vars_;
  std::vector<std::string> grad_var_order_;
};

bool BackwardBuilder::Differentiable(const std::string& name) const {
  const ir::VarDesc* var = block_.FindVar(name);
  return var != nullptr && IsFloating(var->dtype) && !var->stop_gradient &&
         !no_grad_set_.contains(name);
}

void BackwardBuilder::FindPathAndNeeds() {
  const std::vector<ir::OpDesc>& ops = block_.ops();
  std::vector<bool> on_path(ops.size(), false);
  absl::flat_hash_set<std::string> wanted = {loss_};
  for (size_t i = ops.size(); i-- > 0;) {
    bool writes_wanted = false;
    for (const std::string& out : ops[i].OutputNames()) writes_wanted |= wanted.contains(out);
    if (!writes_wanted) continue;
    on_path[i] = true;
    for (const std::string& in : ops[i].InputNames()) wanted.insert(in);
  }
  differentiated_.assign(ops.size(), false);
  absl::flat_hash_set<std::string> written;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (on_path[i]) {
      for (const std::string& in : ops[i].InputNames()) {
        const bool leaf = !written.contains(in);
        if ((leaf && Differentiable(in)) || needs_.contains(in)) {
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

absl::Status BackwardBuilder::PlanOp(size_t index) {
  const ir::OpDesc& fwd = block_.ops()[index];
  bool any_output_grad = false;
  for (const std::string& out : fwd.OutputNames()) any_output_grad |= has_grad_.contains(out);
  if (!any_output_grad) return absl::OkStatus();  // nothing flows back through it

  absl::StatusOr<const ops::OpSchema*> schema = program_.registry()->FindSchema(fwd.type);
  if (!schema.ok()) {
    return absl::NotFoundError(
        absl::StrCat("AppendBackward: op #", index, " '", fwd.type, "' is not registered"));
  }
  if (!(*schema)->has_grad()) {
    return absl::UnimplementedError(
        absl::StrCat("AppendBackward: op #", index, " '", fwd.type,
                     "' lies between a variable that needs a gradient and the loss '", loss_,
                     "' but has no grad maker"));
  }
  vm::AttrMap attrs;
  for (const auto& [name, value] : fwd.attrs.values()) {
    if (name != kStreamAttr) attrs.Set(name, value);
  }
  const ops::GradContext context(fwd.inputs, fwd.outputs, &attrs);
  std::vector<ops::GradOpDesc> grads = (*schema)->grad_maker()(context);
  for (ops::GradOpDesc& grad : grads) {
    SLUICE_RETURN_IF_ERROR(PlanGradOp(fwd, std::move(grad)).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> BackwardBuilder::PlanGradOp(const ir::OpDesc& fwd, ops::GradOpDesc grad) {
  absl::flat_hash_map<std::string, std::string> input_of_grad, output_of_grad;
  for (const std::string& in : fwd.InputNames()) input_of_grad[GradName(in)] = in;
  for (const std::string& out : fwd.OutputNames()) output_of_grad[GradName(out)] = out;

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
  std::vector<std::pair<std::string, Contribution>> contributions;
  for (auto& [slot, names] : grad.outputs) {
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string var = input_of_grad.at(names[i]);
      if (NeedsGrad(var)) {
        contributions.push_back({var, {0, planned.outputs.size(), i}});
      } else {
        names[i] = program_.UniqueName(absl::StrCat(GradName(var), "@UNUSED"));
        grad_vars_.emplace(names[i], var);
        grad_var_order_.push_back(names[i]);
      }
    }
    planned.outputs.emplace_back(slot, std::move(names));
  }

  absl::StatusOr<const ops::OpSchema*> schema = program_.registry()->FindSchema(grad.type);
  if (!schema.ok()) {
    return absl::InternalError(absl::StrCat("AppendBackward: the grad maker of op '", fwd.type,
                                            "' names op '", grad.type,
                                            "', which is not registered"));
  }
  for (auto& [slot, names] : grad.inputs) {
    const int slot_index = (*schema)->InputSlot(slot);
    const bool optional = slot_index >= 0 && (*schema)->inputs()[slot_index].optional;
    std::vector<std::string> kept;
    for (const std::string& name : names) {
      auto it = output_of_grad.find(name);
      if (it == output_of_grad.end() || has_grad_.contains(it->second)) {
        kept.push_back(name);
        continue;
      }
      if (optional) continue;
      // A gradient the grad op needs but nobody produced: zeros.
      const std::string& out = it->second;
      plan_.push_back({"fill_zeros_like", {{"X", {out}}}, {{"Out", {name}}}, StreamOf(fwd)});
      grad_vars_.emplace(name, out);
      grad_var_order_.push_back(name);
      has_grad_.insert(out);
      kept.push_back(name);
    }
    if (!kept.empty()) planned.inputs.emplace_back(slot, std::move(kept));
  }
  planned.attrs = std::move(grad.attrs);
  const vm::AttrMap stream = StreamOf(fwd);
  for (const auto& [name, value] : stream.values()) planned.attrs.Set(name, value);
  for (auto& [var, part] : contributions) {
    part.op = plan_.size();  // after any zero fills planned above
    auto [it, inserted] = contributions_.try_emplace(var);
    if (inserted) contribution_order_.push_back(var);
    it->second.push_back(part);
    has_grad_.insert(var);
  }
  plan_.push_back(std::move(planned));
  return true;
}

void BackwardBuilder::Accumulate() {
  // Sums to insert after plan index -> ops.
  absl::flat_hash_map<size_t, std::vector<PlannedOp>> sums;
  for (const std::string& var : contribution_order_) {
    const std::vector<Contribution>& parts = contributions_[var];
    const std::string grad = GradName(var);
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
    sums[last].push_back({"sum", {{"X", std::move(renamed)}}, {{"Out", {grad}}}, {}});
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

absl::Status BackwardBuilder::Append() {
  for (const std::string& name : grad_var_order_) {
    if (block_.HasVar(name)) {
      return absl::AlreadyExistsError(
          absl::StrCat("AppendBackward: the program already has a variable '", name,
                       "' (was the backward pass of this loss appended before?)"));
    }
  }
  for (const std::string& name : grad_var_order_) {
    const ir::VarDesc* fwd = block_.FindVar(grad_vars_.at(name));
    SLUICE_CHECK(fwd != nullptr);
    ir::VarDesc desc;
    desc.name = name;
    desc.dtype = fwd->dtype;
    desc.shape = fwd->shape;
    SLUICE_RETURN_IF_ERROR(CreateVar(program_, std::move(desc)).status());
  }
  for (PlannedOp& op : plan_) {
    SLUICE_ASSIGN_OR_RETURN(const ops::OpSchema* schema, program_.registry()->FindSchema(op.type));
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
        for (const std::string& name : names) vars[s].emplace_back(&program_, name);
      }
      return vars;
    };
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> inputs,
                            to_vars(op.inputs, schema->inputs(), "input"));
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> outputs,
                            to_vars(op.outputs, schema->outputs(), "output"));
    SLUICE_RETURN_IF_ERROR(AppendOpInto(program_, op.type, inputs, outputs, std::move(op.attrs)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<Var, Var>>> BackwardBuilder::Run() {
  const ir::VarDesc* loss = block_.FindVar(loss_);
  if (loss == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("AppendBackward: loss '", loss_, "' is not a variable of its program"));
  }
  if (loss->shape.NumElements() != 1 || !IsFloating(loss->dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AppendBackward: loss '", loss_, "' is ", DataTypeName(loss->dtype),
                     loss->shape.ToString(), "; it must be a one-element f32 or f64 variable"));
  }
  FindPathAndNeeds();
  if (!NeedsGrad(loss_)) return std::vector<std::pair<Var, Var>>{};

  has_grad_.insert(loss_);
  const std::string seed = GradName(loss_);
  grad_vars_.emplace(seed, loss_);
  grad_var_order_.push_back(seed);
  plan_.push_back(
      {"fill_constant",
       {},
       {{"Out", {seed}}},
       vm::AttrMap()
           .Set("shape", std::vector<int64_t>(loss->shape.dims().begin(), loss->shape.dims().end()))
           .Set("value", 1.0)
           .Set("dtype", std::string(DataTypeName(loss->dtype)))});

  // Walk backwards; an op's output gradients are complete when it is reached, since only
  // later ops read its outputs.
  for (size_t i = differentiated_.size(); i-- > 0;) {
    if (!differentiated_[i]) continue;
    SLUICE_RETURN_IF_ERROR(PlanOp(i));
  }
  Accumulate();
  SLUICE_RETURN_IF_ERROR(Append());

  std::vector<std::pair<Var, Var>> params;
  for (const ir::VarDesc& var : block_.vars()) {
    if (var.is_parameter && NeedsGrad(var.name) && contributions_.contains(var.name)) {
      params.emplace_back(Var(&program_, var.name), Var(&program_, GradName(var.name)));
    }
  }
  return params;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<Var, Var>>> AppendBackward(
    const Var& loss, const absl::flat_hash_set<std::string>& no_grad_set) {
  if (!loss.valid()) return absl::InvalidArgumentError("AppendBackward: an empty loss Var");
  Program& program = *loss.program();
  if (program.current_block() != 0) {
    return absl::FailedPreconditionError(
        "AppendBackward: called while a cond branch or loop body is being built");
  }
  // Restore the program on any error, so that a failed call changes nothing.
  ir::ProgramDesc before = program.desc();
  absl::StatusOr<std::vector<std::pair<Var, Var>>> result =
      BackwardBuilder(program, loss.name(), no_grad_set).Run();
  if (!result.ok()) program.mutable_desc() = std::move(before);
  return result;
}

}  // namespace sluice::framework
