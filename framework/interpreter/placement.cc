#include "framework/interpreter/placement.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/op_schema.h"

namespace sluice::framework {

namespace {

// An `assign` of `dtype` on `device`'s `stream`: the copies this file inserts (copy-backs of
// undeclared aliases, device-resident fetches).
absl::StatusOr<OpFunc> AssignFunc(const ops::OpRegistry& registry, const Device& device,
                                  const std::optional<StreamKey>& stream, DataType dtype) {
  OpFunc copy;
  copy.type = "assign";
  SLUICE_ASSIGN_OR_RETURN(copy.schema, registry.FindSchema(copy.type));
  SLUICE_ASSIGN_OR_RETURN(vm::AttrMap attrs, copy.schema->NormalizeAttrs(vm::AttrMap()));
  if (!attrs.empty()) copy.attrs = std::make_shared<const vm::AttrMap>(std::move(attrs));
  copy.device = device;
  copy.stream = stream;
  SLUICE_ASSIGN_OR_RETURN(copy.kernel, registry.FindKernel(copy.type, device.type(), dtype));
  return copy;
}

// Inserts copies and remembers them until their source is written again.
class CopyInserter {
 public:
  CopyInserter(const ops::OpRegistry& registry, VarTable& vars, PlacedBlock& placed)
      : registry_(registry), vars_(vars), placed_(placed) {}

  // The slot holding `var`'s current value on `device`: an existing valid copy, else a new
  // copy op appended to the funcs.
  absl::StatusOr<int> CopyOf(int var, const Device& device) {
    for (const auto& [copy_device, copy_var] : valid_[var]) {
      if (copy_device == device) return copy_var;
    }
    SLUICE_ASSIGN_OR_RETURN(int copy_var, InsertCopy(var, device));
    valid_[var].emplace_back(device, copy_var);
    return copy_var;
  }

  // `var` has a new value: its copies are stale.
  void Invalidate(int var) { valid_.erase(var); }

 private:
  absl::StatusOr<int> InsertCopy(int var, const Device& device) {
    const bool to_host = device.type() == DeviceType::kCpu;
    const Device source_device = vars_.slots[var].device;
    const DataType dtype = vars_.slots[var].dtype;
    OpFunc copy;
    copy.type = to_host ? "memcpy_d2h" : "memcpy_h2d";
    SLUICE_ASSIGN_OR_RETURN(copy.schema, registry_.FindSchema(copy.type));
    vm::AttrMap given;
    if (!to_host) given.Set("device", device.ToString());
    SLUICE_ASSIGN_OR_RETURN(vm::AttrMap attrs, copy.schema->NormalizeAttrs(given));
    const Device inputs[] = {source_device};
    SLUICE_ASSIGN_OR_RETURN(ops::Placement placement,
                            copy.schema->placement()(inputs, attrs, device));
    if (!attrs.empty()) copy.attrs = std::make_shared<const vm::AttrMap>(std::move(attrs));
    copy.device = placement.stream.device;
    copy.stream = placement.stream;
    SLUICE_ASSIGN_OR_RETURN(copy.kernel,
                            registry_.FindKernel(copy.type, copy.device.type(), dtype));
    VarSlot slot;
    slot.name = absl::StrCat(vars_.slots[var].name, "@", device.ToString());
    slot.kind = VarKind::kTemp;
    slot.device = placement.output_device;
    slot.dtype = dtype;
    slot.shape = vars_.slots[var].shape;
    const int copy_var = vars_.size();
    vars_.slots.push_back(std::move(slot));
    copy.inputs = {var};
    copy.outputs = {copy_var};
    placed_.funcs.push_back(std::move(copy));
    ++placed_.inserted_copies;
    return copy_var;
  }

  const ops::OpRegistry& registry_;
  VarTable& vars_;
  PlacedBlock& placed_;
  absl::flat_hash_map<int, std::vector<std::pair<Device, int>>> valid_;  // var -> copies
};

// An op whose schema places it (the copies): where the rule says.
absl::Status PlaceByRule(const ResolvedOp& op, const Device& device, VarTable& vars, OpFunc& func) {
  std::vector<Device> input_devices;
  for (int var : op.inputs) input_devices.push_back(vars.slots[var].device);
  absl::StatusOr<ops::Placement> placement =
      op.schema->placement()(input_devices, op.attrs, device);
  if (!placement.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(op.source, op.type), ": ", placement.status().message()));
  }
  func.device = placement->stream.device;
  func.stream = placement->stream;
  for (int var : func.outputs) {
    if (vars.slots[var].kind == VarKind::kTemp) vars.slots[var].device = placement->output_device;
  }
  return absl::OkStatus();
}

// Any other op: on `device`, on its attribute's stream if any; inputs copied over.
absl::Status PlaceOnDevice(const ResolvedOp& op, CopyInserter& copies, const VarTable& vars,
                           OpFunc& func) {
  const std::string where = OpName(op.source, op.type);
  if (!op.stream_attr.empty()) {
    absl::StatusOr<StreamKey> key =
        StreamKey::Parse(absl::StrCat(func.device.ToString(), "/", op.stream_attr));
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": bad stream attribute '", op.stream_attr, "': ", key.status().message()));
    }
    func.stream = *key;
  }
  for (int& var : func.inputs) {
    if (vars.slots[var].device != func.device) {
      SLUICE_ASSIGN_OR_RETURN(var, copies.CopyOf(var, func.device));
    }
  }
  for (int var : func.outputs) {
    if (vars.slots[var].device != func.device) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": writes '", vars.slots[var].name, "' which lives on ",
          vars.slots[var].device.ToString(), " while the op runs on ", func.device.ToString()));
    }
  }
  return absl::OkStatus();
}

// The aliasing rule (docs/design.md, "Aliasing"): each output of `func` that is also one of
// its inputs, in a pair its schema does not declare in place, is written to a fresh
// temporary "<var>@alias<op>" instead, and an `assign` on the op's device and stream copies
// it back into the variable right after. Returns the copy-backs to append after `func`.
// A copy back rather than a rebinding of the variable: a slot is bound to one blob for every
// run, a persistable's blob is the scope's (shared with other builds and runs), and
// sub-blocks bind their parent's variables by name, so the variable must keep its blob.
absl::StatusOr<std::vector<OpFunc>> SeparateAliasedOutputs(const ResolvedOp& op,
                                                           const ops::OpRegistry& registry,
                                                           VarTable& vars, OpFunc& func) {
  std::vector<OpFunc> copy_backs;
  if (op.schema == nullptr) return copy_backs;  // control flow: its sub-blocks' ops are placed
  const int n_in = static_cast<int>(func.inputs.size());
  const int n_out = static_cast<int>(func.outputs.size());
  std::optional<vm::InPlaceContract> contract;
  for (int o = 0; o < n_out; ++o) {
    const int var = func.outputs[o];
    bool separate = false;
    for (int i = 0; i < n_in && !separate; ++i) {
      if (func.inputs[i] != var) continue;
      if (!contract.has_value()) contract = op.schema->InPlaceContractOf();
      separate = !contract->Allows(i, o, n_in, n_out);
    }
    if (!separate) continue;
    const VarSlot& source = vars.slots[var];
    VarSlot slot;
    slot.name = absl::StrCat(source.name, "@alias", op.source);
    slot.kind = VarKind::kTemp;
    slot.device = source.device;
    slot.dtype = source.dtype;
    slot.shape = source.shape;
    const int fresh = vars.size();
    SLUICE_ASSIGN_OR_RETURN(OpFunc copy,
                            AssignFunc(registry, func.device, func.stream, slot.dtype));
    vars.slots.push_back(std::move(slot));
    copy.inputs = {fresh};
    copy.outputs = {var};
    func.outputs[o] = fresh;
    copy_backs.push_back(std::move(copy));
  }
  return copy_backs;
}

absl::Status PlaceOp(const ResolvedOp& op, const Device& device, const ops::OpRegistry& registry,
                     CopyInserter& copies, VarTable& vars, PlacedBlock& placed) {
  std::vector<OpFunc>& funcs = placed.funcs;
  OpFunc func;
  func.type = op.type;
  func.source = op.source;
  func.schema = op.schema;
  func.random = op.random;
  func.device = device;
  func.inputs = op.inputs;
  func.outputs = op.outputs;
  if (op.schema != nullptr && op.schema->placement()) {
    SLUICE_RETURN_IF_ERROR(PlaceByRule(op, device, vars, func));
  } else {
    SLUICE_RETURN_IF_ERROR(PlaceOnDevice(op, copies, vars, func));
  }
  if (!op.attrs.empty()) func.attrs = std::make_shared<const vm::AttrMap>(op.attrs);
  SLUICE_ASSIGN_OR_RETURN(std::vector<OpFunc> copy_backs,
                          SeparateAliasedOutputs(op, registry, vars, func));
  for (int var : func.outputs) copies.Invalidate(var);
  funcs.push_back(std::move(func));
  for (OpFunc& copy : copy_backs) {
    copies.Invalidate(copy.outputs[0]);
    funcs.push_back(std::move(copy));
    ++placed.inserted_copies;
  }
  return absl::OkStatus();
}

// A device-resident fetch of a persistable (I/O binding): its blob is the scope's and may be
// lazy, which an InstructionsBuilder cannot copy from, so the run ends with an `assign` of
// it into a temporary of the same device that the executor copies out. Returns that slot.
absl::StatusOr<int> InsertFetchAssign(const ops::OpRegistry& registry, int var, VarTable& vars,
                                      PlacedBlock& placed) {
  const VarSlot& source = vars.slots[var];
  SLUICE_ASSIGN_OR_RETURN(
      OpFunc copy, AssignFunc(registry, source.device,
                              StreamKey{source.device, StreamType::kCompute, 0}, source.dtype));
  VarSlot slot;
  slot.name = absl::StrCat(source.name, "@fetch");
  slot.kind = VarKind::kTemp;
  slot.device = source.device;
  slot.dtype = source.dtype;
  slot.shape = source.shape;
  slot.device_fetch = true;
  const int copy_var = vars.size();
  vars.slots.push_back(std::move(slot));
  copy.inputs = {var};
  copy.outputs = {copy_var};
  placed.funcs.push_back(std::move(copy));
  ++placed.inserted_copies;
  return copy_var;
}

}  // namespace

PlacedBlock PlaceOps(const ResolvedBlock& resolved, const ops::OpRegistry& registry,
                     const Device& device, VarTable& vars) {
  PlacedBlock placed;
  CopyInserter copies(registry, vars, placed);
  for (const ResolvedOp& op : resolved.ops) {
    placed.error = PlaceOp(op, device, registry, copies, vars, placed);
    if (!placed.error.ok()) return placed;
  }
  const Device cpu(DeviceType::kCpu, 0);
  for (int var : resolved.fetches) {
    if (vars.slots[var].device_fetch) {
      if (vars.slots[var].kind == VarKind::kPersistable) {
        absl::StatusOr<int> copy = InsertFetchAssign(registry, var, vars, placed);
        if (!copy.ok()) {
          placed.error = copy.status();
          return placed;
        }
        var = *copy;
      }
    } else if (vars.slots[var].device.type() != DeviceType::kCpu) {
      absl::StatusOr<int> copy = copies.CopyOf(var, cpu);
      if (!copy.ok()) {
        placed.error = copy.status();
        return placed;
      }
      var = *copy;
    }
    vars.slots[var].fetched = true;
    placed.fetch_slots.push_back(var);
  }
  return placed;
}

absl::StatusOr<PlacedBlock> ResolveAndPlace(const ir::ProgramDesc& program,
                                            const ir::BlockDesc& block,
                                            const ops::OpRegistry& registry, const Device& device,
                                            VarTable& vars,
                                            const std::vector<std::string>& fetch_names) {
  const ResolvedBlock resolved = ResolveOps(block, registry, vars, fetch_names, &program);
  PlacedBlock placed = PlaceOps(resolved, registry, device, vars);
  SLUICE_RETURN_IF_ERROR(ChooseKernels(registry, vars, placed.funcs));
  SLUICE_RETURN_IF_ERROR(placed.error);
  SLUICE_RETURN_IF_ERROR(resolved.error);
  return placed;
}

}  // namespace sluice::framework
