// How the layers above eager mode (autograd) reach a Tensor's state: its TensorState, and
// a handle made from one. Internal: the state's contract is in context_state.h.
#ifndef SLUICE_FRAMEWORK_EAGER_INTERNAL_TENSOR_ACCESS_H_
#define SLUICE_FRAMEWORK_EAGER_INTERNAL_TENSOR_ACCESS_H_

#include "framework/eager/internal/context_state.h"
#include "framework/eager/tensor.h"

namespace sluice::eager::internal {

struct TensorAccess {
  // The state behind a valid handle (no reference taken).
  static TensorState* State(const Tensor& t) { return t.state_; }
  // A handle that adopts one reference of `state`.
  static Tensor Adopt(TensorState* state) { return Tensor(state); }
  // A new handle to `state` (takes a reference).
  static Tensor Share(TensorState* state) {
    state->Ref();
    return Tensor(state);
  }
};

}  // namespace sluice::eager::internal

#endif  // SLUICE_FRAMEWORK_EAGER_INTERNAL_TENSOR_ACCESS_H_
