#include "vm/internal/instruction_pool.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::vm::internal {

InstructionPool::InstructionPool(int64_t max_in_flight, std::chrono::nanoseconds spin,
                                 VmCounters* counters)
    : max_in_flight_(max_in_flight), spin_(spin), counters_(counters) {}

void InstructionPool::Refill(Chain<Instruction>& cache) {
  cache = free_.TakeAll();
  if (cache.empty()) {
    auto block = std::make_unique<Instruction[]>(kBlockSize);
    for (int i = 0; i < kBlockSize; ++i) cache.PushBack(&block[i]);
    absl::MutexLock lock(&blocks_mu_);
    blocks_.push_back(std::move(block));
  }
}

void InstructionPool::Free(Chain<Instruction> chain) {
  Chain<Instruction> reset;
  for (Instruction* i = chain.head; i != nullptr;) {
    Instruction* next = i->next;
    if (i->fused != nullptr) {
      // Runs are built in a producer's buffer after their room was reserved and are never
      // refused, so a run freed here has had no steps that could make blobs private.
      SLUICE_CHECK(i->fused->private_blobs() == 0);
      RecycleFused(std::move(i->fused));
    }
    i->Reset();
    reset.PushBack(i);
    i = next;
  }
  free_.Push(reset);
}

void InstructionPool::ReturnUnused(Chain<Instruction> cache) {
  if (!cache.empty()) free_.Push(cache);
}

absl::Status InstructionPool::Reserve(int64_t n, absl::FunctionRef<void()> kick, bool after_close) {
  if (n > max_in_flight_) {
    return absl::InvalidArgumentError(absl::StrCat("cannot submit ", n,
                                                   " instructions at once: the VM holds at most ",
                                                   max_in_flight_, " in flight (max_in_flight)"));
  }
  bool waited = false;
  while (true) {
    if (!after_close && closed_.load(std::memory_order_acquire)) {
      return absl::FailedPreconditionError("the VM is shut down");
    }
    int64_t current = in_flight_.load(std::memory_order_seq_cst);
    while (current + n <= max_in_flight_) {
      if (in_flight_.compare_exchange_weak(current, current + n, std::memory_order_seq_cst)) {
        int64_t high = counters_->max_in_flight.load(std::memory_order_relaxed);
        while (current + n > high && !counters_->max_in_flight.compare_exchange_weak(
                                         high, current + n, std::memory_order_relaxed)) {
        }
        if (waited) VmCounters::Add(counters_->submit_waits);
        return absl::OkStatus();
      }
    }
    waited = true;
    kick();
    waker_.Wait(
        [&] {
          return in_flight_.load(std::memory_order_seq_cst) + n <= max_in_flight_ ||
                 (!after_close && closed_.load(std::memory_order_seq_cst));
        },
        spin_);
  }
}

void InstructionPool::Recycle(Chain<Instruction> chain) {
  if (chain.empty()) return;
  const int64_t n = static_cast<int64_t>(chain.size);
  free_.Push(chain);
  in_flight_.fetch_sub(n, std::memory_order_seq_cst);
  waker_.Notify();
}

FusedRun InstructionPool::TakeFused() {
  {
    PlainMutexLock lock(&fused_mu_);
    if (!idle_fused_.empty()) {
      FusedRun fused = std::move(idle_fused_.back());
      idle_fused_.pop_back();
      return fused;
    }
  }
  return FusedRun(new StepSequence());
}

void InstructionPool::RecycleFused(FusedRun fused) {
  PlainMutexLock lock(&fused_mu_);
  if (idle_fused_.size() < kMaxIdleFused) idle_fused_.push_back(std::move(fused));
}

void InstructionPool::WaitIdle() {
  waker_.Wait([this] { return in_flight_.load(std::memory_order_seq_cst) == 0; }, spin_);
}

void InstructionPool::Close() {
  closed_.store(true, std::memory_order_seq_cst);
  waker_.Notify();
}

}  // namespace sluice::vm::internal
