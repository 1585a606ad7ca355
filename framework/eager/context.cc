#include "framework/eager/context.h"

#include <new>
#include <optional>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/eager/internal/context_state.h"
#include "framework/eager/internal/tensor_access.h"
#include "framework/eager/internal/tensor_blob_hold.h"
#include "framework/eager/stream_scope.h"
#include "ops/standard_ops.h"
#include "vm/blob_access_waiter.h"
#include "vm/stream.h"

namespace sluice::eager {
namespace internal {

ContextState::~ContextState() {
  // No tensor is alive (each keeps the state alive through `self`).
  {
    PlainMutexLock lock(&mu);
    dispatcher.reset();
    builder.reset();
    while (free_tensors != nullptr) {
      ::operator delete(static_cast<void*>(std::exchange(free_tensors, free_tensors->next)));
    }
  }
  if (vm != nullptr) vm->Shutdown().IgnoreError();  // nobody is left to report it to
  vm.reset();
  runtime.reset();
}

static_assert(sizeof(TensorState) >= sizeof(ContextState::FreeBlock));

GradRecorder* ContextState::InstallGradRecorder(std::unique_ptr<GradRecorder> recorder) {
  PlainMutexLock lock(&mu);
  if (grad_recorder_owner_ == nullptr) {
    grad_recorder_owner_ = std::move(recorder);
    grad_recorder.store(grad_recorder_owner_.get(), std::memory_order_release);
  }
  return grad_recorder_owner_.get();
}

TensorState* TensorState::NewAlias(TensorState* of) {
  TensorState* owner = of->Owner();
  owner->Ref();
  TensorState* alias = New(owner->context_, vm::OwnedBlob());
  alias->alias_of_ = owner;
  return alias;
}

bool TensorState::InstallGradMeta(GradMeta* meta) {
  GradMeta* expected = nullptr;
  return grad_meta_.compare_exchange_strong(expected, meta, std::memory_order_acq_rel);
}

TensorState* TensorState::New(ContextState* ctx, vm::OwnedBlob blob) {
  PlainMutexLock lock(&ctx->mu);
  return NewLocked(ctx, std::move(blob));
}

TensorState* TensorState::NewLocked(ContextState* ctx, vm::OwnedBlob blob) {
  void* memory;
  if (ctx->free_tensors != nullptr) {
    memory = std::exchange(ctx->free_tensors, ctx->free_tensors->next);
    --ctx->free_tensor_count;
  } else {
    memory = ::operator new(sizeof(TensorState));
  }
  if (ctx->live_tensors++ == 0) ctx->self = ctx->shared_from_this();
  return new (memory) TensorState(ctx, std::move(blob));
}

void TensorState::Die() {
  ContextState* const ctx = context_;
  // Ended after the unlock: autograd's meta may hold other tensors, and an alias holds its
  // owner, whose end takes the lock.
  std::unique_ptr<GradMeta> meta(grad_meta_.load(std::memory_order_acquire));
  TensorState* const owner = alias_of_;
  // Dropped after the unlock: it may be the context's last reference (its destructor takes
  // the lock and ends the VM).
  std::shared_ptr<ContextState> last;
  {
    PlainMutexLock lock(&ctx->mu);
    // raw_storage() (Blob's contract: the storage as kernels and builders see it): the
    // blob's Release is this one, so no Release has freed or kept its storage yet.
    if (blob_ && blob_->raw_storage() != nullptr) {
      // Fails only once the VM is shut down; the storage then goes with the blob.
      // The blob's only hold is ours and goes right after (Tensor::blob() references hold
      // this state), so its storage may wait to be recycled. A private blob's run takes
      // our hold over: then there is nothing to drop.
      bool taken = false;
      ctx->builder->Release(blob_.get(), /*dying=*/true, blob_.adopted() ? nullptr : &taken)
          .IgnoreError();
      if (taken) blob_.Abandon();
    }
    // Drops the blob's hold (through the VM's reaper) under the lock: this tensor's count
    // among live_tensors is what keeps the VM alive, and once it is given up below,
    // another thread's last tensor may end the context and the VM at once.
    this->~TensorState();
    if (ctx->free_tensor_count < ContextState::kMaxFreeTensors) {
      auto* block = new (static_cast<void*>(this)) ContextState::FreeBlock{ctx->free_tensors};
      ctx->free_tensors = block;
      ++ctx->free_tensor_count;
    } else {
      ::operator delete(static_cast<void*>(this));
    }
    if (--ctx->live_tensors == 0) last = std::move(ctx->self);
  }
  meta.reset();
  if (owner != nullptr) owner->Unref();
}

}  // namespace internal

absl::StatusOr<Context> Context::Create(ContextOptions options) {
  auto state = std::make_shared<internal::ContextState>();
  SLUICE_ASSIGN_OR_RETURN(state->runtime, ep::Runtime::Create(options.runtime));
  SLUICE_ASSIGN_OR_RETURN(state->vm, vm::VirtualMachine::Create(state->runtime.get(), options.vm));
  SLUICE_RETURN_IF_ERROR(ops::RegisterStandardOps(&state->registry));
  SLUICE_RETURN_IF_ERROR(state->runtime->GetDevice(options.default_device).status());
  state->seed = options.seed;
  PlainMutexLock lock(&state->mu);
  state->builder = std::make_unique<vm::InstructionsBuilder>(state->vm.get());
  state->builder->set_soft_sync(options.soft_sync);
  state->dispatcher =
      std::make_unique<ops::OpDispatcher>(&state->registry, state->vm.get(), state->builder.get());
  state->default_device = options.default_device;
  return Context(std::move(state));
}

Device Context::default_device() const {
  PlainMutexLock lock(&state_->mu);
  return state_->default_device;
}

void Context::set_default_device(Device device) {
  PlainMutexLock lock(&state_->mu);
  state_->default_device = device;
}

int64_t Context::LiveTensors() const {
  PlainMutexLock lock(&state_->mu);
  return state_->live_tensors;
}

vm::VirtualMachine* Context::vm() const { return state_->vm.get(); }
ep::Runtime* Context::runtime() const { return state_->runtime.get(); }
const ops::OpRegistry& Context::registry() const { return state_->registry; }

int64_t Context::NextSeed() {
  // SplitMix64 over a counter: distinct, well-mixed seeds from one context seed.
  uint64_t z =
      state_->seed +
      0x9E3779B97F4A7C15ull * (state_->seed_counter.fetch_add(1, std::memory_order_relaxed) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>((z ^ (z >> 31)) >> 1);
}

absl::StatusOr<Tensor> Context::FromBytes(DataType dtype, const Shape& shape,
                                          absl::Span<const uint8_t> bytes, Device device) {
  SLUICE_ASSIGN_OR_RETURN(vm::Stream * stream, state_->vm->GetStream(StreamKey{device}));
  if (!vm::VirtualMachine::HostAccessible(*stream)) {
    // Stage on the host, then copy with memcpy_h2d on the device's copy stream.
    SLUICE_ASSIGN_OR_RETURN(Tensor host, FromBytes(dtype, shape, bytes, Device()));
    return host.To(device);
  }
  SLUICE_ASSIGN_OR_RETURN(vm::BlobRef blob, state_->vm->NewBlob(stream, dtype, shape));
  vm::BlobAccessWaiter waiter(state_->vm.get());
  {
    // Submit under the lock (the builder's order), wait outside it: other threads keep
    // issuing ops meanwhile. `bytes` outlives the copy, which Wait waits for.
    PlainMutexLock lock(&state_->mu);
    SLUICE_RETURN_IF_ERROR(state_->builder->SubmitWrite(blob, bytes, &waiter));
  }
  SLUICE_RETURN_IF_ERROR(waiter.Wait());
  return Tensor(internal::TensorState::New(state_.get(), vm::OwnedBlob(std::move(blob))));
}

namespace {

// How a call of this thread is dispatched: ops without inputs on `device` (else the
// context's default), on the StreamScope's stream where the op lands on its device.
ops::DispatchOptions DispatchOptionsFor(const internal::ContextState& state,
                                        std::optional<Device> device)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  ops::DispatchOptions options;
  options.default_device = device.value_or(state.default_device);
  if (const StreamKey* scoped = StreamScope::Current()) options.preferred_stream = *scoped;
  return options;
}

// After an op ran on inputs `in_states` (per slot `in_slots`), when autograd's `recorder`
// is installed: records it if some input requires a gradient, and adopts any output the
// recorder replaced by an alias (before returning its error, so the alias is dropped with
// the rest).
absl::Status RecordForAutograd(internal::GradRecorder& recorder, absl::string_view op,
                               const vm::AttrMap& attrs,
                               absl::Span<internal::TensorState* const> in_states,
                               absl::Span<const int> in_slots, absl::Span<Tensor> outputs,
                               absl::Span<const int> out_slots) {
  bool wanted = false;
  for (const internal::TensorState* state : in_states) {
    wanted = wanted || state->requires_grad();
  }
  if (!wanted) return absl::OkStatus();
  absl::InlinedVector<internal::TensorState*, 4> out_states;
  for (const Tensor& t : outputs) out_states.push_back(internal::TensorAccess::State(t));
  const absl::Status recorded =
      recorder.Record(op, attrs, in_states, in_slots, absl::MakeSpan(out_states), out_slots);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (out_states[i] != internal::TensorAccess::State(outputs[i])) {
      outputs[i] = internal::TensorAccess::Adopt(out_states[i]);
    }
  }
  return recorded;
}

absl::Status CheckTensors(absl::string_view op, const std::vector<std::vector<Tensor>>& slots,
                          absl::string_view role, ops::SlotBlobs* blobs) {
  blobs->resize(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    (*blobs)[s].reserve(slots[s].size());
    for (size_t i = 0; i < slots[s].size(); ++i) {
      if (!slots[s][i].valid()) {
        return absl::InvalidArgumentError(
            absl::StrCat("op '", op, "': ", role, " ", s, "[", i, "] is an empty Tensor"));
      }
      (*blobs)[s].push_back(slots[s][i].blob());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Context::CheckOwnInput(const internal::ContextState* state, absl::string_view op,
                                    const Tensor& t) {
  if (t.state_->context() == state) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("op '", op, "': an input belongs to another eager context"));
}

absl::StatusOr<ops::SlotBlobs> Context::Dispatch(absl::string_view op, const ops::SlotBlobs& in,
                                                 const vm::AttrMap& attrs,
                                                 std::optional<Device> device) {
  PlainMutexLock lock(&state_->mu);
  return state_->dispatcher->Call(op, in, attrs, DispatchOptionsFor(*state_, device));
}

absl::StatusOr<std::vector<Tensor>> Context::Call(absl::string_view op,
                                                  const std::vector<std::vector<Tensor>>& inputs,
                                                  const vm::AttrMap& attrs,
                                                  std::optional<Device> device) {
  ops::SlotBlobs in;
  SLUICE_RETURN_IF_ERROR(CheckTensors(op, inputs, "input", &in));
  for (const std::vector<Tensor>& slot : inputs) {
    for (const Tensor& t : slot) SLUICE_RETURN_IF_ERROR(CheckOwnInput(state_.get(), op, t));
  }
  absl::StatusOr<ops::SlotBlobs> out = Dispatch(op, in, attrs, device);
  if (!out.ok()) return out.status();
  std::vector<Tensor> tensors;
  size_t n = 0;
  for (const vm::BlobList& slot : *out) n += slot.size();
  tensors.reserve(n);  // nothing below allocates for the vector under the lock
  {
    PlainMutexLock lock(&state_->mu);
    for (vm::BlobList& slot : *out) {
      for (vm::BlobRef& blob : slot) {
        tensors.push_back(
            Tensor(internal::TensorState::NewLocked(state_.get(), vm::OwnedBlob(std::move(blob)))));
      }
    }
  }
  if (internal::GradRecorder* recorder = state_->grad_recorder.load(std::memory_order_acquire);
      recorder != nullptr) {
    absl::InlinedVector<internal::TensorState*, 4> in_states;
    absl::InlinedVector<int, 4> in_slots, out_slots;
    for (const std::vector<Tensor>& slot : inputs) {
      in_slots.push_back(static_cast<int>(slot.size()));
      for (const Tensor& t : slot) in_states.push_back(t.state_);
    }
    for (const vm::BlobList& slot : *out) out_slots.push_back(static_cast<int>(slot.size()));
    SLUICE_RETURN_IF_ERROR(RecordForAutograd(*recorder, op, attrs, in_states, in_slots,
                                             absl::MakeSpan(tensors), out_slots));
  }
  return tensors;
}

absl::StatusOr<Tensor> Context::CallSingle(absl::string_view op, absl::Span<const Tensor> inputs,
                                           const vm::AttrMap& attrs, std::optional<Device> device) {
  absl::InlinedVector<const Tensor*, 4> pointers;
  for (const Tensor& t : inputs) pointers.push_back(&t);
  return CallSingleIn(state_.get(), op, pointers, attrs, device);
}

absl::StatusOr<Tensor> Context::CallSingleIn(internal::ContextState* state, absl::string_view op,
                                             absl::Span<const Tensor* const> inputs,
                                             const vm::AttrMap& attrs,
                                             std::optional<Device> device) {
  // Raw pointers: `inputs` keep the blobs alive for the call.
  absl::InlinedVector<vm::Blob*, 4> in;
  for (size_t s = 0; s < inputs.size(); ++s) {
    const Tensor& t = *inputs[s];
    if (!t.valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op, "': input ", s, "[0] is an empty Tensor"));
    }
    if (t.state_->context() != state) SLUICE_RETURN_IF_ERROR(CheckOwnInput(state, op, t));
    in.push_back(t.state_->blob().get());
  }
  Tensor result;
  {
    // The output's tensor state is made under the same hold as the call.
    PlainMutexLock lock(&state->mu);
    absl::StatusOr<vm::OwnedBlob> out =
        state->dispatcher->CallSingle(op, in, attrs, DispatchOptionsFor(*state, device));
    if (!out.ok()) return out.status();
    result = Tensor(internal::TensorState::NewLocked(state, *std::move(out)));
  }
  if (internal::GradRecorder* recorder = state->grad_recorder.load(std::memory_order_acquire);
      recorder != nullptr) {
    absl::InlinedVector<internal::TensorState*, 4> in_states;
    for (const Tensor* t : inputs) in_states.push_back(t->state_);
    const absl::InlinedVector<int, 4> in_slots(inputs.size(), 1);
    const int out_slots[] = {1};
    SLUICE_RETURN_IF_ERROR(RecordForAutograd(*recorder, op, attrs, in_states, in_slots,
                                             absl::MakeSpan(&result, 1), out_slots));
  }
  return result;
}

absl::Status Context::CallInto(absl::string_view op, const std::vector<std::vector<Tensor>>& inputs,
                               const std::vector<std::vector<Tensor>>& outputs,
                               const vm::AttrMap& attrs) {
  ops::SlotBlobs in, out;
  SLUICE_RETURN_IF_ERROR(CheckTensors(op, inputs, "input", &in));
  SLUICE_RETURN_IF_ERROR(CheckTensors(op, outputs, "output", &out));
  absl::InlinedVector<internal::TensorState*, 4> written, read;
  bool tracked = false;
  for (const std::vector<Tensor>& slot : outputs) {
    for (const Tensor& t : slot) {
      written.push_back(t.state_);
      tracked = tracked || t.state_->requires_grad();
    }
  }
  for (const std::vector<Tensor>& slot : inputs) {
    for (const Tensor& t : slot) {
      read.push_back(t.state_);
      tracked = tracked || t.state_->requires_grad();
    }
  }
  if (internal::GradRecorder* recorder = state_->grad_recorder.load(std::memory_order_acquire);
      recorder != nullptr && tracked) {
    SLUICE_RETURN_IF_ERROR(recorder->CheckInPlace(op, read, written));
  }
  {
    PlainMutexLock lock(&state_->mu);
    SLUICE_RETURN_IF_ERROR(state_->dispatcher->CallInto(op, in, out, attrs,
                                                        DispatchOptionsFor(*state_, std::nullopt)));
  }
  // A saved copy of any of them is now stale (autograd compares versions).
  for (internal::TensorState* state : written) state->BumpVersion();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Context::LaunchKernel(
    const vm::OpKernel& kernel, vm::Stream* stream, absl::Span<const Tensor> inputs,
    absl::Span<const Tensor> updated, absl::Span<const OutputSpec> outputs,
    std::shared_ptr<const vm::AttrMap> attrs) {
  // The instruction's operands: reads [inputs..., updated...], writes [outputs..., updated...].
  absl::InlinedVector<vm::Blob*, 8> reads, writes;
  auto check = [&](absl::Span<const Tensor> group, absl::string_view role) -> absl::Status {
    for (size_t i = 0; i < group.size(); ++i) {
      if (!group[i].valid()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", kernel.name(), "': ", role, " ", i, " is an empty Tensor"));
      }
      SLUICE_RETURN_IF_ERROR(CheckOwnInput(state_.get(), kernel.name(), group[i]));
      reads.push_back(group[i].state_->blob().get());
    }
    return absl::OkStatus();
  };
  SLUICE_RETURN_IF_ERROR(check(inputs, "input"));
  SLUICE_RETURN_IF_ERROR(check(updated, "updated tensor"));
  std::vector<Tensor> results;
  results.reserve(outputs.size());
  absl::Status status;
  {
    PlainMutexLock lock(&state_->mu);
    for (const OutputSpec& spec : outputs) {
      absl::StatusOr<vm::OwnedBlob> blob = state_->vm->NewOwnedBlob(stream, spec.dtype, spec.shape);
      if (!blob.ok()) {
        status = blob.status();
        break;
      }
      writes.push_back(blob->get());
      results.push_back(Tensor(internal::TensorState::NewLocked(state_.get(), *std::move(blob))));
    }
    if (status.ok()) {
      for (const Tensor& t : updated) writes.push_back(t.state_->blob().get());
      status = state_->builder->CallPtrs(kernel, reads, writes, std::move(attrs), stream);
    }
  }
  // On an error the new tensors end here, outside the lock (their end takes it).
  if (!status.ok()) return status;
  for (const Tensor& t : updated) t.state_->BumpVersion();
  return results;
}

absl::Status Context::WhenDone(absl::AnyInvocable<void()> callback) {
  PlainMutexLock lock(&state_->mu);
  return state_->builder->Barrier(std::move(callback));
}

absl::Status Context::Sync() { return state_->vm->Sync(); }

absl::StatusOr<Tensor> Context::FromBlob(vm::BlobRef blob) {
  if (blob == nullptr) return absl::InvalidArgumentError("FromBlob: null blob");
  if (const auto* hold = std::get_deleter<internal::TensorBlobHold>(blob); hold != nullptr) {
    if (hold->state->context() != state_.get()) {
      return absl::InvalidArgumentError(
          absl::StrCat("FromBlob: ", blob->DebugName(), " is a tensor of another eager context"));
    }
    return internal::TensorAccess::Share(hold->state);
  }
  if (blob->lazy()) {
    return absl::InvalidArgumentError(
        absl::StrCat("FromBlob: ", blob->DebugName(), " is a precomputed graph's lazy blob"));
  }
  if (blob->storage() == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("FromBlob: ", blob->DebugName(), " was released"));
  }
  if (!state_->vm->OwnsStorage(*blob)) {
    return absl::InvalidArgumentError(
        absl::StrCat("FromBlob: ", blob->DebugName(), " is a blob of another VM"));
  }
  {
    // Work on the blob that another builder holds back reaches the engine before this
    // context's next op (the builder's buffered path hands over only its own buffer).
    PlainMutexLock lock(&state_->mu);
    state_->builder->Flush();
  }
  // The caller's reference becomes the new tensor's hold on the blob.
  return Tensor(internal::TensorState::New(state_.get(), vm::OwnedBlob(std::move(blob))));
}

// The members of Tensor (tensor.h) that make or call a Context live here, with it: the rest
// of Tensor needs no Context.

Context Tensor::context() const { return Context(state_->context()->shared_from_this()); }

absl::StatusOr<Tensor> Tensor::To(Device device) const {
  if (!valid()) return absl::InvalidArgumentError("To: empty Tensor");
  const Device from = this->device();
  if (from == device) return *this;
  Context ctx = context();
  if (from.type() == DeviceType::kCpu) {
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<Tensor> out,
        ctx.Call("memcpy_h2d", {{*this}}, vm::AttrMap().Set("device", device.ToString())));
    return out[0];
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> host, ctx.Call("memcpy_d2h", {{*this}}));
  if (device.type() == DeviceType::kCpu) return host[0];
  return host[0].To(device);
}

}  // namespace sluice::eager
