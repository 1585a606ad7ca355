#include "tools/interrupt_watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice::tools {

namespace {

// The handler's only state: where to write the signal number. A signal handler can reach
// nothing else safely; -1 when no watcher is installed.
std::atomic<int> g_signal_fd{-1};
struct sigaction g_previous_int, g_previous_term;

extern "C" void OnInterrupt(int signo) {
  const int saved_errno = errno;
  const int fd = g_signal_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(signo);
    ssize_t ignored = write(fd, &byte, 1);  // async-signal-safe; a full pipe drops it
    (void)ignored;
  }
  // A second signal ends the process: the clean shutdown may be what hangs.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  errno = saved_errno;
}

}  // namespace

absl::StatusOr<std::unique_ptr<InterruptWatcher>> InterruptWatcher::Install() {
  if (g_signal_fd.load(std::memory_order_relaxed) >= 0) {
    return absl::FailedPreconditionError("an interrupt watcher is already installed");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("interrupt watcher: pipe: ", std::strerror(errno)));
  }
  std::unique_ptr<InterruptWatcher> watcher(new InterruptWatcher(fds[0], fds[1]));
  g_signal_fd.store(fds[1], std::memory_order_relaxed);
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGINT, &action, &g_previous_int) != 0 ||
      sigaction(SIGTERM, &action, &g_previous_term) != 0) {
    return absl::InternalError(
        absl::StrCat("interrupt watcher: sigaction: ", std::strerror(errno)));
  }
  watcher->thread_ = std::thread([w = watcher.get()] { w->Watch(); });
  return watcher;
}

InterruptWatcher::InterruptWatcher(int read_fd, int write_fd)
    : read_fd_(read_fd), write_fd_(write_fd) {}

InterruptWatcher::~InterruptWatcher() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
  g_signal_fd.store(-1, std::memory_order_relaxed);
  const unsigned char stop = 0;  // wakes the thread; no signal has number 0
  ssize_t ignored = write(write_fd_, &stop, 1);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
  close(read_fd_);
  close(write_fd_);
}

void InterruptWatcher::Watch() {
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = read(read_fd_, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == 0) return;
    std::function<void()> action;
    {
      absl::MutexLock lock(&mu_);
      if (signal_ != 0) continue;  // the first signal decides
      signal_ = byte;
      action = action_;
    }
    if (action) action();
  }
}

void InterruptWatcher::SetAction(std::function<void()> action) {
  bool run_now = false;
  {
    absl::MutexLock lock(&mu_);
    action_ = action;
    run_now = signal_ != 0;
  }
  if (run_now && action) action();
}

int InterruptWatcher::signal() const {
  absl::MutexLock lock(&mu_);
  return signal_;
}

std::string InterruptWatcher::SignalName(int signo) {
  if (signo == SIGINT) return "SIGINT";
  if (signo == SIGTERM) return "SIGTERM";
  return absl::StrCat("signal ", signo);
}

std::string InterruptWatcher::Message() const {
  return absl::StrCat("interrupted by ", SignalName(signal()), ": in-flight work cancelled");
}

}  // namespace sluice::tools
