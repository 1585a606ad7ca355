#include "vm/internal/thread_ctx.h"

#include <algorithm>

#include "core/spin_wait.h"
#include "core/status.h"
#include "core/thread_name.h"
#include "vm/internal/instruction_executor.h"
#include "vm/internal/stream_policy.h"
#include "vm/stream.h"

namespace sluice::vm {

ThreadCtx::ThreadCtx(std::string name, InstructionExecutor* executor, CompletionSink* sink,
                     std::chrono::nanoseconds spin, std::chrono::nanoseconds idle_spin)
    : name_(std::move(name)),
      executor_(executor),
      sink_(sink),
      spin_(spin),
      idle_spin_(idle_spin) {}

ThreadCtx::~ThreadCtx() { SLUICE_CHECK(!thread_.joinable()); }

void ThreadCtx::Start() {
  thread_ = std::thread([this] {
    SetCurrentThreadName("sluice-" + name_);
    Loop();
  });
}

void ThreadCtx::Dispatch(Chain<Instruction> chain) {
  if (queue_.Push(chain)) waker_.Notify();
}

void ThreadCtx::Poke() {
  poked_.store(true, std::memory_order_seq_cst);
  waker_.Notify();
}

void ThreadCtx::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_seq_cst);
  waker_.Notify();
  thread_.join();
}

bool ThreadCtx::DeferKickToWorker() {
  if (!busy_.load(std::memory_order_seq_cst)) return false;
  kick_requested_.store(true, std::memory_order_seq_cst);
  // The worker may have finished the batch before seeing the request.
  return busy_.load(std::memory_order_seq_cst);
}

bool ThreadCtx::HasWork() const {
  return !queue_.empty() || poked_.load(std::memory_order_seq_cst) ||
         stop_.load(std::memory_order_seq_cst);
}

void ThreadCtx::AwaitRan(const Instruction::HostWait& wait) const {
  Stream* stream = wait.stream;
  auto ran = [stream, seq = wait.seq] {
    return stream->ran_seq.load(std::memory_order_seq_cst) >= seq;
  };
  if (ran()) return;
  // The other worker is usually one op away: spin (yielding the core after a moment, in
  // case that worker is waiting for it), then park until it announces progress.
  if (SpinFor(ran, spin_)) return;
  stream->progress.Wait(ran, std::chrono::nanoseconds(0));
}

void ThreadCtx::Loop() {
  std::vector<Stream*> touched;
  while (true) {
    waker_.Wait([this] { return HasWork(); }, idle_spin_);
    Chain<Instruction> done;
    if (poked_.exchange(false, std::memory_order_seq_cst)) {
      for (Stream* stream : async_streams_) stream->policy()->Collect(*stream, done);
    }
    busy_.store(true, std::memory_order_seq_cst);
    Chain<Instruction> batch = queue_.TakeAll();
    for (Instruction* instruction = batch.head; instruction != nullptr;) {
      // Read the link first: once reported done, the instruction belongs to the scheduler.
      Instruction* next = instruction->next;
      Stream* stream = instruction->stream;
      StreamPolicy* policy = stream->policy();
      for (const Instruction::HostWait& wait : instruction->host_waits) AwaitRan(wait);
      const uint64_t stream_seq = instruction->stream_seq;
      executor_->Run(instruction);
      if (policy->synchronous()) {
        // After the run (and the checker's launch hook): a host waiter that sees this
        // number may rely on everything the instruction did.
        stream->ran_seq.store(stream_seq, std::memory_order_seq_cst);
        stream->progress.Notify();
      } else {
        if (std::find(touched.begin(), touched.end(), stream) == touched.end()) {
          touched.push_back(stream);
        }
        if (std::find(async_streams_.begin(), async_streams_.end(), stream) ==
            async_streams_.end()) {
          async_streams_.push_back(stream);
        }
      }
      policy->OnLaunched(*stream, instruction, done);
      instruction = next;
    }
    for (Stream* stream : touched) stream->policy()->Flush(*stream, *this, done);
    touched.clear();
    busy_.store(false, std::memory_order_seq_cst);
    const bool kick = kick_requested_.exchange(false, std::memory_order_seq_cst);
    if (!done.empty()) {
      sink_->Complete(done);
    } else if (kick) {
      sink_->Kick();
    }
    if (batch.empty() && stop_.load(std::memory_order_seq_cst) && queue_.empty()) {
      // The VM stops a ThreadCtx only after every instruction retired.
      return;
    }
  }
}

}  // namespace sluice::vm
