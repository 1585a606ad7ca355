#include "vm/instruction.h"

#include "absl/strings/str_cat.h"
#include "vm/kernel.h"
#include "vm/stream.h"

namespace sluice::vm {

absl::string_view InstructionKindName(InstructionKind kind) {
  switch (kind) {
    case InstructionKind::kOpCall:
      return "op_call";
    case InstructionKind::kStreamWait:
      return "stream_wait";
    case InstructionKind::kRecordEvent:
      return "record_event";
    case InstructionKind::kRelease:
      return "release";
    case InstructionKind::kBarrier:
      return "barrier";
    case InstructionKind::kAccessBlob:
      return "access_blob";
  }
  return "unknown";
}

Instruction::Instruction() = default;
Instruction::~Instruction() = default;

absl::string_view Instruction::name() const {
  if (kind == InstructionKind::kOpCall && kernel != nullptr) return kernel->name();
  return InstructionKindName(kind);
}

std::string Instruction::DebugString() const {
  std::string text =
      kind == InstructionKind::kOpCall ? absl::StrCat("op '", name(), "'") : std::string(name());
  absl::StrAppend(&text, " #", outer != nullptr ? outer->seq : seq);
  if (stream != nullptr) absl::StrAppend(&text, " on ", stream->name());
  if (wait_target != nullptr) absl::StrAppend(&text, " -> ", wait_target->name());
  if (origin != nullptr) absl::StrAppend(&text, " (", origin->Describe(), ")");
  return text;
}

void Instruction::Reset() {
  kind = InstructionKind::kOpCall;
  precomputed = false;
  opens_batch = false;
  closes_batch = false;
  fresh_outputs = false;
  keeps_storage = false;
  access_wait_only = false;
  state = State::kFree;
  pending = 0;
  next = nullptr;
  received = 0;
  seq = 0;
  stream = nullptr;
  wait_target = nullptr;
  release_count = nullptr;
  kernel = nullptr;
  outer = nullptr;
  if (!inputs.empty()) inputs.clear();
  if (!outputs.empty()) outputs.clear();
  if (attrs != nullptr) attrs.reset();
  if (!dispatch_successors.empty()) dispatch_successors.clear();
  if (!done_successors.empty()) done_successors.clear();
  stream_seq = 0;
  if (!host_waits.empty()) host_waits.clear();
  if (!status.ok()) status = absl::OkStatus();
  if (event) event.Reset();
  if (!predecessors.empty()) predecessors.clear();
  if (blob_callback) blob_callback = nullptr;
  if (barrier_callback) barrier_callback = nullptr;
  if (on_retire) on_retire = nullptr;
  if (fused != nullptr) fused.reset();  // normally taken back by the pool before
  if (origin != nullptr) origin = nullptr;
  if (!host_clock.empty()) host_clock.clear();
  if (!done_clock.empty()) done_clock.clear();
  joins_worker_clock = false;
}

}  // namespace sluice::vm
