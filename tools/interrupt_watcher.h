// InterruptWatcher: SIGINT and SIGTERM for the CLI's long commands, turned from asynchronous
// signals into a call on a thread of its own, where stopping work is allowed (a signal
// handler may call almost nothing: no locks, no allocation, no VM).
//
// The first signal runs the action set with SetAction (typically: cancel the work in flight,
// VirtualMachine::Shutdown(kCancel)); the command then sees its work fail, asks signal(),
// prints a line naming the signal and exits with 128 + the signal's number, after a clean
// shutdown (so nothing is left running and the leak checker sees every allocation freed). A
// second signal ends the process at once (the default action is restored after the first),
// for when the clean shutdown itself does not finish.
//
// One watcher per process (signal dispositions are process-wide; Install refuses a second).
// Thread-safe: SetAction and signal() from any thread; the action runs on the watcher's
// thread, at most once.
#ifndef SLUICE_TOOLS_INTERRUPT_WATCHER_H_
#define SLUICE_TOOLS_INTERRUPT_WATCHER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace sluice::tools {

class InterruptWatcher {
 public:
  // Installs the handlers and starts the thread. FailedPrecondition when a watcher exists;
  // Internal when the pipe, the handlers or the thread cannot be made.
  static absl::StatusOr<std::unique_ptr<InterruptWatcher>> Install();
  // Restores the previous handlers and joins the thread.
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  // What to do at the first signal; replaces the previous action. When a signal already came,
  // runs `action` now, on the caller's thread (the work it stops may have started after the
  // signal). Null: nothing.
  void SetAction(std::function<void()> action);

  // The first signal received (SIGINT or SIGTERM), or 0.
  int signal() const;
  // "SIGINT", "SIGTERM".
  static std::string SignalName(int signo);
  // One line for the user: "interrupted by SIGTERM: in-flight work cancelled".
  std::string Message() const;

 private:
  InterruptWatcher(int read_fd, int write_fd);
  void Watch();

  const int read_fd_;
  const int write_fd_;
  mutable absl::Mutex mu_;
  int signal_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> action_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_INTERRUPT_WATCHER_H_
