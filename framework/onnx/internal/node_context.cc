#include "framework/onnx/internal/node_context.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/tensor_proto.h"

namespace sluice::framework::onnx::internal {
namespace {

using ::onnx::AttributeProto;

bool NameCharOk(char c) {
  const auto u = static_cast<unsigned char>(c);
  return !(absl::ascii_isspace(u) || absl::ascii_iscntrl(u) || c == ',' || c == '=' || c == ';' ||
           c == '/' || c == '\\');
}

absl::Status WrongType(const NodeContext& ctx, const AttributeProto& attr, absl::string_view want) {
  return ctx.Error(absl::StrCat("attribute '", attr.name(), "' is ",
                                AttributeProto::AttributeType_Name(attr.type()), ", not ", want));
}

}  // namespace

std::string GraphState::VarNameFor(absl::string_view onnx_name) {
  std::string base;
  for (char c : onnx_name) base.push_back(NameCharOk(c) ? c : '_');
  if (base.empty() || base == "." || base == "..") base = absl::StrCat("v", base);
  std::string name = base;
  for (int n = 1; program_->HasVarAnywhere(name); ++n) name = absl::StrCat(base, "_", n);
  return name;
}

const HostTensor* GraphState::Constant(absl::string_view onnx_name) const {
  auto it = constants_.find(onnx_name);
  return it == constants_.end() ? nullptr : &it->second;
}

absl::StatusOr<Var> GraphState::VarOf(const std::string& onnx_name) {
  if (auto it = vars_.find(onnx_name); it != vars_.end()) return it->second;
  auto constant = constants_.find(onnx_name);
  if (constant == constants_.end()) {
    return absl::NotFoundError(absl::StrCat("value '", onnx_name,
                                            "' is not defined before it is read (not a graph "
                                            "input, an initializer or an earlier node's output)"));
  }
  ir::VarDesc desc;
  desc.name = VarNameFor(onnx_name);
  desc.dtype = constant->second.dtype;
  desc.shape = constant->second.shape;
  desc.persistable = true;
  desc.stop_gradient = true;
  SLUICE_RETURN_IF_ERROR(program_->mutable_desc().mutable_global_block().AddVar(desc).status());
  Var var(program_, desc.name);
  persistables_.emplace_back(desc.name, constant->second);
  BindVar(onnx_name, var);
  return var;
}

std::string NodeContext::Describe() const {
  return absl::StrCat("node '", node_.name(), "' (", node_.op_type(), ", opset ", opset_, ")");
}

absl::Status NodeContext::Error(absl::string_view reason) const {
  return absl::InvalidArgumentError(absl::StrCat(Describe(), ": ", reason));
}

absl::StatusOr<Value> NodeContext::Input(int i) {
  if (!HasInput(i)) return Error(absl::StrCat("input ", i, " is required"));
  absl::StatusOr<Var> var = state_->VarOf(node_.input(i));
  if (!var.ok()) return Error(var.status().message());
  return Value(*std::move(var));
}

absl::StatusOr<std::vector<Value>> NodeContext::Inputs() {
  std::vector<Value> values;
  for (int i = 0; i < num_inputs(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(Value v, Input(i));
    values.push_back(std::move(v));
  }
  return values;
}

absl::StatusOr<const HostTensor*> NodeContext::ConstantInput(int i, absl::string_view why) const {
  if (!HasInput(i)) return Error(absl::StrCat("input ", i, " (", why, ") is required"));
  const HostTensor* value = state_->Constant(node_.input(i));
  if (value == nullptr) {
    const bool fed = state_->IsGraphInput(node_.input(i));
    return Error(absl::StrCat(
        "input ", i, " '", node_.input(i), "' (", why,
        ") must be a constant (an initializer or a Constant node's "
        "output): Sluice takes it as an attribute",
        fed ? absl::StrCat("; graph input '", node_.input(i),
                           "' can be fixed at import (constant_inputs); sluice: --constant-input ",
                           node_.input(i), "=FILE.npy")
            : ""));
  }
  return value;
}

absl::StatusOr<std::vector<int64_t>> NodeContext::ConstantInts(int i, absl::string_view why) const {
  SLUICE_ASSIGN_OR_RETURN(const HostTensor* value, ConstantInput(i, why));
  std::vector<int64_t> ints;
  if (value->dtype == DataType::kI64) {
    ints = value->ToVector<int64_t>();
  } else if (value->dtype == DataType::kI32) {
    for (int32_t v : value->ToVector<int32_t>()) ints.push_back(v);
  } else {
    return Error(absl::StrCat("input ", i, " (", why, ") must hold integers, not ",
                              DataTypeName(value->dtype)));
  }
  return ints;
}

absl::StatusOr<double> NodeContext::ConstantScalar(int i, absl::string_view why) const {
  SLUICE_ASSIGN_OR_RETURN(const HostTensor* value, ConstantInput(i, why));
  if (value->shape.NumElements() != 1) {
    return Error(absl::StrCat("input ", i, " (", why, ") must hold one value, not shape ",
                              value->shape.ToString()));
  }
  switch (value->dtype) {
    case DataType::kF32:
      return value->ToVector<float>()[0];
    case DataType::kF64:
      return value->ToVector<double>()[0];
    case DataType::kI32:
      return value->ToVector<int32_t>()[0];
    case DataType::kI64:
      return static_cast<double>(value->ToVector<int64_t>()[0]);
    case DataType::kBool:
      return value->bytes[0] != 0 ? 1.0 : 0.0;
  }
  return Error("unreachable data type");
}

const AttributeProto* NodeContext::FindAttr(absl::string_view name) const {
  for (const AttributeProto& attr : node_.attribute()) {
    if (attr.name() == name) return &attr;
  }
  return nullptr;
}

absl::Status NodeContext::OnlyAttrs(std::initializer_list<absl::string_view> known) const {
  std::vector<std::string> unknown;
  for (const AttributeProto& attr : node_.attribute()) {
    bool ok = false;
    for (absl::string_view k : known) ok = ok || attr.name() == k;
    if (!ok) unknown.push_back(absl::StrCat("'", attr.name(), "'"));
  }
  if (unknown.empty()) return absl::OkStatus();
  return Error(absl::StrCat("attribute ", absl::StrJoin(unknown, ", "),
                            " is not supported by this importer"));
}

absl::StatusOr<int64_t> NodeContext::IntAttr(absl::string_view name, int64_t fallback) const {
  const AttributeProto* attr = FindAttr(name);
  if (attr == nullptr) return fallback;
  if (attr->type() != AttributeProto::INT) return WrongType(*this, *attr, "INT");
  return attr->i();
}

absl::StatusOr<bool> NodeContext::FlagAttr(absl::string_view name, bool fallback) const {
  SLUICE_ASSIGN_OR_RETURN(const int64_t value, IntAttr(name, fallback ? 1 : 0));
  if (value != 0 && value != 1) {
    return Error(absl::StrCat("attribute '", name, "' is ", value, "; it must be 0 or 1"));
  }
  return value == 1;
}

absl::StatusOr<double> NodeContext::FloatAttr(absl::string_view name, double fallback) const {
  const AttributeProto* attr = FindAttr(name);
  if (attr == nullptr) return fallback;
  if (attr->type() != AttributeProto::FLOAT) return WrongType(*this, *attr, "FLOAT");
  return attr->f();
}

absl::StatusOr<std::string> NodeContext::StringAttr(absl::string_view name,
                                                    std::string fallback) const {
  const AttributeProto* attr = FindAttr(name);
  if (attr == nullptr) return fallback;
  if (attr->type() != AttributeProto::STRING) return WrongType(*this, *attr, "STRING");
  return attr->s();
}

absl::StatusOr<std::vector<int64_t>> NodeContext::IntsAttr(absl::string_view name,
                                                           std::vector<int64_t> fallback) const {
  const AttributeProto* attr = FindAttr(name);
  if (attr == nullptr) return fallback;
  if (attr->type() != AttributeProto::INTS) return WrongType(*this, *attr, "INTS");
  return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
}

absl::Status NodeContext::SetOutput(int i, const Value& value) {
  if (!WantsOutput(i)) return absl::OkStatus();
  const std::string& onnx_name = node_.output(i);
  Var var = value.var();
  if (state_->Has(onnx_name)) {
    return Error(absl::StrCat("output '", onnx_name, "' is defined twice"));
  }
  // An op output the mapping just made takes the ONNX name; anything already named (a
  // feed, a persistable, another node's output) is copied, so names stay one per value.
  if (state_->IsBoundVar(var.name())) {
    SLUICE_ASSIGN_OR_RETURN(Value copy, fn::Assign(value));
    var = copy.var();
  }
  const std::string name = state_->VarNameFor(onnx_name);
  SLUICE_RETURN_IF_ERROR(state_->program()
                             .mutable_desc()
                             .mutable_block(state_->program().current_block())
                             .RenameVar(var.name(), name));
  Var renamed(&state_->program(), name);
  state_->BindVar(onnx_name, renamed);
  return absl::OkStatus();
}

void NodeContext::SetConstantOutput(int i, HostTensor value) {
  if (WantsOutput(i)) state_->BindConstant(node_.output(i), std::move(value));
}

}  // namespace sluice::framework::onnx::internal
