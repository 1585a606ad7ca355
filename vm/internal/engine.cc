#include "vm/internal/engine.h"

#include <algorithm>

#include "core/status.h"
#include "core/thread_name.h"
#include "vm/execution_observer.h"
#include "vm/internal/blob_lifecycle.h"
#include "vm/internal/blob_pool.h"
#include "vm/internal/instruction_pool.h"
#include "vm/internal/stream_policy.h"
#include "vm/internal/thread_ctx.h"
#include "vm/stream.h"

namespace sluice::vm {

using internal::BlobLifecycle;

void Engine::DeleteUnused(Blob* blob) { blobs_->Delete(blob); }
namespace {

// Heap order for ready instructions: the earliest received on top.
bool LaterReceived(const Instruction* a, const Instruction* b) { return a->received > b->received; }

}  // namespace

Engine::Engine(EngineOptions options, ExecutionObserver* observer, internal::InstructionPool* pool,
               internal::BlobPool* blobs)
    : options_(options), observer_(observer), pool_(pool), blobs_(blobs) {}

Engine::~Engine() { SLUICE_CHECK(!thread_.joinable()); }

void Engine::Start(absl::AnyInvocable<void()> hand_over) {
  hand_over_ = std::move(hand_over);
  if (options_.dedicated_thread)
    thread_ = std::thread([this] {
      SetCurrentThreadName("sluice-sched");
      SchedulerLoop();
    });
}

void Engine::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_seq_cst);
  waker_.Notify();
  thread_.join();
}

void Engine::Submit(Chain<Instruction> chain) {
  Stream* target = chain.tail->stream;
  incoming_.Push(chain);
  // Caller-thread mode: when the last instruction's worker is busy, its end-of-batch kick
  // schedules this chain too, in one pass with whatever else arrives meanwhile.
  if (!options_.dedicated_thread && target != nullptr &&
      target->thread_ctx()->DeferKickToWorker()) {
    return;
  }
  Kick();
}

void Engine::Bury(Blob* blob) {
  // Only the push that makes the graveyard non-empty notifies: until the scheduler takes
  // it, its wait condition (graveyard non-empty) stays true, so it cannot park past it.
  if (graveyard_.Push(blob) && options_.dedicated_thread) waker_.Notify();
}

void Engine::DeleteBuried() {
  Chain<Blob> buried = graveyard_.TakeAll();
  for (Blob* blob = buried.head; blob != nullptr;) {
    Blob* next = BlobLifecycle::Scheduler::next_buried(*blob);
    SLUICE_CHECK(BlobLifecycle::Scheduler::uses(*blob) == 0);
    blobs_->Delete(blob);
    blob = next;
  }
}

void Engine::Complete(Chain<Instruction> chain) {
  completed_.Push(chain);
  Kick();
}

void Engine::Kick() {
  if (options_.dedicated_thread) {
    waker_.Notify();
    return;
  }
  // Combining: whoever raises the count from zero schedules until every kick it saw was
  // served. A kick's push happens before its fetch_add, which (acq_rel) happens before the
  // owner's next fetch_sub, so the owner's next Step sees the pushed work.
  if (requests_.fetch_add(1, std::memory_order_acq_rel) != 0) return;
  int64_t seen = 1;
  while (true) {
    Step();
    const int64_t before = requests_.fetch_sub(seen, std::memory_order_acq_rel);
    if (before == seen) return;
    seen = before - seen;
  }
}

void Engine::SchedulerLoop() {
  while (true) {
    if (incoming_.empty() && completed_.empty() && !wants_work_.load(std::memory_order_relaxed)) {
      // Out of work. Producers streaming small ops hand over a full buffer within a few
      // microseconds: wait that long for it without touching their buffers (looking would
      // pull each buffer's line away from its producer, the very transfer buffering saves).
      auto work = [this] { return !incoming_.empty() || !completed_.empty(); };
      if (!Waker::SpinWithBackoff(work, kHoldBackWindow)) {
        // Still nothing: from here producers hand over at once, and what they held back
        // before, hand_over_ submits now. In that order: a producer whose append missed this
        // look sees the flag (its buffer's lock orders the two).
        wants_work_.store(true, std::memory_order_seq_cst);
        if (hand_over_) hand_over_();
      }
    }
    waker_.Wait(
        [this] {
          return !incoming_.empty() || !completed_.empty() || !graveyard_.empty() ||
                 stop_.load(std::memory_order_seq_cst);
        },
        options_.spin);
    if (stop_.load(std::memory_order_seq_cst) && incoming_.empty() && completed_.empty()) {
      return;
    }
    if (wants_work_.load(std::memory_order_relaxed)) {
      wants_work_.store(false, std::memory_order_relaxed);
    }
    Step();
  }
}

void Engine::Step() {
  // Taken first: every instruction using a buried blob was accepted before the blob's last
  // reference went away, so it is received in this pass at the latest (held-back ones
  // once hand_over_ ran).
  Chain<Blob> buried = graveyard_.TakeAll();
  Chain<Instruction> done = completed_.TakeAll();
  for (Instruction* instruction = done.head; instruction != nullptr;) {
    Instruction* next = instruction->next;
    Retire(instruction);
    instruction = next;
  }
  ReceiveIncoming();
  if (!buried.empty() && options_.dedicated_thread && hand_over_) {
    // Instructions using a buried blob may still be held back by their producer: have them
    // submitted and count their uses before deciding (caller-thread mode holds none back).
    hand_over_();
    ReceiveIncoming();
  }
  for (Blob* blob = buried.head; blob != nullptr;) {
    Blob* next = BlobLifecycle::Scheduler::next_buried(*blob);
    if (BlobLifecycle::Scheduler::uses(*blob) == 0) {
      blobs_->Delete(blob);
    } else {
      BlobLifecycle::Scheduler::MarkDead(blob);
    }
    blob = next;
  }
  // Barriers that fired during retirement or reception retire themselves now.
  while (!fired_.empty()) {
    std::vector<Instruction*> fired;
    fired.swap(fired_);
    for (Instruction* barrier : fired) FireBarrier(barrier);
  }
  DispatchReady();
  // A batch still arriving in parts may name any retired instruction as a predecessor:
  // keep them (retired, not reused) until its last part is in.
  if (open_batches_ == 0 && !recycled_.empty()) {
    Chain<Instruction> reset;
    for (Instruction* instruction = recycled_.head; instruction != nullptr;) {
      Instruction* next = instruction->next;
      // Reset writes most of an instruction's lines, some last written on other cores.
      if (next != nullptr) PrefetchForWrite(next);
      if (instruction->fused != nullptr) {
        instruction->fused->DropPrivateHolds([this](Blob* blob) { dead_private_.push_back(blob); });
        pool_->RecycleFused(std::move(instruction->fused));
      }
      instruction->Reset();
      reset.PushBack(instruction);
      instruction = next;
    }
    if (!dead_private_.empty()) {
      blobs_->DeleteAll(dead_private_);  // parked together: one lock for the lot
      dead_private_.clear();
    }
    pool_->Recycle(std::move(reset));
    recycled_ = Chain<Instruction>();
  }
}

void Engine::ReceiveIncoming() {
  Chain<Instruction> incoming = incoming_.TakeAll();
  for (Instruction* instruction = incoming.head; instruction != nullptr;) {
    Instruction* next = instruction->next;
    // Each instruction's lines were last written on the producer's core: start moving the
    // next one's (the fields Receive reads: kind .. outputs) while this one is received.
    if (next != nullptr) PrefetchForWrite(next, 3);
    Receive(instruction);
    instruction = next;
  }
}

bool Engine::DispatchSatisfies(const Instruction& from, const Instruction& to) const {
  if (from.stream == to.stream) return true;
  if (from.kind == InstructionKind::kStreamWait && from.wait_target == to.stream) return true;
  if (from.stream->policy()->synchronous()) {
    return from.stream->thread_ctx() == to.stream->thread_ctx();
  }
  return !from.IsCompletionMarker();
}

bool Engine::IsHostWait(const Instruction& from, const Instruction& to) {
  return from.kind == InstructionKind::kStreamWait && to.stream == from.wait_target &&
         WaitsOnHost(*from.stream, *from.wait_target);
}

void Engine::AddEdge(Instruction* from, Instruction* to) {
  if (from == to) return;
  if (DispatchSatisfies(*from, *to)) {
    if (from->state >= Instruction::State::kDispatched) {
      // Already dispatched (or retired: the batch still holds it): a host wait needs its
      // number now, as DispatchReady would have attached it.
      if (IsHostWait(*from, *to)) to->host_waits.push_back({from->stream, from->stream_seq});
      return;
    }
    from->dispatch_successors.push_back(to);
  } else {
    if (from->state == Instruction::State::kRetired) return;
    from->done_successors.push_back(to);
  }
  ++to->pending;
}

void Engine::Receive(Instruction* instruction) {
  if (instruction->opens_batch) ++open_batches_;
  if (instruction->closes_batch) --open_batches_;
  instruction->state = Instruction::State::kReceived;
  instruction->received = ++received_;
  ++unretired_;
  if (instruction->kind == InstructionKind::kBarrier) {
    if (observer_ != nullptr) observer_->OnBarrierReceived(*instruction);
    const int64_t earlier = unretired_ - 1;
    if (earlier == 0) {
      fired_.push_back(instruction);
    } else {
      barriers_.emplace_back(instruction, earlier);
    }
    return;
  }
  for (Blob* blob : instruction->inputs) BlobLifecycle::Scheduler::AddUse(blob);
  for (Blob* blob : instruction->outputs) BlobLifecycle::Scheduler::AddUse(blob);
  if (instruction->stream->in_order()) {
    // Independent collectives would otherwise launch as they become ready, in an order
    // that may differ between ranks. Same stream: satisfied at dispatch, so nearly free.
    Instruction*& last = instruction->stream->last_in_order;
    if (last != nullptr) AddEdge(last, instruction);
    last = instruction;
  }
  if (instruction->precomputed) {
    for (Instruction* from : instruction->predecessors) AddEdge(from, instruction);
  } else {
    if (observer_ != nullptr) observer_->OnEagerReceived(instruction);
    using Dependence = BlobLifecycle::Scheduler;
    for (Blob* blob : instruction->inputs) {
      if (Dependence::last_writer(*blob) != nullptr) {
        AddEdge(Dependence::last_writer(*blob), instruction);
      }
    }
    for (Blob* blob : instruction->outputs) {
      if (Dependence::last_writer(*blob) != nullptr) {
        AddEdge(Dependence::last_writer(*blob), instruction);
      }
      for (size_t r = Dependence::readers_head(blob); r < Dependence::readers(blob).size(); ++r) {
        if (Dependence::readers(blob)[r] != nullptr)
          AddEdge(Dependence::readers(blob)[r], instruction);
      }
    }
    for (Blob* blob : instruction->inputs) Dependence::AddReader(blob, instruction);
    for (Blob* blob : instruction->outputs) Dependence::RecordWrite(blob, instruction);
  }
  if (instruction->pending == 0) MakeReady(instruction);
}

void Engine::MakeReady(Instruction* instruction) {
  ready_.push_back(instruction);
  std::push_heap(ready_.begin(), ready_.end(), LaterReceived);
}

void Engine::DispatchReady() {
  while (!ready_.empty()) {
    std::pop_heap(ready_.begin(), ready_.end(), LaterReceived);
    Instruction* instruction = ready_.back();
    ready_.pop_back();
    instruction->state = Instruction::State::kDispatched;
    Stream* stream = instruction->stream;
    const bool synchronous = stream->policy()->synchronous();
    if (synchronous) instruction->stream_seq = ++stream->dispatched_seq;
    const bool host_ordered = options_.marks_worker_order && synchronous;
    for (Instruction* successor : instruction->dispatch_successors) {
      // A StreamWait between synchronous streams of two ThreadCtxs: nothing on a device
      // holds the consumer back, so its worker does, until this stream ran the StreamWait.
      if (IsHostWait(*instruction, *successor)) {
        successor->host_waits.push_back({stream, instruction->stream_seq});
      } else if (host_ordered && successor->stream != stream) {
        successor->joins_worker_clock = true;
      }
      if (--successor->pending == 0) MakeReady(successor);
    }
    instruction->dispatch_successors.clear();
    ThreadCtx* ctx = stream->thread_ctx();
    auto it = std::find_if(outgoing_.begin(), outgoing_.end(),
                           [ctx](const auto& entry) { return entry.first == ctx; });
    if (it == outgoing_.end()) {
      outgoing_.emplace_back(ctx, Chain<Instruction>());
      it = outgoing_.end() - 1;
    }
    it->second.PushBack(instruction);
  }
  // From here on each instruction belongs to its worker until it comes back completed.
  for (auto& [ctx, chain] : outgoing_) {
    if (!chain.empty()) ctx->Dispatch(std::move(chain));
    chain = Chain<Instruction>();
  }
}

void Engine::Retire(Instruction* instruction) {
  instruction->state = Instruction::State::kRetired;
  if (instruction->kind != InstructionKind::kBarrier &&
      instruction->stream->last_in_order == instruction) {
    instruction->stream->last_in_order = nullptr;  // it may be recycled from here on
  }
  if (instruction->fused != nullptr) instruction->fused->MarkKept();
  for (Instruction* successor : instruction->done_successors) {
    if (observer_ != nullptr) observer_->OnDoneEdge(*instruction, successor);
    if (--successor->pending == 0) MakeReady(successor);
  }
  if (observer_ != nullptr && instruction->kind != InstructionKind::kBarrier) {
    observer_->OnRetired(*instruction);
  }
  if (!instruction->precomputed) {
    if (observer_ != nullptr && instruction->kind != InstructionKind::kBarrier) {
      observer_->OnEagerRetired(*instruction);
    }
    for (Blob* blob : instruction->inputs) ForgetReader(blob, instruction);
    for (Blob* blob : instruction->outputs)
      BlobLifecycle::Scheduler::ForgetWriter(blob, instruction);
  }
  // Last use of the operands: a blob whose references are gone may be deleted here.
  for (Blob* blob : instruction->inputs) ReleaseUse(blob);
  for (Blob* blob : instruction->outputs) ReleaseUse(blob);
  --unretired_;
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    if (it->first->received > instruction->received && --it->second == 0) {
      fired_.push_back(it->first);
      it = barriers_.erase(it);
    } else {
      ++it;
    }
  }
  if (instruction->on_retire) instruction->on_retire(*instruction);
  // Reset when recycled (end of the pass): until then it stays a retired instruction that
  // a batch still arriving in parts may name as a predecessor.
  recycled_.PushBack(instruction);
}

void Engine::ForgetReader(Blob* blob, Instruction* instruction) {
  auto& readers = BlobLifecycle::Scheduler::readers(blob);
  size_t& head = BlobLifecycle::Scheduler::readers_head(blob);
  if (head < readers.size() && readers[head] == instruction) {
    ++head;
    while (head < readers.size() && readers[head] == nullptr) ++head;
  } else {
    for (size_t r = head; r < readers.size(); ++r) {
      if (readers[r] == instruction) {
        readers[r] = nullptr;
        break;
      }
    }
  }
  if (head == readers.size()) {
    readers.clear();
    head = 0;
  } else if (head >= 64 && 2 * head >= readers.size()) {
    readers.erase(readers.begin(), readers.begin() + static_cast<ptrdiff_t>(head));
    head = 0;
  }
}

void Engine::ReleaseUse(Blob* blob) {
  if (BlobLifecycle::Scheduler::DropUse(blob)) blobs_->Delete(blob);
}

void Engine::FireBarrier(Instruction* barrier) {
  if (observer_ != nullptr) observer_->OnBarrierFired(*barrier);
  if (barrier->barrier_callback) barrier->barrier_callback();
  Retire(barrier);
}

}  // namespace sluice::vm
