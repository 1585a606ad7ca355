// BlobAccessWaiter: lets a host thread block until one AccessBlob instruction has retired,
// with the submission and the wait apart — so a caller that must submit under a lock of
// its own (to keep its submission order) waits after releasing it, never blocking under
// the lock. It also tells the VM's sync checker that the host waited for the access.
//
//   BlobAccessWaiter waiter(vm);
//   SLUICE_RETURN_IF_ERROR(builder.AccessBlob(blob, write, callback, waiter.OnRetire()));
//   // ... release locks ...
//   SLUICE_RETURN_IF_ERROR(waiter.Wait());
#ifndef SLUICE_VM_BLOB_ACCESS_WAITER_H_
#define SLUICE_VM_BLOB_ACCESS_WAITER_H_

#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "vm/instruction.h"

namespace sluice::vm {

class VirtualMachine;

// One waiter per access. OnRetire is called once, by the submitting thread; the callback it
// returns runs on the VM's scheduler; Wait is called once, by any thread, and only when the
// access was submitted (a failed submission never retires: do not wait then). The callback
// holds what it notifies (shared with the waiter), so the waiter may go away as soon as Wait
// returns, while the callback is still returning from its notification.
class BlobAccessWaiter {
 public:
  explicit BlobAccessWaiter(VirtualMachine* vm);
  ~BlobAccessWaiter();
  BlobAccessWaiter(const BlobAccessWaiter&) = delete;
  BlobAccessWaiter& operator=(const BlobAccessWaiter&) = delete;

  // The `on_retire` callback to pass to InstructionsBuilder::AccessBlob.
  absl::AnyInvocable<void(const Instruction&)> OnRetire();
  // Blocks until the access retired; returns its status (a poisoned input's error, or the
  // callback's).
  absl::Status Wait();
  // Blocks until the access retired or `timeout` passed; whether it retired (then Wait()
  // returns at once). A waiter may be destroyed without waiting: the callback holds what
  // it notifies, so abandoning an access that has not retired is safe.
  bool WaitFor(absl::Duration timeout);
  // Gives up on the access: when it retires later, the sync checker is not told that the
  // host waited for it (nobody did). Call instead of Wait, from the waiting thread.
  void Abandon();

 private:
  struct State;  // the access's status and the notification (see the class comment)

  VirtualMachine* const vm_;
  const std::shared_ptr<State> state_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_BLOB_ACCESS_WAITER_H_
