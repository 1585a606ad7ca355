#include "vm/sync_checker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "vm/instruction.h"
#include "vm/internal/blob_lifecycle.h"
#include "vm/internal/stream_policy.h"
#include "vm/kernel.h"
#include "vm/stream.h"

namespace sluice::vm {
namespace {

// What retired accesses of `blob` certify (the lifecycle's checker accessor).
std::vector<uint32_t>& RetiredClock(Blob* blob) {
  return internal::BlobLifecycle::Checker::retired_clock(blob);
}

void Join(std::vector<uint32_t>& into, const std::vector<uint32_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

uint32_t At(const std::vector<uint32_t>& clock, int index) {
  return index < static_cast<int>(clock.size()) ? clock[index] : 0;
}

}  // namespace

std::string SyncViolation::ToString() const {
  if (alias) {
    return absl::StrCat(second, " writes ", blob, " as its ", output, ", which is also its ", first,
                        ": an alias its op does not declare in place");
  }
  return absl::StrCat(blob, ": ", second, " is not ordered after ", first);
}

std::vector<uint32_t>& SyncChecker::StreamClock(int index) {
  if (static_cast<int>(clocks_.size()) <= index) clocks_.resize(index + 1);
  return clocks_[index];
}

void SyncChecker::OnSubmit(Instruction* instruction) {
  absl::MutexLock lock(&mu_);
  instruction->host_clock = host_;
}

void SyncChecker::OnLaunch(Instruction* instruction) {
  Stream* stream = instruction->stream;
  const int s = stream->dense_index();
  absl::MutexLock lock(&mu_);
  Clock& clock = StreamClock(s);
  Join(clock, instruction->host_clock);
  const void* worker = stream->thread_ctx();
  if (instruction->joins_worker_clock) Join(clock, worker_clocks_[worker]);
  for (const Instruction::HostWait& wait : instruction->host_waits) {
    // The worker waited until the source stream ran the StreamWait.
    auto it = host_wait_clocks_.find({wait.stream->dense_index(), wait.seq});
    Join(clock,
         it != host_wait_clocks_.end() ? it->second : StreamClock(wait.stream->dense_index()));
  }
  Tick(clock, s);
  switch (instruction->kind) {
    case InstructionKind::kOpCall:
      // A StepSequence reports its steps' accesses as it launches them (OnStepLaunch).
      if (instruction->kernel == nullptr || !instruction->kernel->checks_own_steps()) {
        CheckOperands(*instruction, s, clock);
      }
      break;
    case InstructionKind::kStreamWait: {
      const Stream* target = instruction->wait_target;
      if (WaitsOnHost(*stream, *target)) {
        // A host wait: the target's consumers join this point when their worker has waited
        // for it, not now (the target may still be running earlier work).
        host_wait_clocks_[{s, instruction->stream_seq}] = clock;
      } else {
        const Clock snapshot = clock;  // the point recorded on the source stream
        Join(StreamClock(target->dense_index()), snapshot);
      }
      break;
    }
    case InstructionKind::kRelease:
      // A drop of a shared release: gathered now, checked by its last drop (OnLastDrop).
      if (instruction->release_count != nullptr) {
        Join(drop_clocks_[instruction->release_count], clock);
        break;
      }
      CheckOperands(*instruction, s, clock);
      break;
    case InstructionKind::kAccessBlob:
      CheckOperands(*instruction, s, clock);
      break;
    case InstructionKind::kRecordEvent:
    case InstructionKind::kBarrier:
      break;
  }
  // What this instruction's completion certifies: everything its stream ran up to it.
  instruction->done_clock = StreamClock(s);
  if (stream->policy()->synchronous()) Join(worker_clocks_[worker], instruction->done_clock);
}

void SyncChecker::Tick(Clock& clock, int s) {
  if (static_cast<int>(clock.size()) <= s) clock.resize(s + 1, 0);
  ++clock[s];
}

void SyncChecker::CheckAliases(const Instruction& instruction) {
  const InPlaceContract& contract = instruction.kernel->in_place();
  const int n_in = static_cast<int>(instruction.inputs.size());
  const int n_out = static_cast<int>(instruction.outputs.size());
  for (int o = 0; o < n_out; ++o) {
    for (int i = 0; i < n_in; ++i) {
      if (instruction.inputs[i] != instruction.outputs[o]) continue;
      if (contract.Allows(i, o, n_in, n_out)) continue;
      // Its bytes are never read: the blob may be an output's now (a hand-off after its
      // early release).
      if (instruction.kernel->ReadsShapeOnly(i)) continue;
      ++violation_count_;
      ++alias_count_;
      if (static_cast<int>(violations_.size()) < kMaxKeptViolations) {
        SyncViolation violation;
        violation.alias = true;
        violation.blob = instruction.outputs[o]->DebugName();
        violation.first = absl::StrCat("input ", i);
        violation.output = absl::StrCat("output ", o);
        violation.second = instruction.DebugString();
        violations_.push_back(std::move(violation));
      }
    }
  }
}

void SyncChecker::CheckOperands(const Instruction& instruction, int stream, const Clock& clock) {
  if (instruction.kind == InstructionKind::kOpCall && instruction.kernel != nullptr &&
      instruction.kernel->in_place().declared && !instruction.outputs.empty()) {
    CheckAliases(instruction);
  }
  const OpKernel* kernel =
      instruction.kind == InstructionKind::kOpCall ? instruction.kernel : nullptr;
  for (size_t i = 0; i < instruction.inputs.size(); ++i) {
    if (kernel != nullptr && kernel->ReadsShapeOnly(static_cast<int>(i))) continue;
    Blob* blob = instruction.inputs[i];
    Check(instruction, blob->id(), blob->DebugName(), /*write=*/false, stream, clock);
  }
  for (Blob* blob : instruction.outputs) {
    Check(instruction, blob->id(), blob->DebugName(), /*write=*/true, stream, clock);
  }
}

void SyncChecker::CertifyStep(Instruction* outer, const Stream& stream, const Clock& clock) {
  // The outer instruction's completion certifies every step launched so far (its done
  // clock is read only once it completed, after its last step).
  outer->done_clock = clock;
  if (stream.policy()->synchronous()) Join(worker_clocks_[stream.thread_ctx()], clock);
}

void SyncChecker::OnStepLaunch(Instruction* outer, const Instruction& step) {
  Stream* stream = outer->stream;
  const int s = stream->dense_index();
  absl::MutexLock lock(&mu_);
  Clock& clock = StreamClock(s);
  Tick(clock, s);
  CheckOperands(step, s, clock);  // a Release lists its blob as an output: a write
  CertifyStep(outer, *stream, clock);
}

void SyncChecker::OnNestedStepsDone(Instruction* outer) {
  Stream* stream = outer->stream;
  absl::MutexLock lock(&mu_);
  CertifyStep(outer, *stream, StreamClock(stream->dense_index()));
}

void SyncChecker::OnSharedDrop(Instruction* outer, const Instruction& step) {
  Stream* stream = outer->stream;
  const int s = stream->dense_index();
  absl::MutexLock lock(&mu_);
  Clock& clock = StreamClock(s);
  Tick(clock, s);
  Join(drop_clocks_[step.release_count], clock);
  CertifyStep(outer, *stream, clock);
}

void SyncChecker::OnLastDrop(Instruction* outer, const Instruction& step) {
  Stream* stream = outer->stream;
  const int s = stream->dense_index();
  absl::MutexLock lock(&mu_);
  Clock& clock = StreamClock(s);
  auto it = drop_clocks_.find(step.release_count);
  if (it != drop_clocks_.end()) {
    Join(clock, it->second);
    drop_clocks_.erase(it);
  }
  CheckOperands(step, s, clock);  // the release: a write of its blob
  CertifyStep(outer, *stream, clock);
}

void SyncChecker::OnSequencePassed(const Instruction& outer, const void* sequence, uint64_t run_tag,
                                   uint32_t steps) {
  absl::MutexLock lock(&mu_);
  auto& [tag, clock] = sequence_clocks_[{sequence, steps}];
  tag = run_tag;
  clock = StreamClock(outer.stream->dense_index());
}

void SyncChecker::OnSequenceWaited(const Instruction& outer, const void* source, uint64_t run_tag,
                                   uint32_t steps) {
  absl::MutexLock lock(&mu_);
  auto it = sequence_clocks_.find({source, steps});
  if (it == sequence_clocks_.end() || it->second.first != run_tag) return;
  Join(StreamClock(outer.stream->dense_index()), it->second.second);
}

void SyncChecker::OnDoneEdge(const Instruction& done, Instruction* successor) {
  Join(successor->host_clock, done.done_clock);
}

void SyncChecker::OnEagerRetired(const Instruction& instruction) {
  if (instruction.done_clock.empty()) return;
  if (!instruction.IsCompletionMarker() && !instruction.stream->policy()->synchronous()) return;
  for (Blob* blob : instruction.inputs) Join(RetiredClock(blob), instruction.done_clock);
  for (Blob* blob : instruction.outputs) {
    Join(RetiredClock(blob), instruction.done_clock);
  }
}

void SyncChecker::OnEagerReceived(Instruction* instruction) {
  for (Blob* blob : instruction->inputs) Join(instruction->host_clock, RetiredClock(blob));
  for (Blob* blob : instruction->outputs) {
    Join(instruction->host_clock, RetiredClock(blob));
  }
}

void SyncChecker::OnBarrierReceived(const Instruction& barrier) {
  absl::MutexLock lock(&mu_);
  barriers_.push_back(PendingBarrier{barrier.received, std::move(unclaimed_)});
  unclaimed_.clear();
}

void SyncChecker::OnRetired(const Instruction& instruction) {
  if (instruction.done_clock.empty()) return;  // never launched (skipped or cancelled)
  absl::MutexLock lock(&mu_);
  for (PendingBarrier& barrier : barriers_) {
    if (barrier.received > instruction.received) {
      Join(barrier.done, instruction.done_clock);
      return;
    }
  }
  Join(unclaimed_, instruction.done_clock);
}

void SyncChecker::OnBarrierFired(const Instruction& barrier) {
  absl::MutexLock lock(&mu_);
  // Barriers fire in receive order: a later one waits for the earlier one to retire.
  for (size_t i = 0; i < barriers_.size(); ++i) {
    if (barriers_[i].received != barrier.received) continue;
    Join(host_, barriers_[i].done);
    // A later barrier certifies everything this one did.
    if (i + 1 < barriers_.size()) Join(barriers_[i + 1].done, barriers_[i].done);
    barriers_.erase(barriers_.begin() + static_cast<ptrdiff_t>(i));
    // Host-wait points received before the barrier have served their consumers (all of
    // them retired); a consumer received later that still names one joins the source
    // stream's current clock instead, which has passed the point.
    if (barriers_.empty()) host_wait_clocks_.clear();
    return;
  }
}

void SyncChecker::OnHostWaited(const Instruction& instruction) {
  absl::MutexLock lock(&mu_);
  Join(host_, instruction.done_clock);
}

void SyncChecker::Check(const Instruction& instruction, uint64_t blob_id,
                        const std::string& blob_name, bool write, int stream, const Clock& clock) {
  History& history = history_[blob_id];
  auto describe = [&](bool w) {
    return absl::StrCat(instruction.DebugString(), w ? " (write)" : " (read)");
  };
  const Access& last_write = history.write;
  if (last_write.stream >= 0 && last_write.tick > At(clock, last_write.stream)) {
    Report(blob_name, last_write, describe(write));
  }
  if (!write) {
    const uint32_t tick = At(clock, stream);
    for (Access& read : history.reads) {
      if (read.stream == stream) {
        read.tick = tick;
        read.who = describe(false);
        return;
      }
    }
    history.reads.push_back(Access{stream, tick, describe(false)});
    return;
  }
  for (const Access& read : history.reads) {
    if (read.stream != stream && read.tick > At(clock, read.stream)) {
      Report(blob_name, read, describe(true));
    }
  }
  history.reads.clear();
  history.write = Access{stream, At(clock, stream), describe(true)};
}

void SyncChecker::Report(const std::string& blob, const Access& first, std::string second) {
  ++violation_count_;
  if (static_cast<int>(violations_.size()) < kMaxKeptViolations) {
    violations_.push_back(SyncViolation{blob, first.who, std::move(second)});
  }
}

int64_t SyncChecker::alias_count() const {
  absl::MutexLock lock(&mu_);
  return alias_count_;
}

int64_t SyncChecker::violation_count() const {
  absl::MutexLock lock(&mu_);
  return violation_count_;
}

std::vector<SyncViolation> SyncChecker::violations() const {
  absl::MutexLock lock(&mu_);
  return violations_;
}

absl::Status SyncChecker::status() const {
  absl::MutexLock lock(&mu_);
  if (violation_count_ == 0) return absl::OkStatus();
  if (alias_count_ > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(violation_count_, " violation(s), ", alias_count_,
                     " of them undeclared alias(es); first: ", violations_.front().ToString()));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      violation_count_, " unordered access(es); first: ", violations_.front().ToString()));
}

}  // namespace sluice::vm
