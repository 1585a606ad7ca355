#include "vm/producer_port.h"

#include <utility>

#include "vm/internal/instruction_pool.h"
#include "vm/virtual_machine.h"

namespace sluice::vm {

void ProducerPort::Refill(Chain<Instruction>& cache) { vm_->pool_->Refill(cache); }

void ProducerPort::Free(Chain<Instruction> chain) { vm_->pool_->Free(std::move(chain)); }

void ProducerPort::ReturnUnused(Chain<Instruction> cache) {
  vm_->pool_->ReturnUnused(std::move(cache));
}

absl::Status ProducerPort::ReserveBatch(int64_t n) { return vm_->ReserveBatch(n); }

void ProducerPort::SubmitBatchPart(Chain<Instruction> part, bool first, bool last) {
  vm_->SubmitBatchPart(std::move(part), first, last);
}

void ProducerPort::AttachBuffer(internal::SubmitBuffer* buffer) { vm_->AttachBuffer(buffer); }

void ProducerPort::DetachBuffer(internal::SubmitBuffer* buffer) { vm_->DetachBuffer(buffer); }

void ProducerPort::HandOverBuffers() { vm_->HandOverBuffers(); }

int64_t ProducerPort::held_back() { return vm_->held_back(); }

int64_t ProducerPort::max_buffered() const { return vm_->max_buffered_; }

void ProducerPort::NoteHostWaited(const Instruction& instruction) {
  vm_->NoteHostWaited(instruction);
}

}  // namespace sluice::vm
