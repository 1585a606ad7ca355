// IntraOpPool: the threads that split one kernel's work — a loop over independent index
// ranges — across the host's cores, so that a large matmul, a compiled tile program or a
// large elementwise loop does not run on one VM worker alone. The cpu ep::Device owns one
// (ep::Device::intra_op_pool); kernels reach it through a ParallelScope, which adds the VM's
// cancel flag and statistics. It replaces oneTBB's parallel_for inside kernels: these are
// the project's own threads, so ThreadSanitizer sees their synchronization, cancellation
// reaches them, and the VM's statistics count them.
//
// Fork-join with the caller working: ParallelFor cuts [0, n) into chunks, publishes the job,
// and claims chunks itself alongside whichever helpers pick the job up; it returns once every
// chunk ran (or was skipped by a cancel). A helper that is preempted holds at most one chunk,
// so the caller waits for it at most once per helper. Helper threads start on the first call
// that has more than one chunk, and sleep on a mutex between jobs.
#ifndef SLUICE_CORE_INTRA_OP_POOL_H_
#define SLUICE_CORE_INTRA_OP_POOL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace sluice {

// Statistics of parallel regions. Thread-safe; every counter is relaxed (nothing is
// published through them).
struct ParallelCounters {
  std::atomic<int64_t> regions{0};         // ParallelFor calls that split their range
  std::atomic<int64_t> chunks{0};          // chunks run, by the caller or a helper
  std::atomic<int64_t> helped_chunks{0};   // of those, chunks a helper thread ran
  std::atomic<int64_t> skipped_chunks{0};  // chunks not run because the work was cancelled
};

// Thread-safe: any number of threads may call ParallelFor at once (each caller works on its
// own job and waits only for its own chunks). The destructor joins the helpers; no call may
// be running then.
class IntraOpPool {
 public:
  // `parallelism`: how many threads may run one job's chunks, the caller included (so
  // parallelism - 1 helper threads). 0 means std::thread::hardware_concurrency().
  explicit IntraOpPool(int parallelism = 0);
  ~IntraOpPool();
  IntraOpPool(const IntraOpPool&) = delete;
  IntraOpPool& operator=(const IntraOpPool&) = delete;

  int parallelism() const { return parallelism_; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), each at least `grain` long
  // (but the last), on the calling thread and the helpers; returns when all have returned.
  // `fn` must be safe to call concurrently on disjoint ranges. If a chunk throws, no further
  // chunk starts, the call joins the ones running, and rethrows the first exception on the
  // calling thread (the kernel's entry point turns it into a Status).
  // Before each chunk, `cancel` (may be null) is read with acquire ordering; once it is true
  // the chunks not yet started are skipped and the call returns false. True when every chunk
  // ran. Everything the chunks wrote happens-before the return. A range that does not split
  // (one chunk's worth, parallelism 1, or a call from inside a chunk: a nested region) runs
  // as one fn(0, n) on the calling thread. `counters` (may be null) is counted.
  bool ParallelFor(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn,
                   const std::atomic<bool>* cancel = nullptr, ParallelCounters* counters = nullptr);

  // How many helper threads have started (0 until the first split region).
  int started_helpers() const;

 private:
  struct Job;

  void StartHelpersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HelperLoop();
  // Claims and runs `job`'s chunks until none is left; `helper` says who is counted. A chunk
  // that throws stops the claiming and leaves its exception in the job (under `mu`).
  static void RunChunks(Job& job, bool helper, absl::Mutex& mu);

  const int parallelism_;
  mutable absl::Mutex mu_;
  std::deque<Job*> jobs_ ABSL_GUARDED_BY(mu_);  // jobs with chunks left to claim
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> helpers_ ABSL_GUARDED_BY(mu_);
};

// What a kernel captures to split its work: a pool (or none, which runs everything on the
// calling thread), the cancel flag of the VM that runs the kernel, and its counters. Value
// type; valid while the pool, the flag and the counters live (the device and the VM), so a
// kernel may capture it in host work that runs later in stream order.
class ParallelScope {
 public:
  ParallelScope() = default;
  ParallelScope(IntraOpPool* pool, const std::atomic<bool>* cancel, ParallelCounters* counters)
      : pool_(pool), cancel_(cancel), counters_(counters) {}

  // IntraOpPool::ParallelFor, or fn(0, n) on this thread without a pool. Cancelled, naming
  // `what`, when the VM's cancel skipped chunks (the outputs are then incomplete).
  absl::Status For(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn,
                   const char* what = "parallel region") const;

  IntraOpPool* pool() const { return pool_; }

 private:
  IntraOpPool* pool_ = nullptr;
  const std::atomic<bool>* cancel_ = nullptr;
  ParallelCounters* counters_ = nullptr;
};

}  // namespace sluice

#endif  // SLUICE_CORE_INTRA_OP_POOL_H_
