#include "vm/blob_access_waiter.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "vm/producer_port.h"

namespace sluice::vm {

struct BlobAccessWaiter::State {
  absl::Notification done;
  absl::Status result;  // written before `done` is notified
  // Set by Abandon on the waiting thread, read by the retire callback on the scheduler:
  // relaxed is enough, the flag orders nothing else (at worst a retirement racing the
  // abandon still notes the wait).
  std::atomic<bool> abandoned{false};
};

BlobAccessWaiter::BlobAccessWaiter(VirtualMachine* vm)
    : vm_(vm), state_(std::make_shared<State>()) {}

BlobAccessWaiter::~BlobAccessWaiter() = default;

absl::AnyInvocable<void(const Instruction&)> BlobAccessWaiter::OnRetire() {
  // The callback keeps the state alive: Notify may still be unlocking the notification's
  // mutex when the waiter, woken, returns and is destroyed.
  return [state = state_, vm = vm_](const Instruction& instruction) {
    state->result = instruction.status;
    if (!state->abandoned.load(std::memory_order_relaxed)) {
      ProducerPort(vm).NoteHostWaited(instruction);
    }
    state->done.Notify();
  };
}

void BlobAccessWaiter::Abandon() { state_->abandoned.store(true, std::memory_order_relaxed); }

bool BlobAccessWaiter::WaitFor(absl::Duration timeout) {
  return state_->done.WaitForNotificationWithTimeout(timeout);
}

absl::Status BlobAccessWaiter::Wait() {
  state_->done.WaitForNotification();
  return state_->result;
}

}  // namespace sluice::vm
