// The state behind eager::Context and eager::Tensor handles (shared by both).
#ifndef SLUICE_FRAMEWORK_EAGER_INTERNAL_CONTEXT_STATE_H_
#define SLUICE_FRAMEWORK_EAGER_INTERNAL_CONTEXT_STATE_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "core/device.h"
#include "core/plain_mutex.h"
#include "ep/runtime.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "vm/blob.h"
#include "vm/instructions_builder.h"
#include "vm/owned_blob.h"
#include "vm/virtual_machine.h"

namespace sluice::eager::internal {

// Thread-safe: `mu` guards the builder and dispatcher (one producer at a time), the rest is
// immutable after creation or atomic.
struct ContextState {
  ~ContextState();

  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<vm::VirtualMachine> vm;
  ops::OpRegistry registry;
  uint64_t seed = 0;
  std::atomic<uint64_t> seed_counter{0};

  PlainMutex mu;  // per op and per released tensor: see core/plain_mutex.h
  std::unique_ptr<vm::InstructionsBuilder> builder ABSL_GUARDED_BY(mu);
  std::unique_ptr<ops::OpDispatcher> dispatcher ABSL_GUARDED_BY(mu);
  Device default_device ABSL_GUARDED_BY(mu);
};

// One tensor: its blob and the context that keeps the VM alive for it. Destroying it
// submits a Release of the blob's storage, then drops the blob. The blob is held without
// reference counting (vm::OwnedBlob); Tensor::blob() hands out BlobRefs that keep this
// state, and so the blob's storage, alive.
struct TensorState {
  TensorState(std::shared_ptr<ContextState> context, vm::OwnedBlob blob)
      : context(std::move(context)), blob(std::move(blob)) {}
  TensorState(std::shared_ptr<ContextState> context, vm::BlobRef blob)
      : context(std::move(context)), blob(std::move(blob)) {}
  ~TensorState();
  TensorState(const TensorState&) = delete;
  TensorState& operator=(const TensorState&) = delete;

  // Declared first, destroyed last: the blob's hold goes back through the context's VM.
  const std::shared_ptr<ContextState> context;
  vm::OwnedBlob blob;  // not reassigned (the destructor may abandon it)
};

}  // namespace sluice::eager::internal

#endif  // SLUICE_FRAMEWORK_EAGER_INTERNAL_CONTEXT_STATE_H_
