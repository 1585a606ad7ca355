// InstructionPool: owns every Instruction of a VM, recycles retired ones to producers
// without a heap allocation per instruction, and bounds how many are in flight
// (submitted, not yet retired): a producer faster than the devices waits here instead of
// growing memory without limit.
#ifndef SLUICE_VM_INTERNAL_INSTRUCTION_POOL_H_
#define SLUICE_VM_INTERNAL_INSTRUCTION_POOL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/intrusive_queue.h"
#include "core/plain_mutex.h"
#include "core/waker.h"
#include "vm/counters.h"
#include "vm/instruction.h"
#include "vm/step_sequence.h"

namespace sluice::vm::internal {

// Thread-safe. Destroyed after every instruction came back (the VM drains first).
// Cache-line aligned: held by pointer, it would otherwise share lines with whatever the heap
// put beside it; its counters are written by the producer and the scheduler.
class alignas(64) InstructionPool {
 public:
  InstructionPool(int64_t max_in_flight, std::chrono::nanoseconds spin, VmCounters* counters);
  InstructionPool(const InstructionPool&) = delete;
  InstructionPool& operator=(const InstructionPool&) = delete;

  // Producer: fills an empty `cache` (a producer-private chain) from the recycled list, or
  // with a new block. ProducerPort::Allocate takes instructions from the cache.
  void Refill(Chain<Instruction>& cache);
  // Producer: gives back instructions it allocated and filled but will not submit.
  void Free(Chain<Instruction> chain);
  // Producer: gives back a cache of instructions it never handed out (still clean: no
  // Reset, so giving back a large cache costs O(1)).
  void ReturnUnused(Chain<Instruction> cache);

  // Producer: reserves room for `n` instructions about to be submitted, waiting while the
  // VM is full (calling `kick` first, so that the scheduler makes progress even when it
  // runs on producer threads). FailedPrecondition once Close() was called; InvalidArgument
  // when n exceeds the bound itself.
  // `after_close` lets the VM's own shutdown barrier through.
  absl::Status Reserve(int64_t n, absl::FunctionRef<void()> kick, bool after_close = false);
  // Waits until nothing is in flight.
  void WaitIdle();
  // Scheduler: retired instructions (already Reset) back to the free list; frees room.
  void Recycle(Chain<Instruction> chain);
  // Makes waiting and future Reserve calls fail.
  void Close();

  // Producer: an empty StepSequence for a new run (a recycled one keeps its steps' memory).
  FusedRun TakeFused();
  // Scheduler: the run of a retired instruction. Beyond kMaxIdleFused idle runs the pool
  // frees them instead, so a burst of runs in flight does not pin its memory.
  void RecycleFused(FusedRun fused);

  int64_t in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  int64_t max_in_flight() const { return max_in_flight_; }

 private:
  static constexpr int kBlockSize = 256;
  // Runs retire in bursts as large as what a producer issued while the scheduler waited
  // for a core; a run freed here is a producer's allocation freed on this thread, and the
  // producer's next run allocates its steps again (one block per step). An idle run holds
  // at most VmOptions::max_fused_steps steps of an Instruction each: about 32 KiB, so at
  // most 8 MiB wait here.
  static constexpr size_t kMaxIdleFused = 256;

  const int64_t max_in_flight_;
  const std::chrono::nanoseconds spin_;
  VmCounters* const counters_;

  IntrusiveQueue<Instruction> free_;
  // seq_cst: Reserve sleeps on it through waker_.
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> closed_{false};
  Waker waker_;

  PlainMutex fused_mu_;  // once per run on each side
  std::vector<FusedRun> idle_fused_ ABSL_GUARDED_BY(fused_mu_);

  absl::Mutex blocks_mu_;
  std::vector<std::unique_ptr<Instruction[]>> blocks_ ABSL_GUARDED_BY(blocks_mu_);
};

}  // namespace sluice::vm::internal

#endif  // SLUICE_VM_INTERNAL_INSTRUCTION_POOL_H_
