#include "vm/recorder.h"

#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "vm/kernel.h"
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

void Recorder::RecordChain(const Instruction* head) {
  absl::flat_hash_map<const Instruction*, int> index;
  std::vector<std::string> lines;
  bool precomputed = head != nullptr && head->precomputed;
  int n = 0;
  for (const Instruction* i = head; i != nullptr; i = i->next, ++n) {
    index[i] = n;
    std::string line;
    switch (i->kind) {
      case InstructionKind::kOpCall:
        line = absl::StrCat("op ", i->seq, " ", i->stream->name(), " ", i->kernel->name(),
                            " in=", BlobIds(i->inputs), " out=", BlobIds(i->outputs));
        break;
      case InstructionKind::kStreamWait:
        line = absl::StrCat("wait ", i->seq, " ", i->stream->name(), " ", i->wait_target->name(),
                            " blobs=", BlobIds(i->outputs));
        break;
      case InstructionKind::kRecordEvent:
        line =
            absl::StrCat("record ", i->seq, " ", i->stream->name(), " blobs=", BlobIds(i->outputs));
        break;
      case InstructionKind::kRelease:
        line =
            absl::StrCat("release ", i->seq, " ", i->stream->name(), " blob=", BlobIds(i->outputs));
        break;
      case InstructionKind::kBarrier:
        line = absl::StrCat("barrier ", i->seq);
        break;
      case InstructionKind::kAccessBlob:
        line = i->inputs.empty() ? absl::StrCat("access ", i->seq, " ", i->stream->name(),
                                                " write blob=", BlobIds(i->outputs))
                                 : absl::StrCat("access ", i->seq, " ", i->stream->name(),
                                                " read blob=", BlobIds(i->inputs));
        break;
    }
    if (precomputed) {
      absl::StrAppend(
          &line, " after=",
          absl::StrJoin(i->predecessors, ",", [&](std::string* out, const Instruction* p) {
            absl::StrAppend(out, index.at(p));
          }));
    }
    if (i->kind == InstructionKind::kOpCall) {
      // Last: attribute text may contain '=' and ','.
      absl::StrAppend(&line, " attrs=", i->attrs != nullptr ? i->attrs->ToString() : "");
    }
    lines.push_back(std::move(line));
  }
  absl::MutexLock lock(&mu_);
  if (precomputed) WriteLine(absl::StrCat("batch ", n));
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
