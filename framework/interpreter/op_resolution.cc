#include "framework/interpreter/op_resolution.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/ir/control_flow.h"
#include "ops/op_schema.h"

namespace sluice::framework {

namespace {

absl::Status Invalid(const std::string& where, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
}

// Resolution of one op; `written[v]`: some earlier op writes block variable v.
class OpResolver {
 public:
  OpResolver(const VarTable& vars, const std::vector<bool>& written, const ir::OpDesc& desc,
             const std::string& where)
      : vars_(vars), written_(written), desc_(desc), where_(where) {}

  absl::Status Resolve(const ops::OpSchema& schema, ResolvedOp& op) {
    SLUICE_RETURN_IF_ERROR(ResolveInputs(schema, op));
    SLUICE_RETURN_IF_ERROR(CheckSlots(schema));
    std::vector<int> output_counts;
    for (const ops::ArgDef& arg : schema.outputs()) {
      output_counts.push_back(static_cast<int>(desc_.Output(arg.name).size()));
    }
    absl::StatusOr<std::vector<std::vector<ops::TensorMeta>>> inferred =
        schema.InferOutputs(metas_, op.attrs, output_counts);
    if (!inferred.ok()) return Invalid(where_, inferred.status().message());
    return ResolveOutputs(schema, *inferred, op);
  }

 private:
  absl::Status ResolveInputs(const ops::OpSchema& schema, ResolvedOp& op) {
    for (const ops::ArgDef& arg : schema.inputs()) {
      metas_.emplace_back();
      for (const std::string& name : desc_.Input(arg.name)) {
        auto it = vars_.index_of.find(name);
        if (it == vars_.index_of.end()) {
          return Invalid(
              where_, absl::StrCat("input ", arg.name, " names undefined variable '", name, "'"));
        }
        const VarSlot& var = vars_.slots[it->second];
        if (var.kind == VarKind::kTemp && !written_[it->second]) {
          return Invalid(where_, absl::StrCat("reads variable '", name,
                                              "' before any op writes it (not fed, not "
                                              "persistable: a missing feed, or a cycle in the "
                                              "program)"));
        }
        metas_.back().push_back({var.dtype, var.shape});
        op.inputs.push_back(it->second);
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckSlots(const ops::OpSchema& schema) const {
    for (const auto& [slot, names] : desc_.inputs) {
      if (schema.InputSlot(slot) < 0) {
        return Invalid(where_, absl::StrCat("unknown input slot '", slot, "'"));
      }
    }
    for (const auto& [slot, names] : desc_.outputs) {
      if (schema.OutputSlot(slot) < 0) {
        return Invalid(where_, absl::StrCat("unknown output slot '", slot, "'"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ResolveOutputs(const ops::OpSchema& schema,
                              const std::vector<std::vector<ops::TensorMeta>>& inferred,
                              ResolvedOp& op) const {
    for (size_t s = 0; s < schema.outputs().size(); ++s) {
      const std::string& slot = schema.outputs()[s].name;
      const std::vector<std::string>& names = desc_.Output(slot);
      if (names.size() != inferred[s].size()) {
        return Invalid(where_, absl::StrCat("output ", slot, " has ", names.size(),
                                            " variables, the op makes ", inferred[s].size()));
      }
      for (size_t k = 0; k < names.size(); ++k) {
        auto it = vars_.index_of.find(names[k]);
        if (it == vars_.index_of.end()) {
          return Invalid(
              where_, absl::StrCat("output ", slot, " names undefined variable '", names[k], "'"));
        }
        const VarSlot& var = vars_.slots[it->second];
        const ops::TensorMeta& meta = inferred[s][k];
        if (var.kind == VarKind::kFeed) {
          return Invalid(where_, absl::StrCat("writes feed variable '", names[k], "'"));
        }
        if (meta.dtype != var.dtype || meta.shape != var.shape) {
          return Invalid(
              where_, absl::StrCat("output '", names[k], "' is declared ", DataTypeName(var.dtype),
                                   " ", var.shape.ToString(), " but the op makes ",
                                   DataTypeName(meta.dtype), " ", meta.shape.ToString()));
        }
        op.outputs.push_back(it->second);
      }
    }
    return absl::OkStatus();
  }

  const VarTable& vars_;
  const std::vector<bool>& written_;
  const ir::OpDesc& desc_;
  const std::string& where_;
  std::vector<std::vector<ops::TensorMeta>> metas_;  // input metas by slot
};

// A cond or while: its outer reads and its Out, no schema, no attributes of its own.
absl::StatusOr<ResolvedOp> ResolveControlFlow(const ir::OpDesc& desc, int index,
                                              const ir::ProgramDesc& program, const VarTable& vars,
                                              const std::vector<bool>& written) {
  const std::string where = OpName(index, desc.type);
  ResolvedOp op;
  op.type = desc.type;
  op.source = index;
  // A "stream" attribute pins the control step as it pins any op (placement checks it).
  vm::AttrMap given = desc.attrs;
  absl::StatusOr<std::string> stream_attr = ir::TakeStreamAttr(given);
  if (!stream_attr.ok()) return Invalid(where, stream_attr.status().message());
  op.stream_attr = *std::move(stream_attr);
  for (const std::string& name : ir::OuterReads(program, desc)) {
    auto it = vars.index_of.find(name);
    if (it == vars.index_of.end()) {
      return Invalid(where, absl::StrCat("reads undefined variable '", name, "'"));
    }
    if (vars.slots[it->second].kind == VarKind::kTemp && !written[it->second]) {
      return Invalid(where, absl::StrCat("reads variable '", name,
                                         "' before any op writes it (not fed, not persistable)"));
    }
    op.inputs.push_back(it->second);
  }
  for (const std::string& name : desc.Output(ir::kOutSlot)) {
    auto it = vars.index_of.find(name);
    if (it == vars.index_of.end()) {
      return Invalid(where, absl::StrCat("output names undefined variable '", name, "'"));
    }
    if (vars.slots[it->second].kind == VarKind::kFeed) {
      return Invalid(where, absl::StrCat("writes feed variable '", name, "'"));
    }
    op.outputs.push_back(it->second);
  }
  return op;
}

absl::StatusOr<ResolvedOp> ResolveOp(const ir::OpDesc& desc, int index,
                                     const ops::OpRegistry& registry, const VarTable& vars,
                                     const std::vector<bool>& written) {
  const std::string where = OpName(index, desc.type);
  SLUICE_ASSIGN_OR_RETURN(const ops::OpSchema* schema, registry.FindSchema(desc.type));
  ResolvedOp op;
  op.type = desc.type;
  op.source = index;
  op.schema = schema;
  // Collectives keep their program order among themselves by the random ops' rule.
  op.random = schema->has_flag(ops::kOpRandom) || schema->has_flag(ops::kOpOrdered);
  vm::AttrMap given = desc.attrs;
  absl::StatusOr<std::string> stream_attr = ir::TakeStreamAttr(given);
  if (!stream_attr.ok()) return Invalid(where, stream_attr.status().message());
  op.stream_attr = *std::move(stream_attr);
  absl::StatusOr<vm::AttrMap> attrs = schema->NormalizeAttrs(given);
  if (!attrs.ok()) return Invalid(where, attrs.status().message());
  op.attrs = *std::move(attrs);
  SLUICE_RETURN_IF_ERROR(OpResolver(vars, written, desc, where).Resolve(*schema, op));
  return op;
}

}  // namespace

std::string OpName(int index, const std::string& type) {
  return absl::StrCat("op #", index, " '", type, "'");
}

ResolvedBlock ResolveOps(const ir::BlockDesc& block, const ops::OpRegistry& registry,
                         const VarTable& vars, const std::vector<std::string>& fetch_names,
                         const ir::ProgramDesc* program) {
  ResolvedBlock resolved;
  std::vector<bool> written(vars.slots.size(), false);
  for (int i = 0; i < static_cast<int>(block.ops().size()); ++i) {
    const ir::OpDesc& desc = block.ops()[i];
    // A sub-block's results: read by the op that runs the block, not an op to run.
    if (desc.type == ir::kYieldOp) continue;
    absl::StatusOr<ResolvedOp> op =
        !ir::IsControlFlowOp(desc) ? ResolveOp(desc, i, registry, vars, written)
        : program != nullptr       ? ResolveControlFlow(desc, i, *program, vars, written)
                                   : absl::InvalidArgumentError(absl::StrCat(
                                         OpName(i, desc.type), ": control flow needs its program"));
    if (!op.ok()) {
      resolved.error = op.status();
      return resolved;
    }
    for (int var : op->outputs) written[var] = true;
    resolved.ops.push_back(*std::move(op));
  }
  for (const std::string& name : fetch_names) {
    const int var = vars.index_of.at(name);
    if (vars.slots[var].kind == VarKind::kTemp && !written[var]) {
      resolved.error = absl::InvalidArgumentError(absl::StrCat(
          "fetch '", name, "': no op writes it and it is neither fed nor persistable"));
      return resolved;
    }
    resolved.fetches.push_back(var);
  }
  return resolved;
}

absl::Status ChooseKernels(const ops::OpRegistry& registry, const VarTable& vars,
                           std::vector<OpFunc>& funcs) {
  for (OpFunc& func : funcs) {
    if (func.source < 0) continue;         // an inserted copy: chosen at insertion
    if (func.schema == nullptr) continue;  // control flow: built after blob binding
    DataType key_dtype = DataType::kF32;
    if (!func.inputs.empty()) {
      key_dtype = vars.slots[func.inputs.front()].dtype;
    } else if (!func.outputs.empty()) {
      key_dtype = vars.slots[func.outputs.front()].dtype;
    }
    absl::StatusOr<const vm::OpKernel*> kernel =
        registry.FindKernel(func.type, func.device.type(), key_dtype);
    if (!kernel.ok()) {
      return absl::NotFoundError(
          absl::StrCat(OpName(func.source, func.type), ": ", kernel.status().message()));
    }
    func.kernel = *kernel;
  }
  return absl::OkStatus();
}

}  // namespace sluice::framework
