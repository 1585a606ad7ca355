#include "vm/blob_access_waiter.h"

#include "vm/producer_port.h"

namespace sluice::vm {

absl::AnyInvocable<void(const Instruction&)> BlobAccessWaiter::OnRetire() {
  return [this](const Instruction& instruction) {
    result_ = instruction.status;
    ProducerPort(vm_).NoteHostWaited(instruction);
    done_.Notify();
  };
}

absl::Status BlobAccessWaiter::Wait() {
  done_.WaitForNotification();
  return result_;
}

}  // namespace sluice::vm
