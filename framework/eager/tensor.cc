#include "framework/eager/tensor.h"

#include "core/status.h"
#include "framework/eager/context.h"
#include "framework/eager/internal/context_state.h"
#include "framework/eager/internal/tensor_access.h"
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
