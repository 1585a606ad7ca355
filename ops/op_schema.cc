#include "ops/op_schema.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::ops {
namespace {

const std::vector<std::string>& Find(const GradContext::Slots& slots, absl::string_view name) {
  static const std::vector<std::string>* const kEmpty = new std::vector<std::string>();
  for (const auto& [slot, names] : slots) {
    if (slot == name) return names;
  }
  return *kEmpty;
}

std::vector<std::string> Grads(const std::vector<std::string>& names) {
  std::vector<std::string> grads;
  grads.reserve(names.size());
  for (const std::string& name : names) grads.push_back(GradContext::GradName(name));
  return grads;
}

std::string MetaList(const std::vector<TensorMeta>& metas) {
  return absl::StrJoin(metas, ", ", [](std::string* out, const TensorMeta& m) {
    absl::StrAppend(out, DataTypeName(m.dtype), m.shape.ToString());
  });
}

}  // namespace

absl::string_view AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kInt:
      return "int";
    case AttrType::kFloat:
      return "float";
    case AttrType::kString:
      return "string";
    case AttrType::kInts:
      return "int list";
    case AttrType::kBlock:
      return "block reference";
  }
  return "?";
}

bool AttrValueHasType(const vm::AttrValue& value, AttrType type) {
  switch (type) {
    case AttrType::kInt:
      return std::holds_alternative<int64_t>(value);
    case AttrType::kFloat:
      return std::holds_alternative<double>(value);
    case AttrType::kString:
      return std::holds_alternative<std::string>(value);
    case AttrType::kInts:
      return std::holds_alternative<std::vector<int64_t>>(value);
    case AttrType::kBlock:
      return std::holds_alternative<vm::BlockRef>(value);
  }
  return false;
}

absl::Status InferContext::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat("op '", op_, "': ", message));
}

const std::vector<std::string>& GradContext::Input(absl::string_view slot) const {
  return Find(inputs_, slot);
}
const std::vector<std::string>& GradContext::Output(absl::string_view slot) const {
  return Find(outputs_, slot);
}
std::vector<std::string> GradContext::InputGrad(absl::string_view slot) const {
  return Grads(Input(slot));
}
std::vector<std::string> GradContext::OutputGrad(absl::string_view slot) const {
  return Grads(Output(slot));
}

OpSchema& OpSchema::Input(std::string name, bool variadic, bool optional) {
  inputs_.push_back({std::move(name), variadic, optional});
  return *this;
}
OpSchema& OpSchema::Output(std::string name, bool variadic) {
  outputs_.push_back({std::move(name), variadic, false});
  return *this;
}
OpSchema& OpSchema::Attr(std::string name, AttrType type,
                         std::optional<vm::AttrValue> default_value) {
  attrs_.push_back({std::move(name), type, std::move(default_value)});
  return *this;
}
OpSchema& OpSchema::Infer(InferFn fn) {
  infer_ = std::move(fn);
  return *this;
}
OpSchema& OpSchema::Place(PlacementFn fn) {
  place_ = std::move(fn);
  return *this;
}
OpSchema& OpSchema::Grad(GradMaker fn) {
  grad_ = std::move(fn);
  return *this;
}
OpSchema& OpSchema::Flags(uint32_t flags) {
  flags_ = flags;
  return *this;
}

OpSchema& OpSchema::InPlace(std::string input, std::string output) {
  in_place_.emplace_back(std::move(input), std::move(output));
  return *this;
}

bool OpSchema::InPlaceSafe(int input_slot, int output_slot) const {
  for (const auto& [input, output] : in_place_) {
    if (InputSlot(input) == input_slot && OutputSlot(output) == output_slot) return true;
  }
  return false;
}

vm::InPlaceContract OpSchema::InPlaceContractOf() const {
  vm::InPlaceContract contract;
  contract.declared = true;
  contract.input_slots = static_cast<int>(inputs_.size());
  contract.output_slots = static_cast<int>(outputs_.size());
  contract.input_variadic = !inputs_.empty() && inputs_.back().variadic;
  contract.output_variadic = !outputs_.empty() && outputs_.back().variadic;
  for (const auto& [input, output] : in_place_) {
    contract.slot_pairs.emplace_back(InputSlot(input), OutputSlot(output));
  }
  return contract;
}

int OpSchema::InputSlot(absl::string_view name) const {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int OpSchema::OutputSlot(absl::string_view name) const {
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (outputs_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<vm::AttrMap> OpSchema::NormalizeAttrs(const vm::AttrMap& given) const {
  for (const auto& [name, value] : given.values()) {
    const AttrDef* def = nullptr;
    for (const AttrDef& d : attrs_) {
      if (d.name == name) def = &d;
    }
    if (def == nullptr) {
      std::string known = absl::StrJoin(
          attrs_, ", ", [](std::string* out, const AttrDef& d) { absl::StrAppend(out, d.name); });
      return absl::InvalidArgumentError(absl::StrCat("op '", name_, "': unknown attribute '", name,
                                                     "' (known: ", known.empty() ? "none" : known,
                                                     ")"));
    }
    if (!AttrValueHasType(value, def->type)) {
      // An int where a float is expected is a harmless widening; anything else is an error.
      if (!(def->type == AttrType::kFloat && std::holds_alternative<int64_t>(value))) {
        return absl::InvalidArgumentError(absl::StrCat("op '", name_, "': attribute '", name,
                                                       "' must be ", AttrTypeName(def->type)));
      }
    }
  }
  vm::AttrMap normalized;
  for (const AttrDef& def : attrs_) {
    auto it = given.values().find(def.name);
    if (it != given.values().end()) {
      vm::AttrValue value = it->second;
      if (def.type == AttrType::kFloat && std::holds_alternative<int64_t>(value)) {
        value = static_cast<double>(std::get<int64_t>(value));
      }
      normalized.Set(def.name, std::move(value));
    } else if (def.default_value.has_value()) {
      normalized.Set(def.name, *def.default_value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("op '", name_, "': required attribute '",
                                                     def.name, "' (", AttrTypeName(def.type),
                                                     ") is missing"));
    }
  }
  return normalized;
}

absl::StatusOr<std::vector<std::vector<TensorMeta>>> OpSchema::InferOutputs(
    const std::vector<std::vector<TensorMeta>>& inputs, const vm::AttrMap& attrs,
    std::vector<int> output_counts) const {
  if (inputs.size() != inputs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name_, "' has ", inputs_.size(),
                                                   " input slot(s), got ", inputs.size()));
  }
  for (size_t s = 0; s < inputs_.size(); ++s) {
    const ArgDef& arg = inputs_[s];
    const size_t n = inputs[s].size();
    const bool ok = arg.variadic ? (n >= 1 || arg.optional) : (n == 1 || (arg.optional && n == 0));
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", name_, "': input '", arg.name, "' takes ",
                       arg.variadic ? "one or more tensors" : "one tensor", ", got ", n));
    }
  }
  if (output_counts.empty()) output_counts.assign(outputs_.size(), -1);
  if (output_counts.size() != outputs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name_, "' has ", outputs_.size(),
                                                   " output slot(s), got ", output_counts.size()));
  }
  for (size_t s = 0; s < outputs_.size(); ++s) {
    if (!outputs_[s].variadic && output_counts[s] < 0) output_counts[s] = 1;
  }
  const InferContext ctx(name_, inputs, &attrs, output_counts);
  absl::StatusOr<std::vector<std::vector<TensorMeta>>> outputs = infer_(ctx);
  if (!outputs.ok()) return outputs.status();
  if (outputs->size() != outputs_.size()) {
    return absl::InternalError(absl::StrCat("op '", name_, "': inference produced ",
                                            outputs->size(), " output slot(s), the schema has ",
                                            outputs_.size()));
  }
  for (size_t s = 0; s < outputs_.size(); ++s) {
    const int want = output_counts[s];
    if (want >= 0 && static_cast<int>((*outputs)[s].size()) != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op '", name_, "': output '", outputs_[s].name, "' has ", (*outputs)[s].size(),
          " tensor(s) (", MetaList((*outputs)[s]), "), the caller expects ", want));
    }
  }
  return outputs;
}

absl::Status OpSchema::Validate() const {
  auto bad = [&](absl::string_view what) {
    return absl::InternalError(absl::StrCat("schema of op '", name_, "': ", what));
  };
  if (name_.empty()) return bad("empty name");
  if (!infer_) return bad("no infer function");
  for (size_t i = 0; i + 1 < inputs_.size(); ++i) {
    if (inputs_[i].variadic) return bad("only the last input slot may be variadic");
  }
  for (size_t i = 0; i + 1 < outputs_.size(); ++i) {
    if (outputs_[i].variadic) return bad("only the last output slot may be variadic");
  }
  for (const auto& [input, output] : in_place_) {
    if (InputSlot(input) < 0 || OutputSlot(output) < 0) {
      return bad(absl::StrCat("in-place pair (", input, ", ", output, ") names an unknown slot"));
    }
  }
  for (const AttrDef& def : attrs_) {
    if (def.default_value.has_value() && !AttrValueHasType(*def.default_value, def.type)) {
      return bad(
          absl::StrCat("default of attribute '", def.name, "' is not ", AttrTypeName(def.type)));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops
