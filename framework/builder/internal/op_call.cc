#include "framework/builder/internal/op_call.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/program.h"

namespace sluice::fn::internal {
namespace {

using framework::Program;
using framework::Var;

// The first operand of `slots`, after checking that every operand has its mode; null (and
// an error) when there is none.
absl::StatusOr<const Value*> FirstOfOneMode(absl::string_view op, const ValueSlots& slots) {
  const Value* first = nullptr;
  for (size_t s = 0; s < slots.size(); ++s) {
    for (size_t i = 0; i < slots[s].size(); ++i) {
      const Value& v = slots[s][i];
      if (first == nullptr) {
        first = &v;
      } else if (v.is_static() != first->is_static()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "op '", op, "': operand ", s, "[", i, "] is ",
            v.is_static() ? "a static Var" : "an eager Tensor", " but an earlier operand is ",
            first->is_static() ? "a static Var" : "an eager Tensor",
            "; one call takes operands of one mode"));
      }
    }
  }
  if (first == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("op '", op, "': no operands"));
  }
  return first;
}

absl::StatusOr<std::vector<Value>> ApplyStatic(absl::string_view op, const ValueSlots& slots,
                                               const vm::AttrMap& attrs, Program* program) {
  if (program == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("op '", op, "': an empty Var handle"));
  }
  std::vector<std::vector<Var>> vars(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    for (const Value& v : slots[s]) vars[s].push_back(v.var());
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> outs,
                          framework::AppendOp(*program, op, vars, attrs));
  std::vector<Value> results;
  for (std::vector<Var>& slot : outs) {
    for (Var& var : slot) results.emplace_back(std::move(var));
  }
  return results;
}

// The first operand's context; an error naming the op when there is none.
absl::StatusOr<eager::Context> ContextOf(absl::string_view op, const TensorSlots& slots) {
  for (const auto& slot : slots) {
    if (slot.empty()) continue;
    if (!slot.front().valid()) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op, "': an empty Tensor"));
    }
    return slot.front().context();
  }
  return absl::InvalidArgumentError(absl::StrCat("op '", op, "': no operands"));
}

template <typename T>
absl::StatusOr<T> First(absl::StatusOr<std::vector<T>> outputs) {
  if (!outputs.ok()) return outputs.status();
  return std::move((*outputs)[0]);
}

template <typename T>
absl::StatusOr<std::pair<T, T>> FirstTwo(absl::StatusOr<std::vector<T>> outputs) {
  if (!outputs.ok()) return outputs.status();
  return std::make_pair(std::move((*outputs)[0]), std::move((*outputs)[1]));
}

// SplitMix64's finalizer: a well-mixed seed from a small counter.
int64_t MixSeed(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>((z ^ (z >> 31)) >> 1);
}

}  // namespace

absl::StatusOr<std::vector<Value>> Apply(absl::string_view op, const ValueSlots& slots,
                                         const vm::AttrMap& attrs) {
  SLUICE_ASSIGN_OR_RETURN(const Value* first, FirstOfOneMode(op, slots));
  if (first->is_static()) return ApplyStatic(op, slots, attrs, first->var().program());
  TensorSlots tensors(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    for (const Value& v : slots[s]) tensors[s].push_back(v.tensor());
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<eager::Tensor> outs, Eager(op, tensors, attrs));
  std::vector<Value> results;
  for (eager::Tensor& t : outs) results.emplace_back(std::move(t));
  return results;
}

absl::StatusOr<Value> ApplyOne(absl::string_view op, const ValueSlots& slots,
                               const vm::AttrMap& attrs) {
  return First(Apply(op, slots, attrs));
}

absl::StatusOr<std::pair<Value, Value>> ApplyPair(absl::string_view op, const ValueSlots& slots,
                                                  const vm::AttrMap& attrs) {
  return FirstTwo(Apply(op, slots, attrs));
}

absl::StatusOr<std::vector<eager::Tensor>> Eager(absl::string_view op, const TensorSlots& slots,
                                                 const vm::AttrMap& attrs) {
  SLUICE_ASSIGN_OR_RETURN(eager::Context ctx, ContextOf(op, slots));
  return ctx.Call(op, slots, attrs);
}

absl::StatusOr<eager::Tensor> EagerOne(absl::string_view op, const TensorSlots& slots,
                                       const vm::AttrMap& attrs) {
  return First(Eager(op, slots, attrs));
}

absl::StatusOr<std::pair<eager::Tensor, eager::Tensor>> EagerPair(absl::string_view op,
                                                                  const TensorSlots& slots,
                                                                  const vm::AttrMap& attrs) {
  return FirstTwo(Eager(op, slots, attrs));
}

absl::Status EagerInPlace(absl::string_view op, const TensorSlots& slots,
                          const vm::AttrMap& attrs) {
  SLUICE_ASSIGN_OR_RETURN(eager::Context ctx, ContextOf(op, slots));
  if (slots.empty() || slots.front().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", op, "': no operand to write in place"));
  }
  return ctx.CallInto(op, slots, {{slots.front().front()}}, attrs);
}

absl::StatusOr<Value> Source(absl::string_view op, const vm::AttrMap& attrs, eager::Context* ctx) {
  if (Program* main = framework::CurrentMainProgram(); main != nullptr) {
    return First(ApplyStatic(op, {}, attrs, main));
  }
  if (ctx == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "op '", op, "': outside a ProgramGuard an eager::Context is needed to run it eagerly"));
  }
  SLUICE_ASSIGN_OR_RETURN(eager::Tensor out, EagerSource(*ctx, op, attrs, std::nullopt));
  return Value(std::move(out));
}

absl::StatusOr<eager::Tensor> EagerSource(eager::Context& ctx, absl::string_view op,
                                          const vm::AttrMap& attrs, std::optional<Device> device) {
  return First(ctx.Call(op, {}, attrs, device));
}

int64_t StaticOrEagerSeed(std::optional<int64_t> seed, eager::Context* ctx) {
  if (seed.has_value()) return *seed;
  if (Program* main = framework::CurrentMainProgram(); main != nullptr) {
    return MixSeed(main->desc().global_block().ops().size());
  }
  return ctx != nullptr ? ctx->NextSeed() : 0;
}

std::vector<int64_t> Dims(const Shape& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

}  // namespace sluice::fn::internal
