#include "framework/executor/executor.h"

#include <algorithm>
#include <fstream>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "core/thread_name.h"
#include "vm/instructions_builder.h"
#include "vm/stream.h"

namespace sluice::framework {

std::string StepStats::ToString() const {
  return absl::StrCat("step ", step, ": ops=", ops_run, " instructions=", instructions,
                      " syncs=", syncs, " peak_bytes=", peak_bytes,
                      absl::StrFormat(" wall=%.3fms", wall_ns / 1e6), cancelled ? " cancelled" : "",
                      cache_hit ? "" : " (built)");
}

void RunHandle::Cancel() {
  if (executor_ != nullptr) executor_->CancelRun(this);
}

const absl::StatusOr<RunResult>& RunHandle::Wait() {
  done_.WaitForNotification();
  return result_;
}

bool RunHandle::WaitFor(absl::Duration timeout) {
  return done_.WaitForNotificationWithTimeout(timeout);
}

Executor::Executor(const ops::OpRegistry* registry, vm::VirtualMachine* vm, ExecutorOptions options)
    : registry_(registry),
      vm_(vm),
      options_(std::move(options)),
      compiler_(options_.compiler != nullptr ? options_.compiler
                                             : std::make_shared<compiler::Compiler>()) {
  completion_thread_ = std::thread([this] {
    SetCurrentThreadName("sluice-exec-done");
    CompletionLoop();
  });
}

Executor::~Executor() {
  std::shared_ptr<RunHandle> last;
  {
    absl::MutexLock lock(&mu_);
    last = last_run_;
  }
  if (last != nullptr) last->Wait();
  {
    absl::MutexLock lock(&done_mu_);
    stopping_ = true;
  }
  completion_thread_.join();
}

int64_t Executor::cache_misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

int64_t Executor::cache_hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

absl::StatusOr<LoweringStats> Executor::LastLowering() const {
  absl::MutexLock lock(&mu_);
  if (!has_lowering_) return absl::FailedPreconditionError("no run yet");
  return last_lowering_;
}

void Executor::WaitForPreviousRun() {
  std::shared_ptr<RunHandle> last;
  {
    absl::MutexLock lock(&mu_);
    last = last_run_;
  }
  // Without mu_: the previous run's callback may ask for statistics.
  if (last != nullptr) last->Wait();
}

void Executor::CancelRun(const RunHandle* handle) {
  absl::MutexLock lock(&running_mu_);
  if (running_ == handle && running_interpreter_ != nullptr) running_interpreter_->Cancel();
}

namespace {

bool SameIo(const IoBinding& a, const IoBinding& b) {
  return a.device_feeds == b.device_feeds && a.device_fetches == b.device_fetches;
}

// The binding as a cache key: each list sorted, each name once.
IoBinding SortedIo(IoBinding io) {
  for (std::vector<std::string>* names : {&io.device_feeds, &io.device_fetches}) {
    std::sort(names->begin(), names->end());
    names->erase(std::unique(names->begin(), names->end()), names->end());
  }
  return io;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Interpreter>> Executor::FindOrBuild(
    const ir::ProgramDesc& program, std::vector<std::string> feed_names,
    const std::vector<std::string>& fetch_list, const IoBinding& io, Scope* scope, bool* hit) {
  const uint64_t hash = program.Hash();
  ++use_clock_;
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    CacheEntry& entry = *it;
    if (entry.hash == hash && entry.scope == scope && entry.feeds == feed_names &&
        entry.fetches == fetch_list && SameIo(entry.io, io)) {
      if (!entry.interpreter->BindingsMatch(*scope)) {
        // The scope's variables changed under the graph (or this is another scope at a
        // reused address): build again.
        cache_.erase(it);
        break;
      }
      entry.last_used = use_clock_;
      ++hits_;
      *hit = true;
      return entry.interpreter;
    }
  }
  *hit = false;
  const ir::ProgramDesc* to_build = &program;
  ir::ProgramDesc replica;
  if (options_.transform != nullptr) {
    std::vector<std::string> host_feeds;
    for (const std::string& name : feed_names) {
      if (!absl::c_linear_search(io.device_feeds, name)) host_feeds.push_back(name);
    }
    SLUICE_ASSIGN_OR_RETURN(replica, options_.transform->Rewrite(program, host_feeds));
    to_build = &replica;
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Interpreter> interpreter,
                          Interpreter::Build(*to_build, registry_, vm_, scope, feed_names,
                                             fetch_list, InterpreterOptionsWithCompiler(), io));
  ++misses_;
  if (static_cast<int>(cache_.size()) >= std::max(1, options_.max_cached_interpreters)) {
    auto oldest = std::min_element(
        cache_.begin(), cache_.end(),
        [](const CacheEntry& a, const CacheEntry& b) { return a.last_used < b.last_used; });
    cache_.erase(oldest);  // no run is in flight: runs are serialized
  }
  std::shared_ptr<Interpreter> shared = std::move(interpreter);
  cache_.push_back(
      CacheEntry{hash, std::move(feed_names), fetch_list, io, scope, shared, use_clock_});
  return shared;
}

absl::StatusOr<std::shared_ptr<RunHandle>> Executor::RunAsync(
    const ir::ProgramDesc& program, const Feeds& feeds, const std::vector<std::string>& fetch_list,
    Scope* scope, RunCallback callback, const RunOptions& options) {
  return RunAsync(program, feeds, DeviceIo(), fetch_list, scope, std::move(callback), options);
}

absl::StatusOr<std::shared_ptr<RunHandle>> Executor::RunAsync(
    const ir::ProgramDesc& program, const Feeds& feeds, const DeviceIo& device_io,
    const std::vector<std::string>& fetch_list, Scope* scope, RunCallback callback,
    const RunOptions& options) {
  if (scope == nullptr) return absl::InvalidArgumentError("Run: null scope");
  SLUICE_RETURN_IF_ERROR(
      CheckFeedsAgainstProgram(program, feeds, device_io.feeds, *vm_, options_.interpreter.device));
  std::vector<std::string> feed_names;
  IoBinding io;
  for (const auto& [name, value] : feeds) feed_names.push_back(name);
  for (const auto& [name, blob] : device_io.feeds) {
    feed_names.push_back(name);
    io.device_feeds.push_back(name);
  }
  std::sort(feed_names.begin(), feed_names.end());  // the key ignores feed order
  io.device_fetches = device_io.fetches;
  io = SortedIo(std::move(io));
  absl::MutexLock submit(&submit_mu_);
  WaitForPreviousRun();  // one run at a time, its callback included
  bool hit = false;
  std::shared_ptr<Interpreter> interpreter;
  {
    absl::MutexLock lock(&mu_);
    SLUICE_ASSIGN_OR_RETURN(interpreter,
                            FindOrBuild(program, feed_names, fetch_list, io, scope, &hit));
  }
  return Launch(std::move(interpreter), hit, feeds, device_io.feeds, std::move(callback), options);
}

absl::StatusOr<PreparedRun> Executor::Prepare(const ir::ProgramDesc& program,
                                              const std::vector<std::string>& feed_names,
                                              const std::vector<std::string>& fetch_list,
                                              Scope* scope, const IoBinding& io) {
  if (scope == nullptr) return absl::InvalidArgumentError("Prepare: null scope");
  absl::MutexLock submit(&submit_mu_);
  WaitForPreviousRun();
  absl::MutexLock lock(&mu_);
  bool hit = false;
  PreparedRun prepared;
  std::vector<std::string> sorted = feed_names;
  std::sort(sorted.begin(), sorted.end());
  SLUICE_ASSIGN_OR_RETURN(prepared.interpreter_, FindOrBuild(program, std::move(sorted), fetch_list,
                                                             SortedIo(io), scope, &hit));
  return prepared;
}

absl::StatusOr<std::shared_ptr<RunHandle>> Executor::RunAsync(const PreparedRun& prepared,
                                                              const Feeds& feeds,
                                                              RunCallback callback,
                                                              const RunOptions& options) {
  return RunAsync(prepared, feeds, BlobFeeds(), std::move(callback), options);
}

absl::StatusOr<std::shared_ptr<RunHandle>> Executor::RunAsync(const PreparedRun& prepared,
                                                              const Feeds& feeds,
                                                              const BlobFeeds& device_feeds,
                                                              RunCallback callback,
                                                              const RunOptions& options) {
  if (prepared.interpreter_ == nullptr) return absl::InvalidArgumentError("empty PreparedRun");
  absl::MutexLock submit(&submit_mu_);
  WaitForPreviousRun();
  return Launch(prepared.interpreter_, /*cache_hit=*/true, feeds, device_feeds, std::move(callback),
                options);
}

absl::StatusOr<RunResult> Executor::Run(const PreparedRun& prepared, const Feeds& feeds,
                                        const RunOptions& options) {
  return Run(prepared, feeds, BlobFeeds(), options);
}

absl::StatusOr<RunResult> Executor::Run(const PreparedRun& prepared, const Feeds& feeds,
                                        const BlobFeeds& device_feeds, const RunOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<RunHandle> handle,
                          RunAsync(prepared, feeds, device_feeds, nullptr, options));
  return handle->Wait();
}

absl::StatusOr<std::shared_ptr<RunHandle>> Executor::Launch(
    std::shared_ptr<Interpreter> interpreter, bool hit, const Feeds& feeds,
    const BlobFeeds& device_feeds, RunCallback callback, const RunOptions& options) {
  SLUICE_RETURN_IF_ERROR(interpreter->CheckInitialized());
  // Without mu_ (statistics stay readable): with device feeds this submits their copies, and
  // Submit below may wait on the host for them.
  if (options_.transform != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(const Feeds mapped, options_.transform->MapFeeds(feeds, device_feeds));
    SLUICE_RETURN_IF_ERROR(interpreter->StageFeeds(mapped, device_feeds));
  } else {
    SLUICE_RETURN_IF_ERROR(interpreter->StageFeeds(feeds, device_feeds));
  }

  auto pending = std::make_unique<Pending>();
  {
    absl::MutexLock lock(&mu_);
    last_lowering_ = interpreter->lowering();
    has_lowering_ = true;
    pending->handle = std::shared_ptr<RunHandle>(new RunHandle(next_step_++));
  }
  pending->handle->executor_ = this;
  pending->callback = std::move(callback);
  pending->trace_path = options.trace_path;
  pending->cache_hit = hit;
  pending->ops_before = interpreter->ops_run();
  pending->interpreter = interpreter;
  for (const Device& device : interpreter->devices()) {
    if (absl::StatusOr<ep::Device*> d = vm_->runtime()->GetDevice(device); d.ok()) {
      (*d)->allocator().ResetPeakBytes();
    }
  }
  if (!options.trace_path.empty()) {
    pending->tracer = std::make_unique<vm::Tracer>();
    vm_->SetTracer(pending->tracer.get());
  }
  {
    absl::MutexLock running(&running_mu_);
    running_ = pending->handle.get();
    running_interpreter_ = interpreter.get();
  }
  std::shared_ptr<RunHandle> handle = pending->handle;
  pending->start_ns = vm::Tracer::NowNs();
  absl::Status submitted = interpreter->Submit();
  if (submitted.ok()) {
    vm::InstructionsBuilder builder(vm_);
    Pending* raw = pending.release();
    submitted = builder.Barrier([this, raw] {
      // Scheduler thread: hand over and return at once.
      absl::MutexLock done(&done_mu_);
      completed_.emplace_back(raw);
    });
    if (!submitted.ok()) pending.reset(raw);
  }
  if (!submitted.ok()) {
    // Nothing or part of the graph was accepted: wait for what was, then report.
    vm_->Sync().IgnoreError();
    if (pending != nullptr && pending->tracer != nullptr) vm_->SetTracer(nullptr);
    absl::MutexLock running(&running_mu_);
    running_ = nullptr;
    running_interpreter_ = nullptr;
    return submitted;
  }
  absl::MutexLock lock(&mu_);
  last_run_ = handle;
  return handle;
}

absl::StatusOr<RunResult> Executor::Run(const ir::ProgramDesc& program, const Feeds& feeds,
                                        const std::vector<std::string>& fetch_list, Scope* scope,
                                        const RunOptions& options) {
  return Run(program, feeds, DeviceIo(), fetch_list, scope, options);
}

absl::StatusOr<RunResult> Executor::Run(const ir::ProgramDesc& program, const Feeds& feeds,
                                        const DeviceIo& device_io,
                                        const std::vector<std::string>& fetch_list, Scope* scope,
                                        const RunOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<RunHandle> handle,
                          RunAsync(program, feeds, device_io, fetch_list, scope, nullptr, options));
  return handle->Wait();
}

void Executor::CompletionLoop() {
  while (true) {
    std::unique_ptr<Pending> pending;
    {
      absl::MutexLock lock(&done_mu_);
      done_mu_.Await(absl::Condition(
          +[](Executor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->done_mu_) {
            return e->stopping_ || !e->completed_.empty();
          },
          this));
      if (completed_.empty()) return;
      pending = std::move(completed_.front());
      completed_.pop_front();
    }
    Finish(*pending);
  }
}

void Executor::Finish(Pending& pending) {
  Interpreter* interpreter = pending.interpreter.get();
  RunResult result;
  StepStats& stats = result.stats;
  stats.step = pending.handle->step();
  stats.wall_ns = vm::Tracer::NowNs() - pending.start_ns;
  stats.cache_hit = pending.cache_hit;
  stats.ops_run = interpreter->ops_run() - pending.ops_before;
  const LoweringStats& lowering = interpreter->lowering();
  stats.instructions = lowering.instructions + 1;  // the completion barrier
  stats.syncs = lowering.stream_waits + lowering.record_events;
  for (const Device& device : interpreter->devices()) {
    if (absl::StatusOr<ep::Device*> d = vm_->runtime()->GetDevice(device); d.ok()) {
      stats.peak_bytes += (*d)->allocator().stats().peak_bytes_in_use;
    }
  }
  {
    absl::MutexLock running(&running_mu_);
    running_ = nullptr;
    running_interpreter_ = nullptr;
  }
  stats.cancelled = interpreter->cancelled();
  absl::Status status = vm_->errors().Take();
  if (pending.tracer != nullptr) {
    vm_->SetTracer(nullptr);
    const absl::Status traced = WriteChromeTrace(pending.tracer->Take(), pending.trace_path);
    if (status.ok()) status = traced;
  }
  absl::StatusOr<RunResult> outcome;
  if (stats.cancelled) {
    outcome = absl::CancelledError(
        absl::StrCat("step ", stats.step, " was cancelled after ", stats.ops_run, " ops"));
  } else if (!status.ok()) {
    outcome = status;
  } else {
    absl::StatusOr<std::vector<HostTensor>> fetches = interpreter->ReadFetches();
    absl::StatusOr<std::vector<vm::BlobRef>> device_fetches =
        fetches.ok() ? interpreter->CopyOutDeviceFetches() : fetches.status();
    if (device_fetches.ok()) {
      result.fetches = *std::move(fetches);
      result.device_fetches = *std::move(device_fetches);
      outcome = std::move(result);
    } else {
      outcome = device_fetches.status();
    }
  }
  pending.handle->result_ = std::move(outcome);
  if (pending.callback) pending.callback(pending.handle->result_);
  pending.handle->done_.Notify();
}

absl::Status WriteChromeTrace(const std::vector<vm::Tracer::Slice>& slices,
                              const std::string& path) {
  std::ofstream file(path, std::ios::trunc);
  if (!file) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  int64_t origin = INT64_MAX;
  for (const auto& slice : slices) origin = std::min(origin, slice.begin_ns);
  std::vector<const vm::Stream*> streams;
  auto row = [&](const vm::Stream* stream) {
    auto it = std::find(streams.begin(), streams.end(), stream);
    if (it != streams.end()) return static_cast<int>(it - streams.begin());
    streams.push_back(stream);
    return static_cast<int>(streams.size()) - 1;
  };
  file << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  for (const auto& slice : slices) {
    const int tid = row(slice.stream);
    const double ts = (slice.begin_ns - origin) / 1e3;
    const double dur = (slice.end_ns - slice.begin_ns) / 1e3;
    file << (first ? "" : ",\n");
    if (slice.iteration >= 0) {
      // A loop iteration, on its loop's stream: it encloses the slices of the steps it ran.
      std::string loop;
      for (char c : slice.name) {
        if (c == '"' || c == '\\') loop.push_back('\\');
        loop.push_back(c);
      }
      file << absl::StrFormat(
          R"({"name":"iteration %d","cat":"iteration","ph":"X","pid":1,"tid":%d,"ts":%.3f,)"
          R"("dur":%.3f,"args":{"loop":"%s","iteration":%d}})",
          slice.iteration, tid, ts, dur, loop, slice.iteration);
    } else {
      file << absl::StrFormat(
          R"({"name":"%s","cat":"op","ph":"X","pid":1,"tid":%d,"ts":%.3f,"dur":%.3f})", slice.name,
          tid, ts, dur);
    }
    first = false;
  }
  for (size_t tid = 0; tid < streams.size(); ++tid) {
    file << (first ? "" : ",\n")
         << absl::StrFormat(
                R"({"name":"thread_name","ph":"M","pid":1,"tid":%d,"args":{"name":"%s"}})", tid,
                streams[tid]->name());
    first = false;
  }
  file << "\n]}\n";
  file.close();
  if (!file) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace sluice::framework
