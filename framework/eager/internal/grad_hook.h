// The seam between eager mode and eager autograd (framework/autograd/): what a tensor
// keeps for autograd, and the recorder a context calls after each op. Eager mode knows
// nothing more of gradients; autograd installs the recorder in a context the first time
// one of its tensors requires a gradient, so a context that never does pays one pointer
// load per op.
#ifndef SLUICE_FRAMEWORK_EAGER_INTERNAL_GRAD_HOOK_H_
#define SLUICE_FRAMEWORK_EAGER_INTERNAL_GRAD_HOOK_H_

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "vm/attrs.h"

namespace sluice::eager::internal {

class TensorState;

// What autograd keeps on a tensor (its AutogradMeta derives from this). Owned by the
// tensor state, deleted when the tensor ends (outside the context's lock: it may hold
// other tensors). `requires_grad`: relaxed; a flag read by every recorded op.
class GradMeta {
 public:
  virtual ~GradMeta() = default;
  std::atomic<bool> requires_grad{true};
};

// Autograd's hook into a context's op calls. Owned by the context state; thread-safe (op
// calls come from any thread, outside the context's lock).
class GradRecorder {
 public:
  virtual ~GradRecorder() = default;
  // After `op` ran on `inputs` (flattened; `input_slots` gives each schema slot's count)
  // with the attributes it was called with, giving `outputs` (flattened likewise), when
  // some input requires a gradient. The recorder may replace an entry of `outputs` by a
  // new state with one reference (an alias of it, TensorState::NewAlias), which the
  // caller returns instead, dropping its reference to the original. An error fails the
  // call (its outputs are dropped).
  virtual absl::Status Record(absl::string_view op, const vm::AttrMap& attrs,
                              absl::Span<TensorState* const> inputs,
                              absl::Span<const int> input_slots, absl::Span<TensorState*> outputs,
                              absl::Span<const int> output_slots) = 0;
  // Before `op` reads `inputs` and writes into `outputs` in place (an optimizer step, an
  // eager in-place call), some of which require a gradient: an error refuses the call. An
  // in-place update of such an output while recording would change what backward reads, and
  // such an input would reach a result the tape never sees (its gradient silently lost).
  virtual absl::Status CheckInPlace(absl::string_view op, absl::Span<TensorState* const> inputs,
                                    absl::Span<TensorState* const> outputs) = 0;
};

}  // namespace sluice::eager::internal

#endif  // SLUICE_FRAMEWORK_EAGER_INTERNAL_GRAD_HOOK_H_
