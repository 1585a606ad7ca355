#include "framework/eager/tensor.h"

#include "core/status.h"
#include "framework/eager/internal/context_state.h"
#include "framework/eager/internal/tensor_blob_hold.h"
#include "vm/blob_access_waiter.h"
#include "vm/stream.h"

namespace sluice::eager {

void Tensor::Hold(internal::TensorState* state) { state->Ref(); }
void Tensor::Drop(internal::TensorState* state) { state->Unref(); }

Device Tensor::device() const { return state_->blob()->device(); }
DataType Tensor::dtype() const { return state_->blob()->dtype(); }
const Shape& Tensor::shape() const { return state_->blob()->shape(); }

vm::BlobRef Tensor::blob() const {
  // The reference holds the tensor (and so its storage): its deleter drops that hold.
  internal::TensorState* state = state_;
  state->Ref();
  return vm::BlobRef(state->blob().get(), internal::TensorBlobHold{state});
}

// Tensor::context and Tensor::To make or call a Context: context.cc defines them, with it.

absl::StatusOr<std::vector<uint8_t>> Tensor::ToBytes() const {
  if (!valid()) return absl::InvalidArgumentError("ToBytes: empty Tensor");
  internal::ContextState& ctx = *state_->context();
  SLUICE_ASSIGN_OR_RETURN(vm::Stream * home, ctx.vm->GetStream(StreamKey{device()}));
  if (!vm::VirtualMachine::HostAccessible(*home)) {
    SLUICE_ASSIGN_OR_RETURN(Tensor host, To(Device()));
    return host.ToBytes();
  }
  std::vector<uint8_t> out;
  out.reserve(state_->blob()->bytes());  // allocated before the lock
  vm::BlobAccessWaiter waiter(ctx.vm.get());
  // Taken before the lock: were it the tensor's last reference, dropping it would
  // release the tensor, which takes the lock.
  const vm::BlobRef ref = blob();
  {
    // Submit under the lock, wait outside it: other threads keep issuing ops meanwhile.
    PlainMutexLock lock(&ctx.mu);
    SLUICE_RETURN_IF_ERROR(ctx.builder->SubmitRead(ref, &out, &waiter));
  }
  SLUICE_RETURN_IF_ERROR(waiter.Wait());
  return out;
}

absl::Status Tensor::WaitUntilReady(absl::FunctionRef<absl::Status()> interrupt,
                                    absl::Duration poll) const {
  if (!valid()) return absl::InvalidArgumentError("WaitUntilReady: empty Tensor");
  internal::ContextState& ctx = *state_->context();
  vm::BlobAccessWaiter waiter(ctx.vm.get());
  const vm::BlobRef ref = blob();
  {
    PlainMutexLock lock(&ctx.mu);
    // An empty read: it retires once every producer of the tensor has (on every device).
    SLUICE_RETURN_IF_ERROR(ctx.builder->WaitBlob(ref, waiter.OnRetire()));
  }
  while (!waiter.WaitFor(poll)) {
    if (absl::Status interrupted = interrupt(); !interrupted.ok()) {
      waiter.Abandon();
      return interrupted;
    }
  }
  return waiter.Wait();
}

}  // namespace sluice::eager
