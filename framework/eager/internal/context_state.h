// The state behind eager::Context and eager::Tensor handles.
//
// Ownership. Context handles share a ContextState through std::shared_ptr. Tensors do not
// hold that count: each TensorState is counted among the context's `live_tensors` (under
// `mu`, which every op call and every tensor death takes anyway), and while any is alive
// the state holds a shared_ptr to itself (`self`), so the Runtime and the VM outlive every
// tensor as before. A TensorState is one object with one atomic count of its own (the
// Tensor handles and the BlobRefs Tensor::blob() hands out); its memory comes from and
// returns to a free list of the context's, under the same lock that creates or releases
// it. Per eager op that is one allocation and free and two atomic count updates less than a
// std::make_shared state holding a shared_ptr to its context.
#ifndef SLUICE_FRAMEWORK_EAGER_INTERNAL_CONTEXT_STATE_H_
#define SLUICE_FRAMEWORK_EAGER_INTERNAL_CONTEXT_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "core/device.h"
#include "core/plain_mutex.h"
#include "ep/runtime.h"
#include "framework/eager/internal/grad_hook.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "vm/blob.h"
#include "vm/instructions_builder.h"
#include "vm/owned_blob.h"
#include "vm/virtual_machine.h"

namespace sluice::eager::internal {

class TensorState;

// Thread-safe: `mu` guards the builder and dispatcher (one producer at a time) and the
// tensor bookkeeping; the rest is immutable after creation or atomic.
struct ContextState : std::enable_shared_from_this<ContextState> {
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

  // Tensor states alive in this context, and the reference that keeps the context alive
  // for them (set while live_tensors > 0).
  int64_t live_tensors ABSL_GUARDED_BY(mu) = 0;
  std::shared_ptr<ContextState> self ABSL_GUARDED_BY(mu);
  // Memory of dead tensor states, for the next ones (a singly linked list through the
  // blocks; at most kMaxFreeTensors).
  struct FreeBlock {
    FreeBlock* next;
  };
  FreeBlock* free_tensors ABSL_GUARDED_BY(mu) = nullptr;
  int free_tensor_count ABSL_GUARDED_BY(mu) = 0;
  static constexpr int kMaxFreeTensors = 4096;

  // Autograd's recorder (grad_hook.h), installed once by InstallGradRecorder; null until a
  // tensor of this context requires a gradient. Acquire loads on every op call.
  std::atomic<GradRecorder*> grad_recorder{nullptr};
  // Installs `recorder` unless one is installed already; the installed one either way.
  GradRecorder* InstallGradRecorder(std::unique_ptr<GradRecorder> recorder);

 private:
  std::unique_ptr<GradRecorder> grad_recorder_owner_ ABSL_GUARDED_BY(mu);
};

// One tensor: its blob and the context it lives in. Created by TensorState::New, counted
// by the Tensor handles and BlobRefs that refer to it (Ref/Unref); the last Unref submits
// a Release of the blob's storage on its last used stream, drops the blob's hold and
// returns the memory to the context, under one hold of the context's lock (the context's
// self-reference, when this was its last tensor, goes after the unlock). The blob is held
// without reference counting (vm::OwnedBlob). A reference is only ever made from another
// one (Ref on a state someone holds), never from a bare pointer: Unref relies on it.
//
// Thread-safe: Ref and Unref from any thread; the grad meta is set once (InstallGradMeta)
// and the version only grows (atomics); the rest is immutable while referenced.
class TensorState {
 public:
  // A state with one reference, counted among `ctx`'s live tensors. `ctx` must be alive
  // (the caller holds a Context handle or a tensor of it).
  static TensorState* New(ContextState* ctx, vm::OwnedBlob blob) ABSL_LOCKS_EXCLUDED(ctx->mu);
  // The same, for a caller that holds `ctx->mu`.
  static TensorState* NewLocked(ContextState* ctx, vm::OwnedBlob blob)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ctx->mu);

  TensorState(const TensorState&) = delete;
  TensorState& operator=(const TensorState&) = delete;

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Drops a reference; the last one ends the tensor (see above). A sole holder sees a count
  // of 1 and nobody can add to it (a new reference is made from an existing one), so it
  // skips the atomic decrement — a locked instruction per eager temporary; the acquire
  // load orders this end after what earlier holders did before dropping theirs.
  void Unref() {
    if (refs_.load(std::memory_order_acquire) == 1 ||
        refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      Die();
    }
  }

  // A state with one reference that shares `of`'s blob (and version) and holds a
  // reference to it: a tensor over the same storage with no history of its own
  // (autograd's Detach). `of` may itself be an alias (the new one then shares its owner).
  static TensorState* NewAlias(TensorState* of) ABSL_LOCKS_EXCLUDED(of->context()->mu);

  ContextState* context() const { return context_; }
  const vm::OwnedBlob& blob() const { return alias_of_ != nullptr ? alias_of_->blob_ : blob_; }

  // Autograd's meta (grad_hook.h), or null. Acquire: the meta is built before it is set.
  GradMeta* grad_meta() const { return grad_meta_.load(std::memory_order_acquire); }
  bool requires_grad() const {
    const GradMeta* meta = grad_meta();
    return meta != nullptr && meta->requires_grad.load(std::memory_order_relaxed);
  }
  // Takes `meta` as this tensor's (release) unless one is set already: then returns false
  // and the caller keeps `meta`.
  bool InstallGradMeta(GradMeta* meta);
  // The storage's version: bumped by every in-place write (Context::CallInto), shared by
  // the aliases of one storage. Acquire/release: a reader that sees a bump sees the write's
  // submission before it.
  uint32_t version() const { return Owner()->version_.load(std::memory_order_acquire); }
  void BumpVersion() { Owner()->version_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  TensorState(ContextState* ctx, vm::OwnedBlob blob) : context_(ctx), blob_(std::move(blob)) {}
  ~TensorState() = default;
  void Die();
  const TensorState* Owner() const { return alias_of_ != nullptr ? alias_of_ : this; }
  TensorState* Owner() { return alias_of_ != nullptr ? alias_of_ : this; }

  std::atomic<int32_t> refs_{1};
  ContextState* const context_;
  vm::OwnedBlob blob_;               // not reassigned (Die may abandon it); empty in an alias
  TensorState* alias_of_ = nullptr;  // an alias: the state owning the blob (referenced)
  std::atomic<GradMeta*> grad_meta_{nullptr};  // owned
  std::atomic<uint32_t> version_{0};           // the owner's counts
};

}  // namespace sluice::eager::internal

#endif  // SLUICE_FRAMEWORK_EAGER_INTERNAL_CONTEXT_STATE_H_
