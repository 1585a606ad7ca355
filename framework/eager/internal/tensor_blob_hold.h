// TensorBlobHold: the deleter of the BlobRefs Tensor::blob() hands out (tensor.cc), which
// Context::FromBlob (context.cc) recognizes. Internal: the state's contract is in
// context_state.h.
//
// A value holding one reference of a TensorState; as thread-safe as TensorState::Unref
// (any thread).
#ifndef SLUICE_FRAMEWORK_EAGER_INTERNAL_TENSOR_BLOB_HOLD_H_
#define SLUICE_FRAMEWORK_EAGER_INTERNAL_TENSOR_BLOB_HOLD_H_

#include "framework/eager/internal/context_state.h"
#include "vm/blob.h"

namespace sluice::eager::internal {

// The reference holds the tensor (and so its storage) and drops that hold when it goes.
// Named, so that Context::FromBlob can tell such a reference (std::get_deleter) and return
// the tensor itself instead of adopting its blob a second time.
struct TensorBlobHold {
  TensorState* state;
  void operator()(vm::Blob*) const { state->Unref(); }
};

}  // namespace sluice::eager::internal

#endif  // SLUICE_FRAMEWORK_EAGER_INTERNAL_TENSOR_BLOB_HOLD_H_
