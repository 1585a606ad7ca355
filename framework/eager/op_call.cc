#include "framework/eager/op_call.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "framework/eager/context.h"
#include "framework/eager/internal/context_state.h"

namespace sluice::eager {
namespace internal {

// The way into Context and Tensor internals (a friend of both).
struct OpCalls {
  static absl::StatusOr<Tensor> Single(absl::string_view op, absl::Span<const Tensor* const> inputs,
                                       const vm::AttrMap& attrs) {
    if (inputs.empty() || !inputs[0]->valid()) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op, "': empty Tensor"));
    }
    return Context::CallSingleIn(inputs[0]->state_->context(), op, inputs, attrs, std::nullopt);
  }
};

}  // namespace internal

absl::StatusOr<Tensor> CallOp(absl::string_view op, absl::Span<const Tensor* const> inputs,
                              const vm::AttrMap& attrs) {
  return internal::OpCalls::Single(op, inputs, attrs);
}

}  // namespace sluice::eager
