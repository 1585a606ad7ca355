// OpSchema: what an op is, independent of any device — its input and output slots, typed
// attributes with defaults, shape and dtype inference, flags, an optional device-and-stream
// rule (copies), and a grad maker that names the ops computing its input gradients (used by
// autodiff). Kernels (per device type and dtype) live in the OpRegistry next to it.
//
// Slots: a schema lists named input and output slots in order. A variadic slot takes any
// number of tensors (>= 1); only the last slot on a side may be variadic, so a kernel's flat
// operand list is unambiguous. An optional slot may be empty.
#ifndef SLUICE_OPS_OP_SCHEMA_H_
#define SLUICE_OPS_OP_SCHEMA_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "core/stream_id.h"
#include "core/stream_type.h"
#include "vm/attrs.h"
#include "vm/kernel.h"

namespace sluice::ops {

// kBlock: a vm::BlockRef (a control-flow op's sub-block).
enum class AttrType { kInt, kFloat, kString, kInts, kBlock };
absl::string_view AttrTypeName(AttrType type);

struct AttrDef {
  std::string name;
  AttrType type = AttrType::kInt;
  std::optional<vm::AttrValue> default_value;  // none: the attribute is required
};

struct ArgDef {
  std::string name;
  bool variadic = false;
  bool optional = false;
};

// Flags, a bitmask.
enum OpFlag : uint32_t {
  kOpNone = 0,
  kOpRandom = 1u << 0,       // output depends on a seed/state: never deduplicated or reordered
  kOpSideEffects = 1u << 1,  // writes state beyond its outputs (optimizers update in place)
  kOpElementwise = 1u << 2,  // output[i] depends on input[i] (after broadcasting): fusable
  // A collective (ops/collective_ops.cc): every rank must issue these in one order, so they
  // keep their program order among themselves (as random ops do) and are never fused.
  kOpOrdered = 1u << 3,
};

// A tensor's dtype and shape: what inference consumes and produces.
struct TensorMeta {
  DataType dtype = DataType::kF32;
  Shape shape;
  friend bool operator==(const TensorMeta& a, const TensorMeta& b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
};

// What shape/dtype inference sees: input metas per slot (variadic slots expanded; an empty
// optional slot has none) and the attributes with defaults applied. Value type.
class InferContext {
 public:
  InferContext(absl::string_view op, std::vector<std::vector<TensorMeta>> inputs,
               const vm::AttrMap* attrs, std::vector<int> output_counts)
      : op_(op),
        inputs_(std::move(inputs)),
        attrs_(attrs),
        output_counts_(std::move(output_counts)) {}

  absl::string_view op() const { return op_; }
  int num_input_slots() const { return static_cast<int>(inputs_.size()); }
  const std::vector<TensorMeta>& inputs(int slot) const { return inputs_[slot]; }
  const TensorMeta& input(int slot, int i = 0) const { return inputs_[slot][i]; }
  const vm::AttrMap& attrs() const { return *attrs_; }
  // How many tensors a variadic output slot must produce (from the caller, or an attribute
  // the infer function reads), 1 for a plain slot.
  int output_count(int slot) const { return output_counts_[slot]; }

  // InvalidArgument "op 'add': <message>".
  absl::Status Error(absl::string_view message) const;

 private:
  std::string op_;
  std::vector<std::vector<TensorMeta>> inputs_;
  const vm::AttrMap* attrs_;
  std::vector<int> output_counts_;
};

// Produces the output metas per output slot, or an error naming the shapes or types at
// fault (InferContext::Error).
using InferFn =
    std::function<absl::StatusOr<std::vector<std::vector<TensorMeta>>>(const InferContext&)>;

// Where an op runs and where its outputs live, when its schema decides (copies run on a
// copy stream; memcpy_d2h runs on the source device and writes host memory). `inputs` are
// the devices of the inputs; `default_device` the caller's.
struct Placement {
  StreamKey stream;      // where the kernel runs
  Device output_device;  // where the outputs are allocated
};
using PlacementFn = std::function<absl::StatusOr<Placement>(
    absl::Span<const Device> inputs, const vm::AttrMap& attrs, Device default_device)>;

// One op of a gradient, by variable names: slot -> names. Value type.
struct GradOpDesc {
  std::string type;
  std::vector<std::pair<std::string, std::vector<std::string>>> inputs;
  std::vector<std::pair<std::string, std::vector<std::string>>> outputs;
  vm::AttrMap attrs;
};

// What a grad maker sees of the forward op: its variable names per slot and attributes.
// Gradients are named `GradName(var)`. A grad maker computes the gradient of every input of
// a float dtype; autodiff drops outputs nobody needs.
class GradContext {
 public:
  using Slots = std::vector<std::pair<std::string, std::vector<std::string>>>;
  GradContext(Slots inputs, Slots outputs, const vm::AttrMap* attrs)
      : inputs_(std::move(inputs)), outputs_(std::move(outputs)), attrs_(attrs) {}

  // Names in a slot; empty for an unknown or empty slot.
  const std::vector<std::string>& Input(absl::string_view slot) const;
  const std::vector<std::string>& Output(absl::string_view slot) const;
  std::vector<std::string> InputGrad(absl::string_view slot) const;
  std::vector<std::string> OutputGrad(absl::string_view slot) const;
  const vm::AttrMap& attrs() const { return *attrs_; }

  static std::string GradName(absl::string_view var) { return std::string(var) + "@GRAD"; }

 private:
  Slots inputs_;
  Slots outputs_;
  const vm::AttrMap* attrs_;
};
using GradMaker = std::function<std::vector<GradOpDesc>(const GradContext&)>;

// Value type, built once with the chaining setters and then immutable (thread-safe reads).
class OpSchema {
 public:
  explicit OpSchema(std::string name) : name_(std::move(name)) {}

  OpSchema& Input(std::string name, bool variadic = false, bool optional = false);
  OpSchema& Output(std::string name, bool variadic = false);
  OpSchema& Attr(std::string name, AttrType type, std::optional<vm::AttrValue> default_value);
  OpSchema& Infer(InferFn fn);
  OpSchema& Place(PlacementFn fn);
  OpSchema& Grad(GradMaker fn);
  OpSchema& Flags(uint32_t flags);
  // Declares that output slot `output` may be the same tensor as input slot `input` (the
  // k-th tensor of each, for variadic slots): every kernel of the op, on every device, reads
  // each element of that input before it writes the same element of that output, and
  // nothing else. Elementwise ops and the in-place updates (sgd, adam, write_row) declare
  // theirs; an op that reads an input element after another thread or iteration may have
  // written that place of the output (matmul, transpose, reductions, softmax, concat)
  // declares none. Where a program or a caller names one of an op's inputs as an output of
  // an undeclared pair, the engine gives the kernel a fresh output and copies it back
  // (docs/design.md, "Aliasing"). Both slots must exist (Validate).
  OpSchema& InPlace(std::string input, std::string output);

  const std::string& name() const { return name_; }
  const std::vector<ArgDef>& inputs() const { return inputs_; }
  const std::vector<ArgDef>& outputs() const { return outputs_; }
  const std::vector<AttrDef>& attrs() const { return attrs_; }
  uint32_t flags() const { return flags_; }
  bool has_flag(OpFlag flag) const { return (flags_ & flag) != 0; }
  const PlacementFn& placement() const { return place_; }
  const GradMaker& grad_maker() const { return grad_; }
  bool has_grad() const { return static_cast<bool>(grad_); }
  // Are input slot `input_slot` and output slot `output_slot` declared in place (InPlace)?
  bool InPlaceSafe(int input_slot, int output_slot) const;
  // The declared pairs in the form the VM's kernels carry (vm::OpKernel::in_place).
  vm::InPlaceContract InPlaceContractOf() const;
  int InputSlot(absl::string_view name) const;   // -1 when absent
  int OutputSlot(absl::string_view name) const;  // -1 when absent

  // Type-checks `given` against the declared attributes, adds defaults. InvalidArgument
  // naming the op and the attribute: unknown name, wrong type, required but missing.
  absl::StatusOr<vm::AttrMap> NormalizeAttrs(const vm::AttrMap& given) const;

  // Checks slot arity (per slot counts of `inputs`), then runs inference. `attrs` must be
  // normalized. `output_counts` gives the tensors per output slot (empty: 1 each; a
  // variadic slot whose count is not given must be sized by the infer function).
  absl::StatusOr<std::vector<std::vector<TensorMeta>>> InferOutputs(
      const std::vector<std::vector<TensorMeta>>& inputs, const vm::AttrMap& attrs,
      std::vector<int> output_counts = {}) const;

  // Checks that the schema itself is well formed (variadic slot last, defaults of the
  // declared type, an infer function present). Internal error naming the op.
  absl::Status Validate() const;

 private:
  std::string name_;
  std::vector<ArgDef> inputs_;
  std::vector<ArgDef> outputs_;
  std::vector<AttrDef> attrs_;
  InferFn infer_;
  PlacementFn place_;
  GradMaker grad_;
  uint32_t flags_ = kOpNone;
  std::vector<std::pair<std::string, std::string>> in_place_;  // (input slot, output slot)
};

// Is `value` of `type`?
bool AttrValueHasType(const vm::AttrValue& value, AttrType type);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_OP_SCHEMA_H_
