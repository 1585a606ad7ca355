#include "vm/blob_access_waiter.h"

#include "absl/synchronization/notification.h"
#include "vm/producer_port.h"

namespace sluice::vm {

struct BlobAccessWaiter::State {
  absl::Notification done;
  absl::Status result;  // written before `done` is notified
};

BlobAccessWaiter::BlobAccessWaiter(VirtualMachine* vm)
    : vm_(vm), state_(std::make_shared<State>()) {}

BlobAccessWaiter::~BlobAccessWaiter() = default;

absl::AnyInvocable<void(const Instruction&)> BlobAccessWaiter::OnRetire() {
  // The callback keeps the state alive: Notify may still be unlocking the notification's
  // mutex when the waiter, woken, returns and is destroyed.
  return [state = state_, vm = vm_](const Instruction& instruction) {
    state->result = instruction.status;
    ProducerPort(vm).NoteHostWaited(instruction);
    state->done.Notify();
  };
}

bool BlobAccessWaiter::WaitFor(absl::Duration timeout) {
  return state_->done.WaitForNotificationWithTimeout(timeout);
}

absl::Status BlobAccessWaiter::Wait() {
  state_->done.WaitForNotification();
  return state_->result;
}

}  // namespace sluice::vm
