#include "framework/autograd/internal/grad_plan.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::autograd::internal {
namespace {

// The names a compiled plan gives the forward op's tensors: "#i<k>" for flat input k and
// "#o<k>" for flat output k (no user variable is named so; only the plan sees them).
std::string InputName(int k) { return absl::StrCat("#i", k); }
std::string OutputName(int k) { return absl::StrCat("#o", k); }

// One step of a plan: the grad op `desc` made for forward op `op`, its inputs resolved
// through `refs` and its outputs through `grad_of_input`; marks the forward inputs and
// outputs it reads. Internal errors name the grad maker's mistake.
absl::StatusOr<GradStep> CompileStep(absl::string_view op, ops::GradOpDesc& desc,
                                     const ops::OpSchema& grad_schema,
                                     const absl::flat_hash_map<std::string, GradRef>& refs,
                                     const absl::flat_hash_map<std::string, int>& grad_of_input,
                                     std::vector<bool>& reads_input,
                                     std::vector<bool>& reads_output) {
  GradStep step;
  step.type = desc.type;
  step.attrs = std::move(desc.attrs);
  const std::vector<ops::ArgDef>& args = grad_schema.inputs();
  step.inputs.resize(args.size());
  for (size_t a = 0; a < args.size(); ++a) step.optional.push_back(args[a].optional);
  for (const auto& [slot, names] : desc.inputs) {
    const int at = grad_schema.InputSlot(slot);
    if (at < 0) {
      return absl::InternalError(absl::StrCat("the gradient of op '", op, "': op '", desc.type,
                                              "' has no input '", slot, "'"));
    }
    for (const std::string& name : names) {
      auto it = refs.find(name);
      if (it == refs.end()) {
        return absl::InternalError(
            absl::StrCat("the gradient of op '", op, "' reads '", name,
                         "', which eager autograd cannot "
                         "resolve (not a forward input, output or output gradient)"));
      }
      step.inputs[static_cast<size_t>(at)].push_back(it->second);
      if (it->second.kind == GradRef::Kind::kInput) {
        reads_input[static_cast<size_t>(it->second.index)] = true;
      } else if (it->second.kind == GradRef::Kind::kOutput) {
        reads_output[static_cast<size_t>(it->second.index)] = true;
      }
    }
  }
  // Outputs in the grad op's schema order, each the gradient of a forward input.
  const std::vector<ops::ArgDef>& outs = grad_schema.outputs();
  std::vector<std::vector<int>> by_slot(outs.size());
  for (const auto& [slot, names] : desc.outputs) {
    const int at = grad_schema.OutputSlot(slot);
    if (at < 0) {
      return absl::InternalError(absl::StrCat("the gradient of op '", op, "': op '", desc.type,
                                              "' has no output '", slot, "'"));
    }
    for (const std::string& name : names) {
      auto it = grad_of_input.find(name);
      if (it == grad_of_input.end()) {
        return absl::InternalError(
            absl::StrCat("the gradient of op '", op, "' writes '", name,
                         "', which is not the gradient of one of the op's inputs"));
      }
      by_slot[static_cast<size_t>(at)].push_back(it->second);
    }
  }
  // An eager call makes one output per plain slot, named or not (-1: nobody's gradient).
  for (size_t a = 0; a < outs.size(); ++a) {
    std::vector<int>& slot = by_slot[a];
    if (!outs[a].variadic && slot.empty()) slot.push_back(-1);
    step.output_slots.push_back(static_cast<int>(slot.size()));
    step.writes.insert(step.writes.end(), slot.begin(), slot.end());
  }
  return step;
}

}  // namespace

const GradPlan* GradPlanCache::Get(absl::string_view op, const vm::AttrMap& attrs,
                                   absl::Span<const int> input_slots,
                                   absl::Span<const int> output_slots) {
  PlainMutexLock lock(&mu_);
  std::vector<Entry>& entries = plans_[op];
  for (const Entry& entry : entries) {
    if (entry.attrs == attrs && absl::MakeConstSpan(entry.input_slots) == input_slots &&
        absl::MakeConstSpan(entry.output_slots) == output_slots) {
      return entry.plan.get();
    }
  }
  entries.push_back({attrs, std::vector<int>(input_slots.begin(), input_slots.end()),
                     std::vector<int>(output_slots.begin(), output_slots.end()),
                     std::make_unique<GradPlan>(Compile(op, attrs, input_slots, output_slots))});
  return entries.back().plan.get();
}

GradPlan GradPlanCache::Compile(absl::string_view op, const vm::AttrMap& given,
                                absl::Span<const int> input_slots,
                                absl::Span<const int> output_slots) const {
  GradPlan plan;
  plan.op = std::string(op);
  int inputs = 0, outputs = 0;
  for (int n : input_slots) inputs += n;
  for (int n : output_slots) outputs += n;
  plan.reads_input.assign(static_cast<size_t>(inputs), false);
  plan.reads_output.assign(static_cast<size_t>(outputs), false);
  absl::StatusOr<const ops::OpSchema*> schema = registry_->FindSchema(op);
  if (!schema.ok()) {
    plan.error = schema.status();
    return plan;
  }
  if (!(*schema)->has_grad()) {
    plan.error = absl::UnimplementedError(absl::StrCat("op '", op, "' has no gradient"));
    return plan;
  }
  absl::StatusOr<vm::AttrMap> attrs = (*schema)->NormalizeAttrs(given);
  if (!attrs.ok()) {
    plan.error = attrs.status();
    return plan;
  }
  // The forward op by the plan's names, slot by slot.
  ops::GradContext::Slots in_slots, out_slots;
  absl::flat_hash_map<std::string, GradRef> refs;
  int k = 0;
  for (size_t s = 0; s < input_slots.size() && s < (*schema)->inputs().size(); ++s) {
    std::vector<std::string> names;
    for (int j = 0; j < input_slots[s]; ++j, ++k) {
      names.push_back(InputName(k));
      refs[names.back()] = {GradRef::Kind::kInput, k};
    }
    in_slots.emplace_back((*schema)->inputs()[s].name, std::move(names));
  }
  k = 0;
  for (size_t s = 0; s < output_slots.size() && s < (*schema)->outputs().size(); ++s) {
    std::vector<std::string> names;
    for (int j = 0; j < output_slots[s]; ++j, ++k) {
      names.push_back(OutputName(k));
      refs[names.back()] = {GradRef::Kind::kOutput, k};
      refs[ops::GradContext::GradName(names.back())] = {GradRef::Kind::kOutputGrad, k};
    }
    out_slots.emplace_back((*schema)->outputs()[s].name, std::move(names));
  }
  absl::flat_hash_map<std::string, int> grad_of_input;
  for (int i = 0; i < inputs; ++i) grad_of_input[ops::GradContext::GradName(InputName(i))] = i;

  const ops::GradContext context(std::move(in_slots), std::move(out_slots), &*attrs);
  for (ops::GradOpDesc& desc : (*schema)->grad_maker()(context)) {
    absl::StatusOr<const ops::OpSchema*> grad_schema = registry_->FindSchema(desc.type);
    if (!grad_schema.ok()) {
      plan.error = absl::InternalError(absl::StrCat("the gradient of op '", op, "' uses op '",
                                                    desc.type, "', which is not registered"));
      return plan;
    }
    absl::StatusOr<GradStep> step = CompileStep(op, desc, **grad_schema, refs, grad_of_input,
                                                plan.reads_input, plan.reads_output);
    if (!step.ok()) {
      plan.error = step.status();
      return plan;
    }
    plan.steps.push_back(*std::move(step));
  }
  if (plan.steps.empty() && inputs > 0) {
    // A grad maker that makes nothing for these attributes (all_reduce with 'max'): the op
    // has no gradient here. Reported when a backward pass reaches it, as for an op
    // without a grad maker.
    plan.error = absl::UnimplementedError(
        absl::StrCat("op '", op, "' has no gradient with attributes ", attrs->ToString()));
  }
  return plan;
}

}  // namespace sluice::autograd::internal
