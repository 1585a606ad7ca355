#include "vm/recorder.h"

#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "vm/kernel.h"
#include "vm/op_sequence.h"
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
      return absl::StrCat("release ", seq, " ", stream, " blob=", BlobIds(i.outputs));
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

}  // namespace

void Recorder::RecordChain(const Instruction* head) {
  // An OpSequence is written as its steps (op and release lines on its stream, each after
  // the one before), so a recording names real kernels and replays anywhere. In a batch,
  // the first step takes the sequence's predecessors and later lines that depended on the
  // sequence depend on its last step.
  absl::flat_hash_map<const Instruction*, int> last_line;
  std::vector<std::string> lines;
  const bool precomputed = head != nullptr && head->precomputed;
  auto after = [&](std::string& line, const std::vector<int>& preds) {
    if (precomputed) absl::StrAppend(&line, " after=", absl::StrJoin(preds, ","));
  };
  for (const Instruction* i = head; i != nullptr; i = i->next) {
    std::vector<int> preds;
    for (const Instruction* p : i->predecessors) preds.push_back(last_line.at(p));
    const auto* sequence =
        i->kind == InstructionKind::kOpCall ? dynamic_cast<const OpSequence*>(i->kernel) : nullptr;
    if (sequence != nullptr && sequence->size() > 0) {
      for (const Instruction& step : sequence->steps()) {
        // A step runs on the sequence's stream under the sequence's number.
        std::string line = InstructionLine(step, i->stream->name(), i->seq);
        after(line, preds);
        if (step.kind == InstructionKind::kOpCall) absl::StrAppend(&line, AttrsField(step));
        lines.push_back(std::move(line));
        preds = {static_cast<int>(lines.size()) - 1};
      }
    } else {
      std::string line = InstructionLine(*i, i->stream != nullptr ? i->stream->name() : "", i->seq);
      after(line, preds);
      if (i->kind == InstructionKind::kOpCall) absl::StrAppend(&line, AttrsField(*i));
      lines.push_back(std::move(line));
    }
    last_line[i] = static_cast<int>(lines.size()) - 1;
  }
  absl::MutexLock lock(&mu_);
  if (precomputed) WriteLine(absl::StrCat("batch ", lines.size()));
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

}  // namespace sluice::vm
