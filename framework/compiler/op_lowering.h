// Op lowering: which ops the subgraph compiler fuses, and the expression nodes each becomes
// (docs/design.md, "Subgraph compilation"). Fusible: the elementwise ops with numpy
// broadcasting (add, sub, mul, div, max, min), the activations and unary math ops, scale,
// cast between floating types, the unary ops' gradients, the binary ops' gradients where
// nothing broadcasts, and sgd — all in f32 or f64. Pure functions; thread-safe.
#ifndef SLUICE_FRAMEWORK_COMPILER_OP_LOWERING_H_
#define SLUICE_FRAMEWORK_COMPILER_OP_LOWERING_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "framework/compiler/subgraph.h"
#include "vm/attrs.h"

namespace sluice::framework::compiler {

struct ValueMeta {
  DataType dtype = DataType::kF32;
  Shape shape;
};

// True when an op of `type` with these attributes, inputs and outputs (in the schema's slot
// order, every slot present) can join a group whose domain is its outputs' shape.
bool IsFusible(absl::string_view type, const vm::AttrMap* attrs,
               const std::vector<ValueMeta>& inputs, const std::vector<ValueMeta>& outputs);

// Appends the nodes of one fusible op to `graph`: `args` are the value ids of its inputs
// (in slot order). Returns the value ids of its outputs (in slot order). InvalidArgument
// for an op IsFusible rejects.
absl::StatusOr<std::vector<int>> AppendOp(absl::string_view type, const vm::AttrMap* attrs,
                                          const std::vector<int>& args,
                                          const std::vector<ValueMeta>& outputs, Subgraph& graph);

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_OP_LOWERING_H_
