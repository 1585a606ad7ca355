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

absl::string_view Instruction::name() const {
  if (kind == InstructionKind::kOpCall && kernel != nullptr) return kernel->name();
  return InstructionKindName(kind);
}

std::string Instruction::DebugString() const {
  std::string text = kind == InstructionKind::kOpCall ? absl::StrCat("op '", name(), "'")
                                                       : std::string(name());
  absl::StrAppend(&text, " #", seq);
  if (stream != nullptr) absl::StrAppend(&text, " on ", stream->name());
  if (wait_target != nullptr) absl::StrAppend(&text, " -> ", wait_target->name());
  return text;
}

void Instruction::Reset() {
  kind = InstructionKind::kOpCall;
  stream = nullptr;
  wait_target = nullptr;
  kernel = nullptr;
  attrs.reset();
  inputs.clear();
  outputs.clear();
  blob_callback = nullptr;
  barrier_callback = nullptr;
  on_retire = nullptr;
  precomputed = false;
  predecessors.clear();
  seq = 0;
  state = State::kFree;
  next = nullptr;
  pending = 0;
  received = 0;
  dispatch_successors.clear();
  done_successors.clear();
  event.Reset();
  status = absl::OkStatus();
  host_clock.clear();
  done_clock.clear();
}

}  // namespace sluice::vm
