#include "vm/recorder.h"

#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "vm/kernel.h"
#include "vm/release_count.h"
#include "vm/step_log.h"
#include "vm/step_sequence.h"
#include "vm/stream.h"

namespace sluice::vm {
namespace {

std::string BlobIds(const BlobPtrs& blobs) {
  return absl::StrJoin(
      blobs, ",", [](std::string* out, const Blob* blob) { absl::StrAppend(out, blob->id()); });
}

std::string ShapeText(const Shape& shape) {
  if (shape.rank() == 0) return "-";
  return absl::StrJoin(shape.dims(), "x");
}

}  // namespace

uint64_t Checksum(absl::Span<const uint8_t> bytes) {
  uint64_t hash = 1469598103934665603ull;
  for (uint8_t b : bytes) {
    hash ^= b;
    hash *= 1099511628211ull;
  }
  return hash;
}

absl::StatusOr<std::unique_ptr<Recorder>> Recorder::Create(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create record file '", path, "': ", std::strerror(errno)));
  }
  std::unique_ptr<Recorder> recorder(new Recorder(path, file));
  absl::MutexLock lock(&recorder->mu_);
  recorder->WriteLine(absl::StrCat("sluice-instructions ", kFormatVersion));
  return recorder;
}

Recorder::Recorder(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

Recorder::~Recorder() { Close().IgnoreError(); }

void Recorder::WriteLine(const std::string& line) {
  if (file_ == nullptr) return;
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fputc('\n', file_) == EOF) {
    write_failed_ = true;
  }
}

void Recorder::OnBlobCreated(const BlobRef& blob, const Stream& stream) {
  RecordBlob(blob, stream.name());
}

void Recorder::RecordBlob(const BlobRef& blob, const std::string& stream_name) {
  std::string line =
      absl::StrCat("blob ", blob->id(), " ", blob->device().ToString(), " ",
                   DataTypeName(blob->dtype()), " ", ShapeText(blob->shape()), " ", stream_name);
  if (!blob->name().empty()) absl::StrAppend(&line, " ", blob->name());
  absl::MutexLock lock(&mu_);
  blobs_.push_back(blob);
  WriteLine(line);
}

namespace {

// One instruction's line without its edges and attributes.
std::string InstructionLine(const Instruction& i, absl::string_view stream, uint64_t seq) {
  switch (i.kind) {
    case InstructionKind::kOpCall:
      return absl::StrCat("op ", seq, " ", stream, " ", i.kernel->name(), " in=", BlobIds(i.inputs),
                          " out=", BlobIds(i.outputs));
    case InstructionKind::kStreamWait:
      return absl::StrCat("wait ", seq, " ", stream, " ", i.wait_target->name(),
                          " blobs=", BlobIds(i.outputs));
    case InstructionKind::kRecordEvent:
      return absl::StrCat("record ", seq, " ", stream, " blobs=", BlobIds(i.outputs));
    case InstructionKind::kRelease:
      return i.release_count != nullptr
                 ? absl::StrCat("release ", seq, " ", stream, " blob=", BlobIds(i.outputs),
                                " drops=", i.release_count->drops())
                 : absl::StrCat("release ", seq, " ", stream, " blob=", BlobIds(i.outputs));
    case InstructionKind::kBarrier:
      return absl::StrCat("barrier ", seq);
    case InstructionKind::kAccessBlob:
      return i.inputs.empty()
                 ? absl::StrCat("access ", seq, " ", stream, " write blob=", BlobIds(i.outputs))
                 : absl::StrCat("access ", seq, " ", stream, " read blob=", BlobIds(i.inputs));
  }
  return "";
}

std::string AttrsField(const Instruction& i) {
  return absl::StrCat(" attrs=", i.attrs != nullptr ? i.attrs->ToString() : "");
}

// The lines of one submitted chain, in record order.
// A StepSequence is written as its steps (op and release lines on its stream, all under
// the sequence's number), so a recording names real kernels and replays anywhere. In a
// batch, the first step takes the sequence's predecessors, each later step follows the
// step before it, and lines that depended on the sequence depend on its last step; a
// step after cross-sequence waits names them (waits=SEQ:STEPS). The batch's lines are
// written in an order where every line comes after its predecessors and after the steps
// it waits for: units in chain order, except that a sequence whose next step waits for
// steps not written yet gives way to the units after it.
class ChainLines {
 public:
  explicit ChainLines(const Instruction* head)
      : precomputed_(head != nullptr && head->precomputed) {
    for (const Instruction* i = head; i != nullptr; i = i->next) {
      Unit unit{i};
      if (i->kind == InstructionKind::kOpCall) {
        const auto* sequence = dynamic_cast<const StepSequence*>(i->kernel);
        if (sequence != nullptr && sequence->steps() > 0) {
          unit.sequence = sequence;
          sequence_unit_.emplace(sequence, static_cast<int>(units_.size()));
        }
      }
      unit_of_.emplace(i, static_cast<int>(units_.size()));
      units_.push_back(unit);
    }
  }

  bool precomputed() const { return precomputed_; }

  // Every line of the chain, each after its predecessors and the steps it waits for.
  std::vector<std::string> Write() {
    size_t first = 0;  // units before it are done
    while (true) {
      while (first < units_.size() && units_[first].done) ++first;
      if (first == units_.size()) break;
      size_t u = first;
      while (u < units_.size() && !Ready(units_[u])) ++u;
      if (u == units_.size()) {
        // No unit can go on: the waits form a cycle (AddWait's contract forbids it). Write
        // the rest without them rather than lose the instructions.
        ignore_waits_ = true;
        continue;
      }
      do {
        WriteNext(units_[u]);
      } while (Ready(units_[u]));
    }
    return std::move(lines_);
  }

 private:
  struct Unit {
    const Instruction* instruction;
    const StepSequence* sequence = nullptr;  // a sequence with steps
    size_t next_step = 0;                    // steps written (sequences)
    size_t next_wait = 0;                    // waits before steps written
    int last_line = -1;                      // its last line written
    bool done = false;
  };

  // The waits before `unit`'s next step that name a sequence of this chain (others order
  // nothing the record can show), as (source unit, steps).
  std::vector<std::pair<int, uint32_t>> WaitsBefore(const Unit& unit) const {
    std::vector<std::pair<int, uint32_t>> waits;
    if (!precomputed_ || unit.sequence == nullptr) return waits;
    const std::vector<StepSequence::Wait>& all = unit.sequence->wait_steps();
    for (size_t w = unit.next_wait; w < all.size() && all[w].before_step == unit.next_step; ++w) {
      auto it = sequence_unit_.find(all[w].source);
      if (it != sequence_unit_.end()) waits.push_back({it->second, all[w].steps});
    }
    return waits;
  }

  bool Ready(const Unit& unit) const {
    if (unit.done) return false;
    if (unit.next_step == 0) {
      for (const Instruction* p : unit.instruction->predecessors) {
        if (!units_[unit_of_.at(p)].done) return false;
      }
    }
    if (ignore_waits_) return true;
    for (const auto& [source, steps] : WaitsBefore(unit)) {
      if (units_[source].next_step < steps) return false;
    }
    return true;
  }

  void After(std::string& line, const std::vector<int>& preds) const {
    if (precomputed_) absl::StrAppend(&line, " after=", absl::StrJoin(preds, ","));
  }

  // Writes `unit`'s next line (a whole unit, or a sequence's next step).
  void WriteNext(Unit& unit) {
    const Instruction& i = *unit.instruction;
    std::vector<int> preds;
    if (unit.next_step == 0) {
      for (const Instruction* p : i.predecessors) preds.push_back(units_[unit_of_.at(p)].last_line);
    } else {
      preds.push_back(unit.last_line);
    }
    std::string line;
    if (unit.sequence != nullptr) {
      line = StepLine(unit, preds);
    } else {
      line = InstructionLine(i, i.stream != nullptr ? i.stream->name() : "", i.seq);
      After(line, preds);
      if (i.kind == InstructionKind::kOpCall) absl::StrAppend(&line, AttrsField(i));
      unit.done = true;
    }
    lines_.push_back(std::move(line));
    unit.last_line = static_cast<int>(lines_.size()) - 1;
  }

  // A sequence's next step, which it then counts written.
  std::string StepLine(Unit& unit, const std::vector<int>& preds) {
    const Instruction& i = *unit.instruction;
    const Instruction& step = unit.sequence->step(static_cast<int>(unit.next_step));
    // A step runs on the sequence's stream under the sequence's number.
    std::string line = InstructionLine(step, i.stream->name(), i.seq);
    After(line, preds);
    const std::vector<std::pair<int, uint32_t>> waits =
        ignore_waits_ ? std::vector<std::pair<int, uint32_t>>() : WaitsBefore(unit);
    if (!waits.empty()) {
      absl::StrAppend(&line,
                      " waits=", absl::StrJoin(waits, ";", [&](std::string* out, const auto& wait) {
                        absl::StrAppend(out, units_[wait.first].instruction->seq, ":", wait.second);
                      }));
    }
    if (step.kind == InstructionKind::kOpCall) absl::StrAppend(&line, AttrsField(step));
    const std::vector<StepSequence::Wait>& all = unit.sequence->wait_steps();
    while (unit.next_wait < all.size() && all[unit.next_wait].before_step == unit.next_step) {
      ++unit.next_wait;
    }
    unit.done = ++unit.next_step == static_cast<size_t>(unit.sequence->steps());
    return line;
  }

  const bool precomputed_;
  std::vector<Unit> units_;
  absl::flat_hash_map<const Instruction*, int> unit_of_;
  absl::flat_hash_map<const StepSequence*, int> sequence_unit_;
  bool ignore_waits_ = false;  // set only for waits that form a cycle (a broken program)
  std::vector<std::string> lines_;
};

}  // namespace

void Recorder::RecordChain(const Instruction* head) {
  ChainLines chain(head);
  const std::vector<std::string> lines = chain.Write();
  absl::MutexLock lock(&mu_);
  if (chain.precomputed()) WriteLine(absl::StrCat("batch ", lines.size()));
  for (const std::string& line : lines) WriteLine(line);
}

void Recorder::RecordExpansion(const Instruction& control,
                               absl::Span<const Instruction* const> steps) {
  const std::string stream = control.stream->name();
  std::vector<std::string> lines;
  lines.reserve(steps.size() + 1);
  lines.push_back(absl::StrCat("expand ", control.seq, " in=", BlobIds(control.inputs),
                               " out=", BlobIds(control.outputs), " steps=", steps.size()));
  for (const Instruction* step : steps) {
    std::string line = InstructionLine(*step, stream, control.seq);
    if (step->kind == InstructionKind::kOpCall) absl::StrAppend(&line, AttrsField(*step));
    lines.push_back(std::move(line));
  }
  absl::MutexLock lock(&mu_);
  for (const std::string& line : lines) WriteLine(line);
}

void Recorder::RecordWrite(uint64_t seq, absl::Span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string line = absl::StrCat("data ", seq, " ");
  line.reserve(line.size() + 2 * bytes.size());
  for (uint8_t b : bytes) {
    line.push_back(kHex[b >> 4]);
    line.push_back(kHex[b & 15]);
  }
  absl::MutexLock lock(&mu_);
  WriteLine(line);
}

void Recorder::RecordChecksum(uint64_t blob_id, uint64_t checksum) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(checksum));
  absl::MutexLock lock(&mu_);
  WriteLine(absl::StrCat("checksum ", blob_id, " ", hex));
}

std::vector<BlobRef> Recorder::LiveBlobs() {
  absl::MutexLock lock(&mu_);
  std::vector<BlobRef> live;
  for (const std::weak_ptr<Blob>& weak : blobs_) {
    if (BlobRef blob = weak.lock()) live.push_back(std::move(blob));
  }
  return live;
}

absl::Status Recorder::Close() {
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return absl::OkStatus();
  WriteLine("end");
  const bool close_failed = std::fclose(file_) != 0;
  file_ = nullptr;
  if (write_failed_ || close_failed) {
    return absl::DataLossError(absl::StrCat("writing record file '", path_, "' failed"));
  }
  return absl::OkStatus();
}

absl::Status RunLoggingSteps(KernelContext& ctx, absl::FunctionRef<absl::Status()> run) {
  Recorder* const recorder = ctx.recorder();
  if (recorder == nullptr || StepLog::Current() != nullptr) return run();
  StepLog log;
  absl::Status status;
  {
    StepLogScope scope(&log);
    status = run();
  }
  recorder->RecordExpansion(*ctx.instruction(), log.steps());
  return status;
}

}  // namespace sluice::vm
