// How the generated fn:: functions (functional_ops.cc) run an op: over Values in their
// common mode (static: AppendOp; eager: Context::Call), over eager Tensors, or without
// operands (the current main program, else a Context). Private to framework/builder.
// Every function is thread-compatible as its operands are; errors name the op.
#ifndef SLUICE_FRAMEWORK_BUILDER_INTERNAL_OP_CALL_H_
#define SLUICE_FRAMEWORK_BUILDER_INTERNAL_OP_CALL_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/builder/value.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "vm/attrs.h"

namespace sluice::fn::internal {

using framework::Value;
using ValueSlots = std::vector<std::vector<Value>>;
using TensorSlots = std::vector<std::vector<eager::Tensor>>;

// `op` on `slots` (per operand slot) in their common mode: every output, slots flattened.
// Operands of both modes in one call, no operand at all, an empty Var or Tensor:
// InvalidArgument naming the op and the operand.
absl::StatusOr<std::vector<Value>> Apply(absl::string_view op, const ValueSlots& slots,
                                         const vm::AttrMap& attrs);
absl::StatusOr<Value> ApplyOne(absl::string_view op, const ValueSlots& slots,
                               const vm::AttrMap& attrs);
absl::StatusOr<std::pair<Value, Value>> ApplyPair(absl::string_view op, const ValueSlots& slots,
                                                  const vm::AttrMap& attrs);

// The same over eager Tensors, in the context of the first one.
absl::StatusOr<std::vector<eager::Tensor>> Eager(absl::string_view op, const TensorSlots& slots,
                                                 const vm::AttrMap& attrs);
absl::StatusOr<eager::Tensor> EagerOne(absl::string_view op, const TensorSlots& slots,
                                       const vm::AttrMap& attrs);
absl::StatusOr<std::pair<eager::Tensor, eager::Tensor>> EagerPair(absl::string_view op,
                                                                  const TensorSlots& slots,
                                                                  const vm::AttrMap& attrs);

// `op` on eager `slots`, its one output written into the first operand (the first slot's
// first Tensor) through eager::Context::CallInto: in that Tensor's storage where the schema
// declares the pair in place, its version bumped. The errors of EagerOne, and
// FailedPrecondition from CallInto when the Tensor requires a gradient while gradients are
// recorded.
absl::Status EagerInPlace(absl::string_view op, const TensorSlots& slots, const vm::AttrMap& attrs);

// An op without operands: appended to the current main program inside a ProgramGuard (`ctx`
// ignored), else run in `ctx` (FailedPrecondition naming the op when it is null).
absl::StatusOr<Value> Source(absl::string_view op, const vm::AttrMap& attrs, eager::Context* ctx);
// The same in `ctx`, its outputs on `device` (the context's default when none).
absl::StatusOr<eager::Tensor> EagerSource(eager::Context& ctx, absl::string_view op,
                                          const vm::AttrMap& attrs, std::optional<Device> device);

// A random op's seed when the caller gave none: inside a ProgramGuard a fixed function of
// the op's position in the main program (so rebuilding a program gives the same one), else
// the next of `ctx`'s seed sequence, else 0.
int64_t StaticOrEagerSeed(std::optional<int64_t> seed, eager::Context* ctx);

std::vector<int64_t> Dims(const Shape& shape);

}  // namespace sluice::fn::internal

#endif  // SLUICE_FRAMEWORK_BUILDER_INTERNAL_OP_CALL_H_
