#include "vm/producer_port.h"

#include <utility>

#include "vm/internal/instruction_pool.h"
#include "vm/internal/vm_core.h"

namespace sluice::vm {

void ProducerPort::Refill(Chain<Instruction>& cache) { core_->pool().Refill(cache); }

void ProducerPort::Free(Chain<Instruction> chain) { core_->pool().Free(std::move(chain)); }

void ProducerPort::ReturnUnused(Chain<Instruction> cache) {
  core_->pool().ReturnUnused(std::move(cache));
}

absl::Status ProducerPort::Submit(Chain<Instruction> chain) {
  return core_->Submit(std::move(chain));
}

absl::Status ProducerPort::ReserveBatch(int64_t n) { return core_->ReserveBatch(n); }

void ProducerPort::SubmitBatchPart(Chain<Instruction> part, bool first, bool last) {
  core_->SubmitBatchPart(std::move(part), first, last);
}

void ProducerPort::AttachBuffer(internal::SubmitBuffer* buffer) { core_->AttachBuffer(buffer); }

void ProducerPort::DetachBuffer(internal::SubmitBuffer* buffer) { core_->DetachBuffer(buffer); }

absl::Status ProducerPort::SubmitBuffered(internal::SubmitBuffer* buffer, Chain<Instruction> chain,
                                          bool open) {
  return core_->SubmitBuffered(buffer, std::move(chain), open);
}

bool ProducerPort::AppendToOpenRun(
    internal::SubmitBuffer* buffer, const Stream* stream,
    absl::FunctionRef<void(StepSequence& run, Instruction* head)> add) {
  return core_->AppendToOpenRun(buffer, stream, add);
}

void ProducerPort::HandOverBuffers() { core_->HandOverBuffers(); }

int64_t ProducerPort::held_back() { return core_->held_back(); }

int64_t ProducerPort::max_buffered() const { return core_->max_buffered(); }

void ProducerPort::NoteHostWaited(const Instruction& instruction) {
  core_->NoteHostWaited(instruction);
}

}  // namespace sluice::vm
