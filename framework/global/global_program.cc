#include "framework/global/global_program.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/global/boxing.h"
#include "framework/global/internal/box_steps.h"
#include "framework/global/sbp_signature.h"
#include "ops/op_schema.h"

namespace sluice::global {

namespace {

// Boxing's steps as ops appended to `ops`, each output a new variable of `block` with its
// local shape (inferred by the op's schema).
class StaticSteps {
 public:
  using Value = std::string;

  StaticSteps(framework::ir::BlockDesc& block, const ops::OpRegistry& registry,
              std::vector<framework::ir::OpDesc>& ops, int64_t& count)
      : block_(block), registry_(registry), ops_(ops), count_(count) {}

  int Rank(const std::string& x) const { return block_.FindVar(x)->shape.rank(); }

  absl::StatusOr<std::string> Collective(const std::string& x, absl::string_view op,
                                         const std::vector<int>& group) {
    return Emit(op, x, internal::BoxingCollectiveAttrs(op, group));
  }
  absl::StatusOr<std::string> Transpose(const std::string& x, std::vector<int64_t> perm) {
    vm::AttrMap attrs;
    attrs.Set("perm", std::move(perm));
    return Emit("transpose", x, std::move(attrs));
  }
  absl::StatusOr<std::string> Slice(const std::string& x, int axis, int64_t parts, int64_t index) {
    vm::AttrMap attrs;
    attrs.Set("axis", int64_t{axis});
    attrs.Set("num", parts);
    return Emit("split", x, std::move(attrs), static_cast<int>(parts), static_cast<int>(index));
  }
  absl::StatusOr<std::string> ZerosLike(const std::string& x) {
    return Emit("fill_zeros_like", x, {});
  }

 private:
  // Appends `op` on input X = `x` with `outputs` outputs in slot Out; returns output `take`.
  absl::StatusOr<std::string> Emit(absl::string_view op, const std::string& x, vm::AttrMap attrs,
                                   int outputs = 1, int take = 0) {
    SLUICE_ASSIGN_OR_RETURN(const ops::OpSchema* schema, registry_.FindSchema(op));
    SLUICE_ASSIGN_OR_RETURN(vm::AttrMap normalized, schema->NormalizeAttrs(attrs));
    const framework::ir::VarDesc* in = block_.FindVar(x);
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<std::vector<ops::TensorMeta>> metas,
        schema->InferOutputs({{ops::TensorMeta{in->dtype, in->shape}}}, normalized, {outputs}));
    framework::ir::OpDesc desc;
    desc.type = std::string(op);
    desc.inputs = {{"X", {x}}};
    desc.attrs = std::move(attrs);
    std::vector<std::string> names;
    for (int k = 0; k < outputs; ++k) {
      framework::ir::VarDesc var;
      var.name = absl::StrCat(x, "@box", ++count_);
      var.dtype = metas[0][static_cast<size_t>(k)].dtype;
      var.shape = metas[0][static_cast<size_t>(k)].shape;
      var.stop_gradient = true;
      SLUICE_RETURN_IF_ERROR(block_.AddVar(var).status());
      names.push_back(var.name);
    }
    desc.outputs = {{"Out", names}};
    ops_.push_back(std::move(desc));
    return names[static_cast<size_t>(take)];
  }

  framework::ir::BlockDesc& block_;
  const ops::OpRegistry& registry_;
  std::vector<framework::ir::OpDesc>& ops_;
  int64_t& count_;
};

std::string OpWhere(int index, const framework::ir::OpDesc& op) {
  return absl::StrCat("global program: op #", index, " '", op.type, "'");
}

// The variables `options` names (layouts, whole deliveries) exist, and each layout fits
// its variable's shape on `placement`.
absl::Status CheckOptions(const framework::ir::BlockDesc& source, const Placement& placement,
                          const GlobalProgramOptions& options) {
  for (const auto& [name, sbp] : options.layouts) {
    const framework::ir::VarDesc* var = source.FindVar(name);
    if (var == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("global program: layout given for '", name, "', not a variable"));
    }
    SLUICE_RETURN_IF_ERROR(LocalShape(var->shape, placement, sbp).status());
  }
  for (const std::string& name : options.whole) {
    if (!source.HasVar(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("global program: '", name, "' to deliver whole is not a variable"));
    }
  }
  return absl::OkStatus();
}

// Renames `op`'s inputs to copies in the layouts `signature` needs, appending the steps that
// make each copy once (`boxed`: the copies made so far, by variable and layout text).
// Errors name the op (`where`) and the conversion.
absl::Status ConvertInputs(
    const SbpSignature& signature, const std::string& where, const Placement& placement, int id,
    absl::FunctionRef<NdSbp(const std::string&)> layout_of, StaticSteps& steps,
    absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, std::string>>& boxed,
    framework::ir::OpDesc& op) {
  size_t k = 0;
  for (auto& [slot, names] : op.inputs) {
    for (std::string& name : names) {
      const NdSbp& need = signature.inputs[k++];
      const NdSbp have = layout_of(name);
      if (have == need) continue;
      std::string& copy = boxed[name][NdSbpToString(need)];
      if (copy.empty()) {
        const std::string before = name;
        absl::StatusOr<std::string> converted =
            internal::BoxSteps(steps, before, placement, id, have, need);
        if (!converted.ok()) {
          return absl::Status(
              converted.status().code(),
              absl::StrCat(where, ": converting '", before, "' from ", NdSbpToString(have), " to ",
                           NdSbpToString(need), ": ", converted.status().message()));
        }
        copy = *converted;
      }
      name = copy;
    }
  }
  return absl::OkStatus();
}

// Appends, for each variable of `whole`, the steps that gather it to every rank (broadcast
// on every axis) and an `assign` into "<name>@whole", a new variable of `block`.
absl::Status DeliverWhole(const std::vector<std::string>& whole,
                          const framework::ir::BlockDesc& source, const Placement& placement,
                          int id, absl::FunctionRef<NdSbp(const std::string&)> layout_of,
                          StaticSteps& steps, framework::ir::BlockDesc& block,
                          std::vector<framework::ir::OpDesc>& ops) {
  for (const std::string& name : whole) {
    SLUICE_ASSIGN_OR_RETURN(std::string converted,
                            internal::BoxSteps(steps, name, placement, id, layout_of(name),
                                               AllBroadcast(placement.ndim())));
    framework::ir::VarDesc var = *source.FindVar(name);
    var.name = name + "@whole";
    var.persistable = false;
    var.is_parameter = false;
    SLUICE_RETURN_IF_ERROR(block.AddVar(var).status());
    framework::ir::OpDesc assign;
    assign.type = "assign";
    assign.inputs = {{"X", {converted}}};
    assign.outputs = {{"Out", {var.name}}};
    ops.push_back(std::move(assign));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GlobalProgram> MakeGlobalProgram(const framework::ir::ProgramDesc& logical,
                                                const ops::OpRegistry& registry,
                                                const Placement& placement,
                                                const GlobalProgramOptions& options, int rank) {
  if (logical.num_blocks() > 1) {
    return absl::UnimplementedError(
        "global program: control flow (sub-blocks) is not supported on global tensors yet");
  }
  GlobalProgram result;
  result.program = logical;
  framework::ir::BlockDesc& block = result.program.mutable_global_block();
  const framework::ir::BlockDesc& source = logical.global_block();
  SLUICE_RETURN_IF_ERROR(CheckOptions(source, placement, options));
  const std::optional<int> id = placement.ParallelId(rank);
  if (!id.has_value()) {
    result.excluded = true;
    block.mutable_ops().clear();
    return result;
  }
  // Layouts of what the program starts from.
  absl::flat_hash_map<std::string, NdSbp> layout;
  auto layout_of = [&](const std::string& name) -> NdSbp {
    auto it = layout.find(name);
    if (it != layout.end()) return it->second;
    auto given = options.layouts.find(name);
    NdSbp sbp = given != options.layouts.end() ? given->second : AllBroadcast(placement.ndim());
    layout[name] = sbp;
    return sbp;
  };
  auto set_local_shape = [&](const std::string& name, const NdSbp& sbp) -> absl::Status {
    framework::ir::VarDesc* var = block.FindMutableVar(name);
    SLUICE_ASSIGN_OR_RETURN(var->shape, LocalShape(source.FindVar(name)->shape, placement, sbp));
    return absl::OkStatus();
  };
  for (const framework::ir::VarDesc& var : source.vars()) {
    SLUICE_RETURN_IF_ERROR(set_local_shape(var.name, layout_of(var.name)));
  }
  layout.clear();  // recomputed as ops write; starting layouts come from `options` again

  std::vector<framework::ir::OpDesc> ops;
  StaticSteps steps(block, registry, ops, result.boxing_ops);
  // Converted copies still valid: (variable, layout text) -> copy; dropped on a write.
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, std::string>> boxed;
  const std::vector<framework::ir::OpDesc>& source_ops = source.ops();
  for (int i = 0; i < static_cast<int>(source_ops.size()); ++i) {
    framework::ir::OpDesc op = source_ops[static_cast<size_t>(i)];
    SLUICE_ASSIGN_OR_RETURN(const ops::OpSchema* schema, registry.FindSchema(op.type));
    vm::AttrMap attrs = op.attrs;
    SLUICE_RETURN_IF_ERROR(framework::ir::TakeStreamAttr(attrs).status());
    SLUICE_ASSIGN_OR_RETURN(vm::AttrMap normalized, schema->NormalizeAttrs(attrs));
    std::vector<NdSbp> in_layouts;
    std::vector<Shape> in_shapes;
    for (const auto& [slot, names] : op.inputs) {
      for (const std::string& name : names) {
        in_layouts.push_back(layout_of(name));
        in_shapes.push_back(source.FindVar(name)->shape);
      }
    }
    const SbpSignature signature =
        InferSbpSignature(op.type, in_layouts, in_shapes, normalized, placement.ndim());
    SLUICE_RETURN_IF_ERROR(
        ConvertInputs(signature, OpWhere(i, op), placement, *id, layout_of, steps, boxed, op));
    for (const auto& [slot, names] : op.outputs) {
      for (const std::string& name : names) {
        auto it = layout.find(name);
        const bool written_before = it != layout.end() || options.layouts.contains(name);
        const NdSbp previous = layout_of(name);
        if (written_before && previous != signature.output && source.FindVar(name)->persistable) {
          return absl::UnimplementedError(
              absl::StrCat(OpWhere(i, op), " would leave persistable '", name, "' (",
                           NdSbpToString(previous), ") as ", NdSbpToString(signature.output),
                           "; an update that changes a variable's layout is not supported"));
        }
        layout[name] = signature.output;
        boxed.erase(name);
        SLUICE_RETURN_IF_ERROR(set_local_shape(name, signature.output));
      }
    }
    ops.push_back(std::move(op));
  }
  SLUICE_RETURN_IF_ERROR(
      DeliverWhole(options.whole, source, placement, *id, layout_of, steps, block, ops));
  block.mutable_ops() = std::move(ops);
  for (const auto& [name, sbp] : layout) result.layouts[name] = sbp;
  return result;
}

}  // namespace sluice::global
