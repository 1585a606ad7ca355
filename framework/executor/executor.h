// Executor: runs Programs: `Run(program, feeds,
// fetch_list, scope)` builds an Interpreter the first time it sees a (program hash, feed
// names, fetch names, scope) and reuses it after, so steady-state runs cost one batch
// submission. `RunAsync` returns at once with a handle (step id, Cancel, Wait) and calls a
// completion callback; every run reports per-step statistics and can write a Chrome trace.
//
// Ordering: runs of one Executor execute one after another in submission order (a run
// starts once the previous one completed), because programs share persistable variables in
// the scope and a lowered graph orders only its own instructions. RunAsync returns as soon as
// its run is submitted, so the caller overlaps its own work with the run.
//
// I/O binding: feeds may be given as blobs already on the program's device (DeviceIo::feeds:
// an eager tensor's Tensor::blob(), a NewBlob of the executor's VM) and fetches may stay on
// the device (DeviceIo::fetches: returned in RunResult::device_fetches; an eager caller
// adopts one with eager::Context::FromBlob). Neither moves bytes through the host: a
// device-resident feed is copied device to device (`assign`) into the graph's feed blob,
// ordered after the blob's producer; a device-resident fetch is copied the same way into a
// new blob after the run. Which feeds and fetches are device-resident is part of the
// lowered graph (its cache key). See docs/design.md, "I/O binding".
#ifndef SLUICE_FRAMEWORK_EXECUTOR_EXECUTOR_H_
#define SLUICE_FRAMEWORK_EXECUTOR_EXECUTOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "framework/executor/program_transform.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/interpreter.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"
#include "vm/tracer.h"
#include "vm/virtual_machine.h"

namespace sluice::framework {

// A run's device-resident inputs and outputs (I/O binding). Value type.
struct DeviceIo {
  // Feeds given as blobs of the executor's VM on the program's device
  // (InterpreterOptions::device), with the declared dtype and shape; the blob's producer must
  // have been submitted before the run (any builder: held-back work is handed over first).
  // The run copies each into its graph before RunAsync returns; the caller may then reuse
  // or overwrite the blob at once. A name is given here or in the host Feeds, not both.
  BlobFeeds feeds;
  // Names of the fetch list whose values stay on the device: each is returned as a new blob
  // in RunResult::device_fetches (on the device where the variable lives: the program's
  // device for everything an op writes) instead of as bytes in RunResult::fetches.
  std::vector<std::string> fetches;
};

struct ExecutorOptions {
  // interpreter.compiler is ignored: the executor passes `compiler` (below).
  InterpreterOptions interpreter;
  // The subgraph compiler and its cache (framework/compiler/compiler.h), shared with other
  // executors when given; null: the executor makes one of its own.
  std::shared_ptr<compiler::Compiler> compiler;
  // Built interpreters kept; the least recently used one is dropped beyond this.
  int max_cached_interpreters = 64;
  // A rewrite of every program this executor builds, with each run's host feeds mapped to
  // match (program_transform.h); null: programs run as given. Data-parallel training is
  // one: framework::MakeDataParallelTransform (framework/distributed/data_parallel.h).
  std::shared_ptr<const ProgramTransform> transform;
};

struct RunOptions {
  // When not empty, the run's timeline is written here as Chrome trace JSON (one row per
  // stream, one slice per op, and one slice "iteration K" per loop iteration, with the
  // loop in its args), for Perfetto or chrome://tracing.
  std::string trace_path;
};

// Per-step statistics. Value type.
struct StepStats {
  int64_t step = 0;          // executor-wide step id, from 1
  int64_t ops_run = 0;       // op kernels launched (cancelled ones not counted)
  int64_t instructions = 0;  // VM instructions submitted for the step
  int64_t syncs = 0;         // StreamWait + RecordEvent instructions among them
  int64_t peak_bytes = 0;    // peak device memory in use during the step (all devices)
  int64_t wall_ns = 0;       // submission to completion
  bool cancelled = false;
  bool cache_hit = false;  // the lowered graph came from the cache
  std::string ToString() const;
};

struct RunResult {
  // In fetch_list order. A device-resident fetch's entry has its dtype and shape, no bytes.
  std::vector<HostTensor> fetches;
  // In fetch_list order when the run has device-resident fetches (DeviceIo::fetches; empty
  // otherwise): each a new blob of the VM, filled by a device copy the VM orders before any
  // later use of the blob; null for the host fetches. The caller owns them (an eager caller
  // makes one a tensor with eager::Context::FromBlob).
  std::vector<vm::BlobRef> device_fetches;
  StepStats stats;
};

using RunCallback = std::function<void(const absl::StatusOr<RunResult>&)>;

// A run prepared once and started many times without looking the program up again (what
// TensorFlow calls a callable): Run hashes the whole program each call to find its lowered
// graph, which for a large program costs more than running it. Copyable; keeps the lowered
// graph alive even after the executor's cache drops it. Valid while its Executor lives.
class PreparedRun {
 public:
  const std::vector<std::string>& feed_names() const { return interpreter_->feed_names(); }
  const std::vector<std::string>& fetch_names() const { return interpreter_->fetch_names(); }
  // Which of them are device-resident (sorted).
  const IoBinding& io() const { return interpreter_->io(); }
  const LoweringStats& lowering() const { return interpreter_->lowering(); }

 private:
  friend class Executor;
  std::shared_ptr<Interpreter> interpreter_;
};

// One submitted run. Thread-safe.
class Executor;

class RunHandle {
 public:
  int64_t step() const { return step_; }
  // Asks the run to stop: ops not yet started are skipped, persistable variables keep what
  // finished ops wrote; the result is Cancelled. No effect once the run completed.
  void Cancel();
  // Blocks until the run completed (after its callback returned).
  const absl::StatusOr<RunResult>& Wait();
  // Blocks until the run completed or `timeout` passed; whether it completed (then Wait()
  // returns at once). For callers that must stay responsive while a run goes on, such as a
  // host language checking for an interrupt between waits.
  bool WaitFor(absl::Duration timeout);
  bool done() const { return done_.HasBeenNotified(); }

 private:
  friend class Executor;
  explicit RunHandle(int64_t step) : step_(step) {}
  const int64_t step_;
  Executor* executor_ = nullptr;
  absl::Notification done_;
  absl::StatusOr<RunResult> result_ = absl::UnknownError("not finished");
};

// Thread-safe. The registry and VM must outlive the executor. Destroying it waits for
// submitted runs.
class Executor {
 public:
  Executor(const ops::OpRegistry* registry, vm::VirtualMachine* vm, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // The subgraph compiler its builds use (its own or ExecutorOptions::compiler): for its
  // statistics.
  const compiler::Compiler& compiler() const { return *compiler_; }

  // Runs `program` once and waits. Bad input (unknown op, missing/extra feed, wrong feed
  // shape or dtype, unknown fetch, uninitialized persistable) is an error naming the
  // culprit, returned before anything runs; the scope is then unchanged.
  absl::StatusOr<RunResult> Run(const ir::ProgramDesc& program, const Feeds& feeds,
                                const std::vector<std::string>& fetch_list, Scope* scope,
                                const RunOptions& options = {});
  // The same with device-resident feeds and fetches (I/O binding; see DeviceIo). A bad
  // device feed — a null, released or lazy blob, another VM's, one on another device than
  // the program's, the wrong dtype or shape, a name that is no variable or is also a host
  // feed — is InvalidArgument naming the feed, and so is a device fetch not in
  // `fetch_list`; returned before anything is submitted.
  absl::StatusOr<RunResult> Run(const ir::ProgramDesc& program, const Feeds& feeds,
                                const DeviceIo& device_io,
                                const std::vector<std::string>& fetch_list, Scope* scope,
                                const RunOptions& options = {});
  // Submits and returns. `callback` (optional) runs on the executor's completion thread
  // once the run is complete; it may read this executor's statistics but must not start or
  // wait for runs of it. Errors found before
  // submission are returned here and the callback is not called.
  absl::StatusOr<std::shared_ptr<RunHandle>> RunAsync(const ir::ProgramDesc& program,
                                                      const Feeds& feeds,
                                                      const std::vector<std::string>& fetch_list,
                                                      Scope* scope, RunCallback callback = nullptr,
                                                      const RunOptions& options = {});
  // RunAsync with device-resident feeds and fetches (the Run above). Returns once the
  // device feeds are copied into the graph (a wait on the host for those copies, and for
  // anything submitted before them) and the graph is submitted.
  absl::StatusOr<std::shared_ptr<RunHandle>> RunAsync(const ir::ProgramDesc& program,
                                                      const Feeds& feeds, const DeviceIo& device_io,
                                                      const std::vector<std::string>& fetch_list,
                                                      Scope* scope, RunCallback callback = nullptr,
                                                      const RunOptions& options = {});

  // Looks up (or builds) the lowered graph for `program` with these feed and fetch names
  // in `scope`; the same errors as Run, before anything runs. `io` names the feeds (among
  // `feed_names`) and fetches (among `fetch_list`) that are device-resident.
  absl::StatusOr<PreparedRun> Prepare(const ir::ProgramDesc& program,
                                      const std::vector<std::string>& feed_names,
                                      const std::vector<std::string>& fetch_list, Scope* scope,
                                      const IoBinding& io = {});
  // Run / RunAsync of a prepared run: `feeds` and `device_feeds` together must name exactly
  // its feeds, each the way the prepared run binds it (PreparedRun::io()).
  absl::StatusOr<RunResult> Run(const PreparedRun& prepared, const Feeds& feeds,
                                const RunOptions& options = {});
  absl::StatusOr<RunResult> Run(const PreparedRun& prepared, const Feeds& feeds,
                                const BlobFeeds& device_feeds, const RunOptions& options = {});
  absl::StatusOr<std::shared_ptr<RunHandle>> RunAsync(const PreparedRun& prepared,
                                                      const Feeds& feeds,
                                                      RunCallback callback = nullptr,
                                                      const RunOptions& options = {});
  absl::StatusOr<std::shared_ptr<RunHandle>> RunAsync(const PreparedRun& prepared,
                                                      const Feeds& feeds,
                                                      const BlobFeeds& device_feeds,
                                                      RunCallback callback = nullptr,
                                                      const RunOptions& options = {});

  // Interpreters built so far / reused from the cache.
  int64_t cache_misses() const;
  int64_t cache_hits() const;
  // The lowering of the most recent run's program (for tools and tests).
  absl::StatusOr<LoweringStats> LastLowering() const;

 private:
  struct CacheEntry {
    uint64_t hash;
    std::vector<std::string> feeds;
    std::vector<std::string> fetches;
    IoBinding io;  // sorted
    const Scope* scope;
    std::shared_ptr<Interpreter> interpreter;
    uint64_t last_used;
  };
  struct Pending {
    std::shared_ptr<RunHandle> handle;
    RunCallback callback;
    std::string trace_path;
    std::unique_ptr<vm::Tracer> tracer;
    bool cache_hit = false;
    std::shared_ptr<Interpreter> interpreter;
    int64_t ops_before = 0;
    int64_t start_ns = 0;
  };

  // `feed_names` sorted; `io` sorted (SortedIo).
  absl::StatusOr<std::shared_ptr<Interpreter>> FindOrBuild(
      const ir::ProgramDesc& program, std::vector<std::string> feed_names,
      const std::vector<std::string>& fetch_list, const IoBinding& io, Scope* scope, bool* hit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stages feeds (waiting for device feeds' copies: without mu_) and submits; submit_mu_
  // held, which orders it after the previous run.
  absl::StatusOr<std::shared_ptr<RunHandle>> Launch(std::shared_ptr<Interpreter> interpreter,
                                                    bool cache_hit, const Feeds& feeds,
                                                    const BlobFeeds& device_feeds,
                                                    RunCallback callback, const RunOptions& options)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  void CompletionLoop();
  void Finish(Pending& pending);
  void WaitForPreviousRun() ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);
  friend class RunHandle;
  void CancelRun(const RunHandle* handle);

  const ops::OpRegistry* const registry_;
  vm::VirtualMachine* const vm_;
  const ExecutorOptions options_;
  const std::shared_ptr<compiler::Compiler> compiler_;
  // options_.interpreter with compiler_.
  InterpreterOptions InterpreterOptionsWithCompiler() const {
    InterpreterOptions options = options_.interpreter;
    options.compiler = compiler_.get();
    return options;
  }

  // Serializes submissions: held from waiting for the previous run to handing the new one
  // to the VM. Taken before mu_.
  absl::Mutex submit_mu_;
  // The cache and statistics; never held while waiting for a run.
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(submit_mu_);
  std::vector<CacheEntry> cache_ ABSL_GUARDED_BY(mu_);
  uint64_t use_clock_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_step_ ABSL_GUARDED_BY(mu_) = 1;
  std::shared_ptr<RunHandle> last_run_ ABSL_GUARDED_BY(mu_);
  LoweringStats last_lowering_ ABSL_GUARDED_BY(mu_);
  bool has_lowering_ ABSL_GUARDED_BY(mu_) = false;

  // Completed runs waiting for the completion thread.
  absl::Mutex done_mu_;
  std::deque<std::unique_ptr<Pending>> completed_ ABSL_GUARDED_BY(done_mu_);
  bool stopping_ ABSL_GUARDED_BY(done_mu_) = false;
  std::thread completion_thread_;

  // The run in flight and its interpreter, for Cancel (cleared before its handle is done).
  absl::Mutex running_mu_;
  const RunHandle* running_ ABSL_GUARDED_BY(running_mu_) = nullptr;
  Interpreter* running_interpreter_ ABSL_GUARDED_BY(running_mu_) = nullptr;
};

// Writes slices as Chrome trace JSON: one row (tid) per stream, named after it. Errors name
// the path.
absl::Status WriteChromeTrace(const std::vector<vm::Tracer::Slice>& slices,
                              const std::string& path);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_EXECUTOR_EXECUTOR_H_
