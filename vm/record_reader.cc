#include "vm/record_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "vm/recorder.h"

namespace sluice::vm {
namespace {

class Parser {
 public:
  Parser(absl::string_view source) { program_.source = std::string(source); }

  absl::StatusOr<RecordedProgram> Parse(absl::string_view text) {
    if (!text.empty() && text.back() != '\n') {
      // The recorder ends every line with '\n': a file cut anywhere else ends mid-line.
      const size_t last = text.rfind('\n');
      const int64_t line = std::count(text.begin(), text.end(), '\n') + 1;
      return absl::DataLossError(absl::StrCat(
          program_.source, ":", line, ": truncated: the file ends inside this line (byte offset ",
          last == absl::string_view::npos ? 0 : last + 1, ", ", text.size(), " bytes in all)"));
    }
    std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
    // A file ending in '\n' splits into a last empty piece that is not a line.
    if (!lines.empty() && lines.back().empty()) lines.pop_back();
    bool ended = false;
    for (size_t n = 0; n < lines.size(); ++n) {
      line_ = static_cast<int>(n) + 1;
      absl::string_view line = lines[n];
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (ended) {
        if (line.empty()) continue;
        return Error("content after the 'end' line");
      }
      if (n == 0) {
        SLUICE_RETURN_IF_ERROR(Header(line));
        continue;
      }
      if (line == "end") {
        if (batch_left_ > 0) {
          return Error(absl::StrCat("'end' inside a batch: ", batch_left_,
                                    " announced instruction(s) missing"));
        }
        if (expand_left_ > 0) {
          return Error(absl::StrCat("'end' inside an expansion: ", expand_left_,
                                    " announced step(s) missing"));
        }
        ended = true;
        continue;
      }
      SLUICE_RETURN_IF_ERROR(Line(line));
    }
    if (lines.empty()) {
      return absl::DataLossError(absl::StrCat(program_.source, ": empty file, not a record"));
    }
    if (!ended) {
      line_ = static_cast<int>(lines.size());
      return absl::DataLossError(absl::StrCat(
          program_.source, ":", line_, ": truncated: the file ends without its 'end' line",
          batch_left_ > 0
              ? absl::StrCat(" (inside a batch, ", batch_left_, " instruction(s) missing)")
          : expand_left_ > 0
              ? absl::StrCat(" (inside an expansion, ", expand_left_, " step(s) missing)")
              : ""));
    }
    SLUICE_RETURN_IF_ERROR(ResolveData());
    return std::move(program_);
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(program_.source, ":", line_, ": ", what));
  }

  absl::Status Header(absl::string_view line) {
    static constexpr absl::string_view kMagic = "sluice-instructions ";
    if (!absl::StartsWith(line, kMagic)) {
      return Error("not an instruction record (expected 'sluice-instructions VERSION')");
    }
    int version = 0;
    if (!absl::SimpleAtoi(line.substr(kMagic.size()), &version)) {
      return Error(absl::StrCat("bad format version '", line.substr(kMagic.size()), "'"));
    }
    if (version < Recorder::kOldestReadableVersion || version > Recorder::kFormatVersion) {
      return Error(absl::StrCat("unsupported format version ", version, " (this build reads ",
                                Recorder::kOldestReadableVersion, " to ", Recorder::kFormatVersion,
                                ")"));
    }
    version_ = version;
    return absl::OkStatus();
  }

  template <typename T>
  absl::StatusOr<T> Number(absl::string_view text, absl::string_view what) const {
    T value{};
    if (!absl::SimpleAtoi(text, &value)) {
      return Error(absl::StrCat("bad ", what, " '", text, "'"));
    }
    return value;
  }

  // "key=VALUE" -> VALUE.
  absl::StatusOr<absl::string_view> Field(absl::string_view token, absl::string_view key) const {
    if (!absl::StartsWith(token, key) || token.size() <= key.size() || token[key.size()] != '=') {
      return Error(absl::StrCat("expected '", key, "=...', got '", token, "'"));
    }
    return token.substr(key.size() + 1);
  }

  absl::StatusOr<int> BlobIndex(absl::string_view text) const {
    SLUICE_ASSIGN_OR_RETURN(uint64_t id, Number<uint64_t>(text, "blob id"));
    auto it = blob_index_.find(id);
    if (it == blob_index_.end()) {
      return Error(absl::StrCat("blob ", id, " is used before its 'blob' line"));
    }
    return it->second;
  }

  absl::StatusOr<std::vector<int>> BlobIndices(absl::string_view list) const {
    std::vector<int> indices;
    if (list.empty()) return indices;
    for (absl::string_view id : absl::StrSplit(list, ',')) {
      SLUICE_ASSIGN_OR_RETURN(int index, BlobIndex(id));
      indices.push_back(index);
    }
    return indices;
  }

  absl::Status Line(absl::string_view line) {
    std::vector<absl::string_view> tokens = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (tokens.empty()) return Error("empty line");
    const absl::string_view directive = tokens[0];
    if (expand_left_ > 0 && directive != "op" && directive != "release") {
      return Error(absl::StrCat("'", directive, "' inside an expansion (", expand_left_,
                                " step line(s) missing): only op and release lines"));
    }
    if (directive == "blob") return BlobLine(tokens);
    if (directive == "batch") return BatchLine(tokens);
    if (directive == "data") return DataLine(tokens);
    if (directive == "checksum") return ChecksumLine(tokens);
    if (directive == "expand") return ExpandLine(tokens);
    if (directive == "op" || directive == "wait" || directive == "record" ||
        directive == "release" || directive == "access" || directive == "barrier") {
      return InstructionLine(tokens);
    }
    return Error(absl::StrCat("unknown directive '", directive, "'"));
  }

  absl::Status BlobLine(const std::vector<absl::string_view>& t) {
    if (t.size() < 6) return Error("'blob' needs: blob ID DEVICE DTYPE SHAPE STREAM [NAME]");
    RecordedBlob blob;
    blob.line = line_;
    SLUICE_ASSIGN_OR_RETURN(blob.id, Number<uint64_t>(t[1], "blob id"));
    blob.device = std::string(t[2]);
    absl::StatusOr<DataType> dtype = ParseDataType(t[3]);
    if (!dtype.ok()) return Error(dtype.status().message());
    blob.dtype = *dtype;
    if (t[4] != "-") {
      std::vector<int64_t> dims;
      for (absl::string_view d : absl::StrSplit(t[4], 'x')) {
        SLUICE_ASSIGN_OR_RETURN(int64_t dim, Number<int64_t>(d, "dimension"));
        dims.push_back(dim);
      }
      absl::StatusOr<Shape> shape = Shape::Make(dims);
      if (!shape.ok()) return Error(shape.status().message());
      blob.shape = *std::move(shape);
    }
    blob.stream = std::string(t[5]);
    if (t.size() > 6) blob.name = absl::StrJoin(t.begin() + 6, t.end(), " ");
    if (!blob_index_.emplace(blob.id, static_cast<int>(program_.blobs.size())).second) {
      return Error(absl::StrCat("blob ", blob.id, " declared twice"));
    }
    program_.blobs.push_back(std::move(blob));
    return absl::OkStatus();
  }

  // "expand SEQ in=IDS out=IDS steps=N" (version 4): the next N lines are the steps the
  // op line of instruction SEQ with these operands ran (the first such line not yet
  // expanded).
  absl::Status ExpandLine(const std::vector<absl::string_view>& t) {
    if (version_ < 4) return Error("'expand' needs format version 4");
    if (t.size() != 5) return Error("'expand' needs: expand SEQ in=IDS out=IDS steps=N");
    if (batch_left_ > 0) return Error("an expansion starts inside a batch");
    SLUICE_ASSIGN_OR_RETURN(uint64_t seq, Number<uint64_t>(t[1], "sequence number"));
    SLUICE_ASSIGN_OR_RETURN(absl::string_view in_list, Field(t[2], "in"));
    SLUICE_ASSIGN_OR_RETURN(std::vector<int> inputs, BlobIndices(in_list));
    SLUICE_ASSIGN_OR_RETURN(absl::string_view out_list, Field(t[3], "out"));
    SLUICE_ASSIGN_OR_RETURN(std::vector<int> outputs, BlobIndices(out_list));
    SLUICE_ASSIGN_OR_RETURN(absl::string_view count, Field(t[4], "steps"));
    SLUICE_ASSIGN_OR_RETURN(int steps, Number<int>(count, "step count"));
    if (steps < 0) return Error(absl::StrCat("bad step count ", steps));
    int target = -1;
    if (auto it = op_lines_.find(seq); it != op_lines_.end()) {
      for (int index : it->second) {
        const RecordedInstruction& r = program_.instructions[index];
        if (r.expansion < 0 && r.inputs == inputs && r.outputs == outputs) {
          target = index;
          break;
        }
      }
    }
    if (target < 0) {
      return Error(absl::StrCat("expansion of #", seq,
                                ", which has no op line with these operands left to expand"));
    }
    program_.instructions[target].expansion = static_cast<int>(program_.expansions.size());
    program_.expansions.push_back({target, {}, line_});
    expand_left_ = steps;
    return absl::OkStatus();
  }

  absl::Status BatchLine(const std::vector<absl::string_view>& t) {
    if (t.size() != 2) return Error("'batch' needs: batch COUNT");
    if (expand_left_ > 0) return Error("a batch starts inside an expansion");
    if (batch_left_ > 0) {
      return Error(absl::StrCat("a new batch starts while ", batch_left_,
                                " instruction(s) of the previous one are missing"));
    }
    SLUICE_ASSIGN_OR_RETURN(int count, Number<int>(t[1], "batch size"));
    if (count <= 0) return Error(absl::StrCat("bad batch size ", count));
    program_.batch_begin.push_back(static_cast<int>(program_.instructions.size()));
    program_.batch_size.push_back(count);
    batch_left_ = count;
    batch_lines_.clear();
    return absl::OkStatus();
  }

  absl::Status DataLine(const std::vector<absl::string_view>& t) {
    if (t.size() > 3 || t.size() < 2) return Error("'data' needs: data SEQ HEX");
    SLUICE_ASSIGN_OR_RETURN(uint64_t seq, Number<uint64_t>(t[1], "sequence number"));
    const absl::string_view hex = t.size() == 3 ? t[2] : absl::string_view();
    if (hex.size() % 2 != 0) return Error("odd number of hex digits");
    std::vector<uint8_t> bytes(hex.size() / 2);
    for (size_t i = 0; i < bytes.size(); ++i) {
      const int hi = HexDigit(hex[2 * i]);
      const int lo = HexDigit(hex[2 * i + 1]);
      if (hi < 0 || lo < 0) {
        return Error(absl::StrCat("bad hex digit at column ", 7 + t[1].size() + 2 * i));
      }
      bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    pending_data_.push_back({seq, line_, static_cast<int>(program_.data.size())});
    program_.data.push_back(std::move(bytes));
    return absl::OkStatus();
  }

  static int HexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  absl::Status ChecksumLine(const std::vector<absl::string_view>& t) {
    if (t.size() != 3) return Error("'checksum' needs: checksum BLOB_ID HEX16");
    RecordedChecksum checksum;
    checksum.line = line_;
    SLUICE_ASSIGN_OR_RETURN(checksum.blob, BlobIndex(t[1]));
    if (t[2].size() != 16 || !absl::SimpleHexAtoi(t[2], &checksum.checksum)) {
      return Error(absl::StrCat("bad checksum '", t[2], "' (16 hex digits)"));
    }
    program_.checksums.push_back(checksum);
    return absl::OkStatus();
  }

  // A batch line's fields: after= (its predecessors in the batch) and, from version 2,
  // waits=; `next` is the field after the instruction's own.
  absl::Status BatchFields(const std::vector<absl::string_view>& t, size_t& next,
                           RecordedInstruction& r) {
    r.batch = static_cast<int>(program_.batch_begin.size()) - 1;
    const int position =
        static_cast<int>(program_.instructions.size()) - program_.batch_begin.back();
    if (next >= t.size()) return Error(absl::StrCat("'", t[0], "' line ends before its after="));
    SLUICE_ASSIGN_OR_RETURN(absl::string_view list, Field(t[next++], "after"));
    if (!list.empty()) {
      for (absl::string_view p : absl::StrSplit(list, ',')) {
        SLUICE_ASSIGN_OR_RETURN(int pred, Number<int>(p, "predecessor"));
        if (pred < 0 || pred >= position) {
          return Error(absl::StrCat("predecessor ", pred, " is not an earlier instruction of ",
                                    "the batch (this is number ", position, ")"));
        }
        r.after.push_back(pred);
      }
    }
    if (version_ >= 2 && next < t.size() && absl::StartsWith(t[next], "waits=")) {
      SLUICE_RETURN_IF_ERROR(Waits(t[next++].substr(6), r));
    }
    batch_lines_[r.seq].push_back(position);
    --batch_left_;
    return absl::OkStatus();
  }

  absl::Status InstructionLine(const std::vector<absl::string_view>& t) {
    RecordedInstruction r;
    r.line = line_;
    const absl::string_view directive = t[0];
    if (t.size() < 2) return Error(absl::StrCat("'", directive, "' needs a sequence number"));
    SLUICE_ASSIGN_OR_RETURN(r.seq, Number<uint64_t>(t[1], "sequence number"));
    size_t next = 2;
    auto take = [&](absl::string_view what) -> absl::StatusOr<absl::string_view> {
      if (next >= t.size()) {
        return Error(absl::StrCat("'", directive, "' line ends before its ", what));
      }
      return t[next++];
    };
    if (directive == "barrier") {
      r.kind = InstructionKind::kBarrier;
    } else {
      SLUICE_ASSIGN_OR_RETURN(absl::string_view stream, take("stream"));
      r.stream = std::string(stream);
    }
    if (directive == "op") {
      r.kind = InstructionKind::kOpCall;
      SLUICE_ASSIGN_OR_RETURN(absl::string_view kernel, take("op name"));
      r.kernel = std::string(kernel);
      SLUICE_ASSIGN_OR_RETURN(absl::string_view in, take("inputs"));
      SLUICE_ASSIGN_OR_RETURN(absl::string_view in_list, Field(in, "in"));
      SLUICE_ASSIGN_OR_RETURN(r.inputs, BlobIndices(in_list));
      SLUICE_ASSIGN_OR_RETURN(absl::string_view out, take("outputs"));
      SLUICE_ASSIGN_OR_RETURN(absl::string_view out_list, Field(out, "out"));
      SLUICE_ASSIGN_OR_RETURN(r.outputs, BlobIndices(out_list));
    } else if (directive == "wait" || directive == "record") {
      r.kind = directive == "wait" ? InstructionKind::kStreamWait : InstructionKind::kRecordEvent;
      if (r.kind == InstructionKind::kStreamWait) {
        SLUICE_ASSIGN_OR_RETURN(absl::string_view target, take("target stream"));
        r.wait_target = std::string(target);
      }
      SLUICE_ASSIGN_OR_RETURN(absl::string_view blobs, take("blobs"));
      SLUICE_ASSIGN_OR_RETURN(absl::string_view list, Field(blobs, "blobs"));
      SLUICE_ASSIGN_OR_RETURN(r.outputs, BlobIndices(list));
    } else if (directive == "release") {
      r.kind = InstructionKind::kRelease;
      SLUICE_ASSIGN_OR_RETURN(absl::string_view blob, take("blob"));
      SLUICE_ASSIGN_OR_RETURN(absl::string_view id, Field(blob, "blob"));
      SLUICE_ASSIGN_OR_RETURN(int index, BlobIndex(id));
      r.outputs.push_back(index);
      if (version_ >= 3 && next < t.size() && absl::StartsWith(t[next], "drops=")) {
        SLUICE_ASSIGN_OR_RETURN(r.drops, Number<int>(t[next++].substr(6), "drops"));
        if (r.drops < 2) {
          return Error(absl::StrCat("drops=", r.drops, ": a shared release has 2 or more"));
        }
      }
    } else if (directive == "access") {
      r.kind = InstructionKind::kAccessBlob;
      SLUICE_ASSIGN_OR_RETURN(absl::string_view mode, take("read|write"));
      if (mode != "read" && mode != "write") {
        return Error(absl::StrCat("access mode must be read or write, got '", mode, "'"));
      }
      SLUICE_ASSIGN_OR_RETURN(absl::string_view blob, take("blob"));
      SLUICE_ASSIGN_OR_RETURN(absl::string_view id, Field(blob, "blob"));
      SLUICE_ASSIGN_OR_RETURN(int index, BlobIndex(id));
      (mode == "write" ? r.outputs : r.inputs).push_back(index);
    }
    if (batch_left_ > 0) SLUICE_RETURN_IF_ERROR(BatchFields(t, next, r));
    if (r.kind == InstructionKind::kOpCall) {
      SLUICE_ASSIGN_OR_RETURN(absl::string_view attrs, take("attrs="));
      SLUICE_ASSIGN_OR_RETURN(absl::string_view text, Field(attrs, "attrs"));
      if (!text.empty()) {
        absl::StatusOr<AttrMap> parsed = AttrMap::Parse(text);
        if (!parsed.ok()) return Error(parsed.status().message());
        r.attrs = std::make_shared<const AttrMap>(*std::move(parsed));
      }
    }
    if (next != t.size()) return Error(absl::StrCat("unexpected '", t[next], "'"));
    if (expand_left_ > 0) {
      --expand_left_;
      program_.expansions.back().steps.push_back(std::move(r));
      return absl::OkStatus();
    }
    if (r.kind == InstructionKind::kAccessBlob && !r.outputs.empty()) {
      write_seqs_.emplace(r.seq, static_cast<int>(program_.instructions.size()));
    }
    if (r.kind == InstructionKind::kOpCall && version_ >= 4) {
      op_lines_[r.seq].push_back(static_cast<int>(program_.instructions.size()));
    }
    program_.instructions.push_back(std::move(r));
    return absl::OkStatus();
  }

  // "SEQ:STEPS[;SEQ:STEPS...]": each source's lines so far in this batch must number at
  // least STEPS.
  absl::Status Waits(absl::string_view list, RecordedInstruction& r) const {
    if (r.kind != InstructionKind::kOpCall && r.kind != InstructionKind::kRelease) {
      return Error("only op and release lines (sequence steps) wait");
    }
    for (absl::string_view item : absl::StrSplit(list, ';')) {
      std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
      if (parts.size() != 2) return Error(absl::StrCat("bad wait '", item, "' (SEQ:STEPS)"));
      RecordedInstruction::Wait wait;
      SLUICE_ASSIGN_OR_RETURN(wait.source_seq, Number<uint64_t>(parts[0], "wait source"));
      SLUICE_ASSIGN_OR_RETURN(wait.steps, Number<int>(parts[1], "wait steps"));
      auto it = batch_lines_.find(wait.source_seq);
      const int written = it == batch_lines_.end() ? 0 : static_cast<int>(it->second.size());
      if (wait.source_seq == r.seq || wait.steps <= 0 || wait.steps > written) {
        return Error(absl::StrCat("wait for ", wait.steps, " step(s) of #", wait.source_seq,
                                  ", which has ", written,
                                  " earlier line(s) in the batch (and must not be this one)"));
      }
      wait.source_position = it->second[wait.steps - 1];
      r.waits.push_back(wait);
    }
    return absl::OkStatus();
  }

  // Data lines are written when the write ran, so they may follow later instructions.
  absl::Status ResolveData() {
    for (const PendingData& d : pending_data_) {
      line_ = d.line;
      auto it = write_seqs_.find(d.seq);
      if (it == write_seqs_.end()) {
        return Error(absl::StrCat("data for #", d.seq, ", which is not an 'access ... write'"));
      }
      RecordedInstruction& access = program_.instructions[it->second];
      const RecordedBlob& blob = program_.blobs[access.outputs[0]];
      const size_t bytes = static_cast<size_t>(blob.shape.NumElements()) * SizeOf(blob.dtype);
      if (program_.data[d.index].size() != bytes) {
        return Error(absl::StrCat("data for #", d.seq, " has ", program_.data[d.index].size(),
                                  " bytes; blob ", blob.id, " holds ", bytes));
      }
      access.data = d.index;
    }
    return absl::OkStatus();
  }

  struct PendingData {
    uint64_t seq;
    int line;
    int index;
  };

  RecordedProgram program_;
  int line_ = 0;
  int batch_left_ = 0;
  int version_ = 0;
  int expand_left_ = 0;  // step lines of the current expansion still to come
  // Op lines by instruction number (version 4: what an expansion names).
  absl::flat_hash_map<uint64_t, std::vector<int>> op_lines_;
  // The current batch's positions, by instruction number (a sequence's steps share one).
  absl::flat_hash_map<uint64_t, std::vector<int>> batch_lines_;
  absl::flat_hash_map<uint64_t, int> blob_index_;
  absl::flat_hash_map<uint64_t, int> write_seqs_;
  std::vector<PendingData> pending_data_;
};

}  // namespace

absl::StatusOr<RecordedProgram> ParseRecord(absl::string_view text, absl::string_view source) {
  return Parser(source).Parse(text);
}

absl::StatusOr<RecordedProgram> ReadRecordFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    const std::string message =
        absl::StrCat("cannot open record file '", path, "': ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return absl::DataLossError(absl::StrCat("reading record file '", path, "' failed"));
  return ParseRecord(text, path);
}

}  // namespace sluice::vm
