// Test-only kernels and helpers for the VM tests: a thread-safe order log, a one-shot gate,
// and ProbeKernel (with the GateKernel, LogKernel, FailKernel and SlowKernel flavours), whose
// launches and host work are logged, can block on a gate, sleep, fail, read the first float of
// their first input and fill their outputs with the "value" attribute.
#ifndef SLUICE_TESTS_VM_TEST_KERNELS_H_
#define SLUICE_TESTS_VM_TEST_KERNELS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "vm/attrs.h"
#include "vm/blob.h"
#include "vm/kernel.h"

// Status assertions that print the status on failure; `expr` is an absl::Status or StatusOr.
#define SLUICE_ASSERT_OK(expr)                                                     \
  do {                                                                             \
    const absl::Status sluice_test_status = ::sluice::vm::testing::ToStatus(expr); \
    ASSERT_TRUE(sluice_test_status.ok()) << sluice_test_status;                    \
  } while (false)
#define SLUICE_EXPECT_OK(expr)                                                     \
  do {                                                                             \
    const absl::Status sluice_test_status = ::sluice::vm::testing::ToStatus(expr); \
    EXPECT_TRUE(sluice_test_status.ok()) << sluice_test_status;                    \
  } while (false)

namespace sluice::vm::testing {

inline absl::Status ToStatus(const absl::Status& status) { return status; }
template <typename T>
absl::Status ToStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// How long a test waits for something a correct VM does at once before declaring it lost.
// Only a guard against hanging forever: no test passes because of it.
inline constexpr absl::Duration kHangGuard = absl::Seconds(30);
// How long a test gives a wrong implementation to misbehave before checking it did not.
inline constexpr absl::Duration kMisbehaveWindow = absl::Milliseconds(20);

// Thread-safe log of events, in the order they happened.
class OrderLog {
 public:
  void Add(std::string entry) {
    absl::MutexLock lock(&mu_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> Entries() const {
    absl::MutexLock lock(&mu_);
    return entries_;
  }
  // Index of the first entry equal to `entry`; -1 when absent.
  int IndexOf(absl::string_view entry) const {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i] == entry) return static_cast<int>(i);
    }
    return -1;
  }
  bool Contains(absl::string_view entry) const { return IndexOf(entry) >= 0; }
  // Waits until `entry` is logged; false if kHangGuard passed first.
  bool WaitFor(absl::string_view entry) const {
    auto logged = [this, entry]() {
      for (const std::string& e : entries_) {
        if (e == entry) return true;
      }
      return false;
    };
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&logged), kHangGuard);
  }
  std::string ToString() const {
    absl::MutexLock lock(&mu_);
    return absl::StrJoin(entries_, ", ");
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> entries_ ABSL_GUARDED_BY(mu_);
};

// A one-shot gate: host work waiting on it blocks until Open(). Thread-safe; opening twice is
// fine.
class Gate {
 public:
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  bool is_open() const {
    absl::MutexLock lock(&mu_);
    return open_;
  }
  void Wait() const {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&open_));
  }

 private:
  mutable absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

// Polls `done` every millisecond; false if kHangGuard passed first.
inline bool WaitUntil(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kHangGuard;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Attributes for probe kernels: "tag" names the call in the log, "value" (optional) is what
// the host work writes into every output.
inline AttrMap Tag(const std::string& tag) { return AttrMap().Set("tag", tag); }
inline AttrMap Tag(const std::string& tag, double value) {
  return AttrMap().Set("tag", tag).Set("value", value);
}
// Attributes as a batch node or sequence step holds them.
inline std::shared_ptr<const AttrMap> Shared(AttrMap attrs) {
  return std::make_shared<const AttrMap>(std::move(attrs));
}

struct ProbeOptions {
  std::string name = "probe";
  // Entries, for a call tagged T: "T:launch" (Launch), "T:start" (host work begins),
  // "T:saw=V" (V: first float of the first input, read after the gate), "T:fail" (host
  // work returns work_error), "T:end" (host work done, outputs written).
  OrderLog* log = nullptr;
  Gate* gate = nullptr;  // host work waits for it after "T:start"
  absl::Duration sleep = absl::ZeroDuration();
  absl::Status launch_error;  // returned by Launch (after "T:launch")
  absl::Status work_error;    // returned by the host work
};

// Thread-safe. Counts launches, host work starts and successful host work ends.
class ProbeKernel : public OpKernel {
 public:
  explicit ProbeKernel(ProbeOptions options) : options_(std::move(options)) {}

  absl::string_view name() const override { return options_.name; }

  absl::Status Launch(KernelContext& ctx) const override {
    const absl::StatusOr<std::string> tag_attr = ctx.attrs().GetString("tag");
    const std::string tag = tag_attr.ok() ? *tag_attr : options_.name;
    launches_.fetch_add(1, std::memory_order_relaxed);
    if (options_.log != nullptr) options_.log->Add(absl::StrCat(tag, ":launch"));
    if (!options_.launch_error.ok()) return options_.launch_error;

    const float* input = nullptr;
    if (!ctx.inputs().empty()) {
      const Blob* blob = ctx.inputs()[0];
      if (blob->storage() == nullptr) return absl::FailedPreconditionError("input released");
      if (blob->bytes() >= sizeof(float)) {
        input = static_cast<const float*>(blob->storage()->data());
      }
    }
    std::vector<std::pair<float*, size_t>> outputs;
    for (const Blob* blob : ctx.outputs()) {
      if (blob->storage() == nullptr) return absl::FailedPreconditionError("output released");
      outputs.emplace_back(static_cast<float*>(blob->storage()->data()),
                           blob->bytes() / sizeof(float));
    }
    const absl::StatusOr<double> value = ctx.attrs().GetFloat("value");
    const bool write = value.ok();
    const float v = write ? static_cast<float>(*value) : 0.0f;

    return ctx.LaunchHostWork([this, tag, input, outputs = std::move(outputs), write, v]() {
      starts_.fetch_add(1, std::memory_order_relaxed);
      Log(tag, "start");
      if (options_.gate != nullptr) options_.gate->Wait();
      if (options_.sleep > absl::ZeroDuration()) absl::SleepFor(options_.sleep);
      if (input != nullptr) Log(tag, absl::StrCat("saw=", input[0]));
      if (!options_.work_error.ok()) {
        Log(tag, "fail");
        return options_.work_error;
      }
      if (write) {
        for (const auto& [data, n] : outputs) {
          for (size_t i = 0; i < n; ++i) data[i] = v;
        }
      }
      Log(tag, "end");
      runs_.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    });
  }

  int launches() const { return launches_.load(std::memory_order_relaxed); }
  int starts() const { return starts_.load(std::memory_order_relaxed); }
  int runs() const { return runs_.load(std::memory_order_relaxed); }

 private:
  void Log(const std::string& tag, absl::string_view what) const {
    if (options_.log != nullptr) options_.log->Add(absl::StrCat(tag, ":", what));
  }

  const ProbeOptions options_;
  mutable std::atomic<int> launches_{0};
  mutable std::atomic<int> starts_{0};
  mutable std::atomic<int> runs_{0};
};

// Host work blocks until `gate` opens.
class GateKernel : public ProbeKernel {
 public:
  explicit GateKernel(Gate* gate, OrderLog* log = nullptr, std::string name = "gate")
      : ProbeKernel(ProbeOptions{.name = std::move(name), .log = log, .gate = gate}) {}
};

// Logs its launch and host work; no blocking.
class LogKernel : public ProbeKernel {
 public:
  explicit LogKernel(OrderLog* log, std::string name = "log")
      : ProbeKernel(ProbeOptions{.name = std::move(name), .log = log}) {}
};

// Fails with `error`, at launch or in its host work.
class FailKernel : public ProbeKernel {
 public:
  enum class When { kLaunch, kHostWork };
  FailKernel(When when, absl::Status error, std::string name = "fail", OrderLog* log = nullptr)
      : ProbeKernel(
            ProbeOptions{.name = std::move(name),
                         .log = log,
                         .launch_error = when == When::kLaunch ? error : absl::OkStatus(),
                         .work_error = when == When::kHostWork ? error : absl::OkStatus()}) {}
};

// Host work sleeps for `sleep`.
class SlowKernel : public ProbeKernel {
 public:
  explicit SlowKernel(absl::Duration sleep, OrderLog* log = nullptr, std::string name = "slow")
      : ProbeKernel(ProbeOptions{.name = std::move(name), .log = log, .sleep = sleep}) {}
};

// The f32 contents of a host-addressable blob, read directly (no VM involved): for after a
// shutdown, when the VM takes no more reads.
inline std::vector<float> HostF32(const Blob& blob) {
  const float* data = static_cast<const float*>(blob.storage()->data());
  return std::vector<float>(data, data + blob.bytes() / sizeof(float));
}

}  // namespace sluice::vm::testing

#endif  // SLUICE_TESTS_VM_TEST_KERNELS_H_
