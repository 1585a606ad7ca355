#include "core/intra_op_pool.h"

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "core/thread_name.h"

namespace sluice {
namespace {

// True on a thread while it runs a chunk: a region opened inside one runs inline, so a
// chunk never waits for helpers that may all be busy with the region around it.
thread_local bool t_in_chunk = false;

// How many chunks a region is cut into per thread that may run it: enough that a thread
// which starts late, or is preempted, leaves the others work to balance with.
constexpr int64_t kChunksPerThread = 4;

class InChunk {
 public:
  InChunk() : was_(t_in_chunk) { t_in_chunk = true; }
  ~InChunk() { t_in_chunk = was_; }

 private:
  const bool was_;
};

}  // namespace

struct IntraOpPool::Job {
  Job(absl::FunctionRef<void(int64_t, int64_t)> f, int64_t size, int64_t chunk_size,
      const std::atomic<bool>* cancel_flag, ParallelCounters* stats)
      : fn(f),
        n(size),
        chunk(chunk_size),
        num_chunks((size + chunk_size - 1) / chunk_size),
        cancel(cancel_flag),
        counters(stats) {}

  const absl::FunctionRef<void(int64_t, int64_t)> fn;
  const int64_t n;
  const int64_t chunk;
  const int64_t num_chunks;
  const std::atomic<bool>* const cancel;
  ParallelCounters* const counters;
  // The next chunk to claim. Relaxed: a claim needs only atomicity; what a chunk writes
  // reaches the caller through the pool's mutex (a helper drops its reference under it).
  std::atomic<int64_t> next{0};
  std::atomic<bool> skipped{false};  // relaxed: read by the caller after the join
  int refs = 0;                      // helpers inside RunChunks; guarded by the pool's mu_
  // The first exception a chunk threw; guarded by the pool's mu_. Chunks not yet claimed
  // are then skipped, and the caller rethrows it after the join.
  std::exception_ptr error;
};

IntraOpPool::IntraOpPool(int parallelism)
    : parallelism_(parallelism > 0
                       ? parallelism
                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {}

IntraOpPool::~IntraOpPool() {
  std::vector<std::thread> helpers;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    helpers.swap(helpers_);
  }
  for (std::thread& t : helpers) t.join();
}

int IntraOpPool::started_helpers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(helpers_.size());
}

void IntraOpPool::StartHelpersLocked() {
  if (!helpers_.empty() || stopping_) return;
  for (int i = 1; i < parallelism_; ++i) {
    helpers_.emplace_back([this, i] {
      SetCurrentThreadName(absl::StrCat("sluice-intra", i));
      HelperLoop();
    });
  }
}

void IntraOpPool::RunChunks(Job& job, bool helper, absl::Mutex& mu) {
  InChunk in_chunk;
  int64_t ran = 0;
  int64_t skipped = 0;
  while (true) {
    const int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.num_chunks) break;
    if (job.cancel != nullptr && job.cancel->load(std::memory_order_acquire)) {
      job.skipped.store(true, std::memory_order_relaxed);
      ++skipped;
      continue;
    }
    const int64_t begin = c * job.chunk;
    try {
      job.fn(begin, std::min(job.n, begin + job.chunk));
    } catch (...) {
      // Kept for the caller (a helper thread must not let it escape, and the caller must
      // join before it unwinds past the job); nothing further is claimed.
      job.next.store(job.num_chunks, std::memory_order_relaxed);
      absl::MutexLock lock(&mu);
      if (job.error == nullptr) job.error = std::current_exception();
      break;
    }
    ++ran;
  }
  if (job.counters != nullptr) {
    job.counters->chunks.fetch_add(ran, std::memory_order_relaxed);
    if (helper) job.counters->helped_chunks.fetch_add(ran, std::memory_order_relaxed);
    if (skipped > 0) job.counters->skipped_chunks.fetch_add(skipped, std::memory_order_relaxed);
  }
}

void IntraOpPool::HelperLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](IntraOpPool* pool)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { return pool->stopping_ || !pool->jobs_.empty(); },
        this));
    if (jobs_.empty()) return;  // stopping, and no caller is waiting on a job
    Job* job = jobs_.front();
    ++job->refs;
    mu_.Unlock();
    RunChunks(*job, /*helper=*/true, mu_);
    mu_.Lock();
    // Every chunk is claimed: no other helper should pick the job up again.
    auto it = std::find(jobs_.begin(), jobs_.end(), job);
    if (it != jobs_.end()) jobs_.erase(it);
    --job->refs;  // the unlock lets the caller's Await see it
  }
}

bool IntraOpPool::ParallelFor(int64_t n, int64_t grain,
                              absl::FunctionRef<void(int64_t, int64_t)> fn,
                              const std::atomic<bool>* cancel, ParallelCounters* counters) {
  if (n <= 0) return true;
  grain = std::max<int64_t>(1, grain);
  const int64_t per_thread_chunks = parallelism_ * kChunksPerThread;
  const int64_t chunk = std::max(grain, (n + per_thread_chunks - 1) / per_thread_chunks);
  if ((n + chunk - 1) / chunk <= 1 || parallelism_ <= 1 || t_in_chunk) {
    // Not split: the whole range at once, on this thread (an exception propagates as is).
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) {
      if (counters != nullptr) counters->skipped_chunks.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    InChunk in_chunk;
    fn(0, n);
    if (counters != nullptr) counters->chunks.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  Job job(fn, n, chunk, cancel, counters);
  if (counters != nullptr) counters->regions.fetch_add(1, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&mu_);
    StartHelpersLocked();
    jobs_.push_back(&job);
  }
  RunChunks(job, /*helper=*/false, mu_);
  std::exception_ptr error;
  {
    absl::MutexLock lock(&mu_);
    auto it = std::find(jobs_.begin(), jobs_.end(), &job);
    if (it != jobs_.end()) jobs_.erase(it);
    mu_.Await(absl::Condition(
        +[](Job* j) ABSL_NO_THREAD_SAFETY_ANALYSIS { return j->refs == 0; }, &job));
    error = job.error;
  }
  if (error != nullptr) std::rethrow_exception(error);  // no helper holds the job now
  return !job.skipped.load(std::memory_order_relaxed);
}

absl::Status ParallelScope::For(int64_t n, int64_t grain,
                                absl::FunctionRef<void(int64_t, int64_t)> fn,
                                const char* what) const {
  bool complete = true;
  if (pool_ != nullptr) {
    complete = pool_->ParallelFor(n, grain, fn, cancel_, counters_);
  } else if (n > 0) {
    if (cancel_ != nullptr && cancel_->load(std::memory_order_acquire)) {
      complete = false;
    } else {
      fn(0, n);
    }
  }
  if (complete) return absl::OkStatus();
  return absl::CancelledError(
      absl::StrCat(what, ": cancelled before all of its ", n, " elements ran"));
}

}  // namespace sluice
