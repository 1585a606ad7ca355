#include "framework/ir/program_desc.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <set>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/decimal.h"
#include "core/status.h"
#include "framework/ir/control_flow_names.h"

namespace sluice::framework::ir {
namespace {

constexpr absl::string_view kMagic = "sluice-program";
constexpr char kHexDigits[] = "0123456789ABCDEF";

// The bytes a name token may hold unescaped: printable ASCII except the format's separators
// (space, ',', '=', ';') and the escape character itself.
bool IsPlain(unsigned char c) {
  return c > 0x20 && c < 0x7F && c != '%' && c != ',' && c != '=' && c != ';';
}

// Any string as one token without separators: other bytes become %XX, and the empty string,
// which would otherwise vanish between separators, is the lone '%'.
std::string Escape(absl::string_view s) {
  if (s.empty()) return "%";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (IsPlain(c)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHexDigits[c >> 4]);
      out.push_back(kHexDigits[c & 0xF]);
    }
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The inverse of Escape. Errors are the bare problem; the caller adds the location.
absl::StatusOr<std::string> Unescape(absl::string_view token) {
  if (token.empty()) {
    return absl::InvalidArgumentError("empty name (the empty string is written '%')");
  }
  if (token == "%") return std::string();
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c == '%') {
      const int hi = i + 2 < token.size() ? HexValue(token[i + 1]) : -1;
      const int lo = i + 2 < token.size() ? HexValue(token[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad escape in '", token, "' (want % and two hex digits)"));
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (IsPlain(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("character '",
                                                     absl::CEscape(absl::string_view(&token[i], 1)),
                                                     "' in '", token, "' must be escaped"));
    }
  }
  return out;
}

// Why `name` cannot name a variable, or empty when it can.
std::string VarNameProblem(absl::string_view name) {
  if (name.empty()) return "variable name is empty";
  for (const char c : name) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == ',' || c == '=' || c == ';') {
      return absl::StrCat("variable name '", absl::CEscape(name), "' contains '",
                          absl::CEscape(absl::string_view(&c, 1)),
                          "' (whitespace, ',', '=' and ';' are not allowed)");
    }
  }
  return "";
}

std::string ShapeText(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape.dims(), ","), "]");
}

// The program text writes shapes without spaces ("[2,3]"); Shape::Parse reads that form.
absl::StatusOr<Shape> ParseShape(absl::string_view text) { return Shape::Parse(text); }

absl::StatusOr<bool> ParseFlag(absl::string_view key, absl::string_view value) {
  if (value == "0") return false;
  if (value == "1") return true;
  return absl::InvalidArgumentError(
      absl::StrCat("bad value '", value, "' for ", key, " (want 0 or 1)"));
}

std::string VarLine(const VarDesc& var) {
  return absl::StrCat("var ", Escape(var.name), " dtype=", DataTypeName(var.dtype),
                      " shape=", ShapeText(var.shape), " persistable=", var.persistable ? 1 : 0,
                      " parameter=", var.is_parameter ? 1 : 0,
                      " stop_gradient=", var.stop_gradient ? 1 : 0);
}

void AppendSlots(const OpSlots& slots, std::string* line) {
  for (const auto& [slot, names] : slots) {
    absl::StrAppend(line, " ", Escape(slot), "=");
    for (size_t i = 0; i < names.size(); ++i) {
      absl::StrAppend(line, i == 0 ? "" : ",", Escape(names[i]));
    }
  }
}

// The attribute field: AttrMap's own text form, with names and string values escaped so the
// field holds no separator of the line (AttrMap's form has no quoting of its own).
std::string AttrsText(const vm::AttrMap& attrs) {
  vm::AttrMap escaped;
  for (const auto& [name, value] : attrs.values()) {
    if (const auto* s = std::get_if<std::string>(&value)) {
      escaped.Set(Escape(name), Escape(*s));
    } else {
      escaped.Set(Escape(name), value);
    }
  }
  return escaped.ToString();
}

std::string OpLine(const OpDesc& op) {
  std::string line = absl::StrCat("op ", Escape(op.type), " in");
  AppendSlots(op.inputs, &line);
  absl::StrAppend(&line, " out");
  AppendSlots(op.outputs, &line);
  absl::StrAppend(&line, " attrs");
  if (!op.attrs.empty()) absl::StrAppend(&line, " ", AttrsText(op.attrs));
  return line;
}

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

// Reads the text form line by line. `source` is empty for FromText (locations read
// "line N") or the file's path for Load ("path:N").
class Parser {
 public:
  explicit Parser(absl::string_view source) : source_(source) {}

  absl::StatusOr<ProgramDesc> Parse(absl::string_view text) {
    if (text.empty()) {
      return absl::DataLossError(absl::StrCat(Where(1), ": empty input (expected the header '",
                                              kMagic, " ", kProgramFormatVersion, "')"));
    }
    size_t pos = 0;
    int line_no = 0;
    while (pos < text.size()) {
      ++line_no;
      const size_t eol = text.find('\n', pos);
      if (eol == absl::string_view::npos) {
        return absl::DataLossError(absl::StrCat(Where(line_no), ": line '",
                                                absl::CEscape(text.substr(pos, 40)),
                                                "' has no newline (truncated file?)"));
      }
      absl::string_view line = text.substr(pos, eol - pos);
      pos = eol + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      const absl::Status status = ParseLine(line_no, line);
      if (!status.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(Where(line_no), ": ", status.message()));
      }
    }
    if (!ended_) {
      return absl::DataLossError(absl::StrCat(Where(line_no),
                                              ": the text ends after this line without 'end' "
                                              "(truncated file?)"));
    }
    return std::move(program_);
  }

 private:
  std::string Where(int line_no) const {
    return source_.empty() ? absl::StrCat("line ", line_no) : absl::StrCat(source_, ":", line_no);
  }

  // Errors are the bare problem; Parse adds the location.
  absl::Status ParseLine(int line_no, absl::string_view line) {
    const std::vector<absl::string_view> tokens =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (line_no == 1) return ParseHeader(tokens);
    if (tokens.empty() || tokens[0][0] == '#') return absl::OkStatus();
    if (ended_) {
      return absl::InvalidArgumentError(absl::StrCat("'", tokens[0], "' after 'end'"));
    }
    const absl::string_view directive = tokens[0];
    if (directive == "block") return ParseBlock(tokens);
    if (directive == "var" || directive == "op") {
      if (current_ == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("'", directive, "' before any 'block'"));
      }
      return directive == "var" ? ParseVar(tokens) : ParseOp(tokens);
    }
    if (directive == "end") {
      if (tokens.size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected '", tokens[1], "' after 'end'"));
      }
      if (current_ == nullptr) {
        return absl::InvalidArgumentError("'end' before any 'block' (a program has a root block)");
      }
      ended_ = true;
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown directive '", directive, "' (expected block, var, op or end)"));
  }

  absl::Status ParseHeader(const std::vector<absl::string_view>& tokens) {
    if (tokens.empty() || tokens[0] != kMagic) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a Sluice program: expected '", kMagic, " VERSION', found '",
                       tokens.empty() ? "" : absl::CEscape(tokens[0]), "'"));
    }
    if (tokens.size() < 2) return absl::InvalidArgumentError("missing version after the magic");
    int64_t version;
    if (!ParseDecimal(tokens[1], &version)) {
      return absl::InvalidArgumentError(absl::StrCat("bad version '", tokens[1], "'"));
    }
    if (version < kOldestProgramFormatVersion || version > kProgramFormatVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported version ", version, " (this build reads ",
                       kOldestProgramFormatVersion, " to ", kProgramFormatVersion, ")"));
    }
    version_ = static_cast<int>(version);
    if (tokens.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected '", tokens[2], "' after the version"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseBlock(const std::vector<absl::string_view>& tokens) {
    int64_t idx;
    int64_t parent;
    if (tokens.size() != 4 || tokens[2] != "parent") {
      return absl::InvalidArgumentError("malformed block line (want 'block IDX parent PARENT')");
    }
    if (!ParseDecimal(tokens[1], &idx)) {
      return absl::InvalidArgumentError(absl::StrCat("bad block index '", tokens[1], "'"));
    }
    if (!ParseDecimal(tokens[3], &parent) || parent < -1 || parent > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("bad parent block index '", tokens[3], "'"));
    }
    const int expected = current_ == nullptr ? 0 : program_.num_blocks();
    if (idx != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("block ", tokens[1], " out of order (expected block ", expected, ")"));
    }
    if (idx == 0) {
      // The constructor made the root block; the file may give it another parent, which
      // Validate then reports.
      program_.mutable_block(0) = BlockDesc(0, static_cast<int>(parent));
    } else {
      program_.AppendBlock(static_cast<int>(parent));
    }
    current_ = &program_.mutable_block(static_cast<int>(idx));
    return absl::OkStatus();
  }

  absl::Status ParseVar(const std::vector<absl::string_view>& tokens) {
    if (tokens.size() < 2) return absl::InvalidArgumentError("'var' without a name");
    VarDesc var;
    SLUICE_ASSIGN_OR_RETURN(var.name, Unescape(tokens[1]));
    std::set<absl::string_view> seen;
    for (size_t i = 2; i < tokens.size(); ++i) {
      const absl::string_view token = tokens[i];
      const size_t eq = token.find('=');
      if (eq == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad variable field '", token, "' (want KEY=VALUE)"));
      }
      const absl::string_view key = token.substr(0, eq);
      const absl::string_view value = token.substr(eq + 1);
      if (!seen.insert(key).second) {
        return absl::InvalidArgumentError(absl::StrCat("variable field '", key, "' given twice"));
      }
      if (key == "dtype") {
        SLUICE_ASSIGN_OR_RETURN(var.dtype, ParseDataType(value));
      } else if (key == "shape") {
        SLUICE_ASSIGN_OR_RETURN(var.shape, ParseShape(value));
      } else if (key == "persistable") {
        SLUICE_ASSIGN_OR_RETURN(var.persistable, ParseFlag(key, value));
      } else if (key == "parameter") {
        SLUICE_ASSIGN_OR_RETURN(var.is_parameter, ParseFlag(key, value));
      } else if (key == "stop_gradient") {
        SLUICE_ASSIGN_OR_RETURN(var.stop_gradient, ParseFlag(key, value));
      } else {
        return absl::InvalidArgumentError(absl::StrCat("unknown variable field '", key, "'"));
      }
    }
    for (const absl::string_view key :
         {"dtype", "shape", "persistable", "parameter", "stop_gradient"}) {
      if (!seen.contains(key)) {
        return absl::InvalidArgumentError(
            absl::StrCat("variable '", tokens[1], "' has no ", key, "= field"));
      }
    }
    absl::StatusOr<VarDesc*> added = current_->AddVar(std::move(var));
    if (!added.ok()) {
      // AlreadyExists from the block is, in a file, one more kind of bad input.
      return absl::InvalidArgumentError(added.status().message());
    }
    return absl::OkStatus();
  }

  // Reads SLOT=NAME,... tokens from `*i` up to (not including) the token `stop`.
  absl::Status ParseSlots(const std::vector<absl::string_view>& tokens, size_t* i,
                          absl::string_view stop, OpSlots* slots) {
    for (; *i < tokens.size() && tokens[*i] != stop; ++*i) {
      const absl::string_view token = tokens[*i];
      const size_t eq = token.find('=');
      if (eq == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad slot '", token, "' (want SLOT=NAME,... or '", stop, "')"));
      }
      std::pair<std::string, std::vector<std::string>> slot;
      SLUICE_ASSIGN_OR_RETURN(slot.first, Unescape(token.substr(0, eq)));
      const absl::string_view list = token.substr(eq + 1);
      if (!list.empty()) {
        for (const absl::string_view item : absl::StrSplit(list, ',')) {
          SLUICE_ASSIGN_OR_RETURN(std::string name, Unescape(item));
          slot.second.push_back(std::move(name));
        }
      }
      slots->push_back(std::move(slot));
    }
    if (*i == tokens.size()) {
      return absl::InvalidArgumentError(absl::StrCat("op line has no '", stop, "'"));
    }
    ++*i;  // past `stop`
    return absl::OkStatus();
  }

  absl::Status ParseOp(const std::vector<absl::string_view>& tokens) {
    if (tokens.size() < 3 || tokens[2] != "in") {
      return absl::InvalidArgumentError(
          "malformed op line (want 'op TYPE in SLOT=NAMES... out SLOT=NAMES... attrs ATTRS')");
    }
    OpDesc op;
    SLUICE_ASSIGN_OR_RETURN(op.type, Unescape(tokens[1]));
    size_t i = 3;
    SLUICE_RETURN_IF_ERROR(ParseSlots(tokens, &i, "out", &op.inputs));
    SLUICE_RETURN_IF_ERROR(ParseSlots(tokens, &i, "attrs", &op.outputs));
    if (i < tokens.size()) {
      SLUICE_ASSIGN_OR_RETURN(op.attrs, ParseAttrs(tokens[i]));
      if (const auto refs = SubBlockRefs(op); version_ < 2 && !refs.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("block reference attribute '", refs.front().first,
                         "' needs format version 2 (the header says ", version_, ")"));
      }
      ++i;
    }
    if (i < tokens.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected '", tokens[i], "' after the attributes"));
    }
    current_->AppendOp(std::move(op));
    return absl::OkStatus();
  }

  static absl::StatusOr<vm::AttrMap> ParseAttrs(absl::string_view text) {
    SLUICE_ASSIGN_OR_RETURN(const vm::AttrMap escaped, vm::AttrMap::Parse(text));
    // AttrMap::Parse keeps the last of two equal names; a file with both is malformed.
    const size_t fields = static_cast<size_t>(std::count(text.begin(), text.end(), ',')) + 1;
    if (escaped.values().size() != fields) {
      return absl::InvalidArgumentError(
          absl::StrCat("attributes '", text, "' name an attribute twice"));
    }
    vm::AttrMap attrs;
    for (const auto& [escaped_name, value] : escaped.values()) {
      SLUICE_ASSIGN_OR_RETURN(std::string name, Unescape(escaped_name));
      if (attrs.values().contains(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("attributes '", text, "' name attribute '", name, "' twice"));
      }
      if (const auto* s = std::get_if<std::string>(&value)) {
        // AttrMap's own form of the empty string (`s:`) is read too; Escape writes `s:%`.
        std::string decoded;
        if (!s->empty()) {
          SLUICE_ASSIGN_OR_RETURN(decoded, Unescape(*s));
        }
        attrs.Set(std::move(name), std::move(decoded));
      } else {
        attrs.Set(std::move(name), value);
      }
    }
    return attrs;
  }

  const std::string source_;
  int version_ = kProgramFormatVersion;  // the header's
  ProgramDesc program_;
  BlockDesc* current_ = nullptr;  // the block the last 'block' line opened
  bool ended_ = false;
};

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  const int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) return absl::ErrnoToStatus(err, absl::StrCat(path, ": read failed"));
  return text;
}

absl::Status WriteFile(const std::string& path, absl::string_view text) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open for writing"));
  }
  int err = std::fwrite(text.data(), 1, text.size(), file) == text.size() ? 0 : errno;
  // fclose flushes, so a full disk may only show here.
  if (std::fclose(file) != 0 && err == 0) err = errno;
  if (err != 0) return absl::ErrnoToStatus(err, absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> TakeStreamAttr(vm::AttrMap& attrs) {
  if (!attrs.values().contains(kStreamAttr)) return std::string();
  absl::StatusOr<std::string> stream = attrs.GetString(kStreamAttr);
  if (!stream.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute '", kStreamAttr, "' must be a string such as \"compute:1\""));
  }
  attrs.Erase(kStreamAttr);
  return stream;
}

const std::vector<std::string>& OpDesc::Input(absl::string_view slot) const {
  for (const auto& [name, names] : inputs) {
    if (name == slot) return names;
  }
  static const std::vector<std::string>* const kNone = new std::vector<std::string>();
  return *kNone;
}

const std::vector<std::string>& OpDesc::Output(absl::string_view slot) const {
  for (const auto& [name, names] : outputs) {
    if (name == slot) return names;
  }
  static const std::vector<std::string>* const kNone = new std::vector<std::string>();
  return *kNone;
}

std::vector<std::string> OpDesc::InputNames() const {
  std::vector<std::string> all;
  for (const auto& slot : inputs) all.insert(all.end(), slot.second.begin(), slot.second.end());
  return all;
}

std::vector<std::string> OpDesc::OutputNames() const {
  std::vector<std::string> all;
  for (const auto& slot : outputs) all.insert(all.end(), slot.second.begin(), slot.second.end());
  return all;
}

absl::StatusOr<VarDesc*> BlockDesc::AddVar(VarDesc var) {
  if (std::string problem = VarNameProblem(var.name); !problem.empty()) {
    return absl::InvalidArgumentError(problem);
  }
  if (var_index_.contains(var.name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("variable '", var.name, "' already exists in block ", idx_));
  }
  var_index_.emplace(var.name, vars_.size());
  vars_.push_back(std::move(var));
  return &vars_.back();
}

const VarDesc* BlockDesc::FindVar(absl::string_view name) const {
  auto it = var_index_.find(name);
  return it == var_index_.end() ? nullptr : &vars_[it->second];
}

VarDesc* BlockDesc::FindMutableVar(absl::string_view name) {
  auto it = var_index_.find(name);
  return it == var_index_.end() ? nullptr : &vars_[it->second];
}

absl::Status BlockDesc::RenameVar(absl::string_view from, const std::string& to) {
  auto it = var_index_.find(from);
  if (it == var_index_.end()) {
    return absl::NotFoundError(absl::StrCat("variable '", from, "' is not in block ", idx_));
  }
  if (std::string problem = VarNameProblem(to); !problem.empty()) {
    return absl::InvalidArgumentError(problem);
  }
  if (var_index_.contains(to)) {
    return absl::AlreadyExistsError(
        absl::StrCat("variable '", to, "' already exists in block ", idx_));
  }
  const size_t index = it->second;
  const std::string old_name = vars_[index].name;
  var_index_.erase(it);
  var_index_.emplace(to, index);
  vars_[index].name = to;
  for (OpDesc& op : ops_) {
    for (OpSlots* slots : {&op.inputs, &op.outputs}) {
      for (auto& [slot, names] : *slots) {
        for (std::string& name : names) {
          if (name == old_name) name = to;
        }
      }
    }
  }
  return absl::OkStatus();
}

int BlockDesc::AppendOp(OpDesc op) {
  ops_.push_back(std::move(op));
  return static_cast<int>(ops_.size()) - 1;
}

ProgramDesc::ProgramDesc() { blocks_.emplace_back(0, -1); }

int ProgramDesc::AppendBlock(int parent_idx) {
  const int idx = num_blocks();
  blocks_.emplace_back(idx, parent_idx);
  return idx;
}

int OwnerBlock(const ProgramDesc& program, int block, absl::string_view name) {
  int owner = block;
  while (owner >= 0 && !program.block(owner).HasVar(name)) {
    owner = program.block(owner).parent_idx();
  }
  return owner;
}

const VarDesc* ResolveVar(const ProgramDesc& program, int block, absl::string_view name) {
  const int owner = OwnerBlock(program, block, name);
  return owner >= 0 ? program.block(owner).FindVar(name) : nullptr;
}

std::vector<std::pair<std::string, int64_t>> SubBlockRefs(const OpDesc& op) {
  std::vector<std::pair<std::string, int64_t>> refs;
  for (const auto& [name, value] : op.attrs.values()) {
    if (const vm::BlockRef* ref = std::get_if<vm::BlockRef>(&value)) {
      refs.emplace_back(name, ref->index);
    }
  }
  return refs;
}

absl::StatusOr<std::vector<std::string>> YieldedNames(const ProgramDesc& program, int block) {
  const std::vector<OpDesc>& ops = program.block(block).ops();
  if (ops.empty() || ops.back().type != kYieldOp) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", block, " does not end in a '", kYieldOp, "' op"));
  }
  return ops.back().Input(kLoopVarsSlot);
}

namespace {

// The control-flow rules (Validate's last step, program_desc.h).

// "block 0 op #3 'while'": how errors name an op.
std::string OpWhere(int block, size_t index, const OpDesc& op) {
  return absl::StrCat("block ", block, " op #", index, " '", op.type, "'");
}

std::string MetaText(const VarDesc& var) {
  return absl::StrCat(DataTypeName(var.dtype), var.shape.ToString());
}

bool SameMeta(const VarDesc& a, const VarDesc& b) {
  return a.dtype == b.dtype && a.shape == b.shape;
}

// Where `op` (op #index of `block`) names a sub-block by attribute `attr`: its index, or
// InvalidArgument when absent or not a block reference.
absl::StatusOr<int> RequiredBlock(const std::string& where, const OpDesc& op,
                                  absl::string_view attr) {
  auto it = op.attrs.values().find(attr);
  if (it == op.attrs.values().end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing attribute '", attr, "'"));
  }
  const vm::BlockRef* ref = std::get_if<vm::BlockRef>(&it->second);
  if (ref == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": attribute '", attr, "' is not a block reference"));
  }
  return static_cast<int>(ref->index);
}

// A positive int attribute, when present.
absl::Status OptionalPositiveInt(const std::string& where, const OpDesc& op,
                                 absl::string_view attr) {
  auto it = op.attrs.values().find(attr);
  if (it == op.attrs.values().end()) return absl::OkStatus();
  const int64_t* value = std::get_if<int64_t>(&it->second);
  if (value == nullptr || *value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": attribute '", attr, "' must be an int of at least 1"));
  }
  return absl::OkStatus();
}

// YieldedNames, its error prefixed with the op that references the block.
absl::StatusOr<std::vector<std::string>> YieldedNamesAt(const ProgramDesc& program,
                                                        const std::string& where, int sub) {
  absl::StatusOr<std::vector<std::string>> names = YieldedNames(program, sub);
  if (!names.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", names.status().message()));
  }
  return names;
}

// No name twice in `names`, and none of them among `others` (X, for Out); `what` names
// the slot.
absl::Status DistinctNames(const std::string& where, absl::string_view what,
                           const std::vector<std::string>& names,
                           const std::vector<std::string>& others) {
  const std::set<std::string> taken(others.begin(), others.end());
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (taken.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", what, " names '", name, "', which is also in X"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", what, " names '", name, "' twice"));
    }
  }
  return absl::OkStatus();
}

// Block `sub` yields values matching `want` (by dtype and shape, in order); `what` names
// the block's role ("the true branch"), `want_role` what each wanted variable is ("output").
absl::Status CheckYields(const ProgramDesc& program, const std::string& where, int sub,
                         absl::string_view what, const std::vector<const VarDesc*>& want,
                         absl::string_view want_role) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> yielded, YieldedNamesAt(program, where, sub));
  if (yielded.size() != want.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what, " (block ", sub, ") yields ",
                                                   yielded.size(), " values, ", want.size(),
                                                   " expected"));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const VarDesc* got = ResolveVar(program, sub, yielded[i]);
    if (!SameMeta(*got, *want[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", want_role, " '", want[i]->name, "' is ", MetaText(*want[i]), " but ", what,
          " (block ", sub, ") yields '", got->name, "' ", MetaText(*got)));
    }
  }
  return absl::OkStatus();
}

// The variables of `op`'s slot, resolved from `block` (Validate checked they exist).
std::vector<const VarDesc*> SlotVars(const ProgramDesc& program, int block, const OpDesc& op,
                                     absl::string_view slot, bool output) {
  std::vector<const VarDesc*> vars;
  for (const std::string& name : output ? op.Output(slot) : op.Input(slot)) {
    vars.push_back(ResolveVar(program, block, name));
  }
  return vars;
}

absl::Status IsBoolScalar(const std::string& where, absl::string_view what, const VarDesc& var) {
  if (var.dtype != DataType::kBool || var.shape.rank() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what, " '", var.name,
                                                   "' must be a bool scalar, not ", MetaText(var)));
  }
  return absl::OkStatus();
}

absl::Status ValidateCond(const ProgramDesc& program, int block, const std::string& where,
                          const OpDesc& op) {
  const std::vector<const VarDesc*> pred = SlotVars(program, block, op, kCondSlot, false);
  if (pred.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": slot Cond names ", pred.size(), " variables, 1 expected"));
  }
  SLUICE_RETURN_IF_ERROR(IsBoolScalar(where, "predicate", *pred[0]));
  SLUICE_ASSIGN_OR_RETURN(const int true_block, RequiredBlock(where, op, kTrueBlockAttr));
  SLUICE_ASSIGN_OR_RETURN(const int false_block, RequiredBlock(where, op, kFalseBlockAttr));
  const std::vector<const VarDesc*> out = SlotVars(program, block, op, kOutSlot, true);
  SLUICE_RETURN_IF_ERROR(CheckYields(program, where, true_block, "the true branch", out, "output"));
  return CheckYields(program, where, false_block, "the false branch", out, "output");
}

absl::Status ValidateWhile(const ProgramDesc& program, int block, const std::string& where,
                           const OpDesc& op) {
  SLUICE_RETURN_IF_ERROR(DistinctNames(where, "X", op.Input(kLoopVarsSlot), {}));
  SLUICE_RETURN_IF_ERROR(DistinctNames(where, "Out", op.Output(kOutSlot), op.Input(kLoopVarsSlot)));
  const std::vector<const VarDesc*> x = SlotVars(program, block, op, kLoopVarsSlot, false);
  const std::vector<const VarDesc*> out = SlotVars(program, block, op, kOutSlot, true);
  if (x.size() != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", x.size(), " loop variables (X) but ", out.size(), " outputs (Out)"));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!SameMeta(*x[i], *out[i])) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": output '", out[i]->name, "' is ",
                                                     MetaText(*out[i]), " but loop variable '",
                                                     x[i]->name, "' is ", MetaText(*x[i])));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(const int cond_block, RequiredBlock(where, op, kCondBlockAttr));
  SLUICE_ASSIGN_OR_RETURN(const int body_block, RequiredBlock(where, op, kBodyBlockAttr));
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> cond,
                          YieldedNamesAt(program, where, cond_block));
  if (cond.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the condition (block ", cond_block,
                                                   ") yields ", cond.size(),
                                                   " values, 1 expected"));
  }
  SLUICE_RETURN_IF_ERROR(IsBoolScalar(where,
                                      absl::StrCat("the condition (block ", cond_block, ") yields"),
                                      *ResolveVar(program, cond_block, cond[0])));
  SLUICE_RETURN_IF_ERROR(CheckYields(program, where, body_block, "the body", out, "loop variable"));
  SLUICE_RETURN_IF_ERROR(OptionalPositiveInt(where, op, kMaxIterationsAttr));
  return OptionalPositiveInt(where, op, kParallelIterationsAttr);
}

// Every block reference names a child of the op's block, each block at most once; returns
// the owners (block index -> the referencing op's type) in `owner_type`.
absl::Status CheckReferences(const ProgramDesc& program,
                             absl::flat_hash_map<int64_t, std::string>& owner_type) {
  absl::flat_hash_map<int64_t, std::string> owner;  // block -> where it was referenced
  for (int b = 0; b < program.num_blocks(); ++b) {
    const std::vector<OpDesc>& ops = program.block(b).ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      const std::string where = OpWhere(b, k, ops[k]);
      for (const auto& [attr, index] : SubBlockRefs(ops[k])) {
        if (index <= 0 || index >= program.num_blocks()) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": attribute '", attr,
                                                         "' references block ", index,
                                                         ", which is not a sub-block of the "
                                                         "program"));
        }
        if (program.block(static_cast<int>(index)).parent_idx() != b) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": attribute '", attr, "' references block ", index, ", whose parent is ",
              program.block(static_cast<int>(index)).parent_idx(), ", not ", b));
        }
        auto [it, fresh] = owner.emplace(index, absl::StrCat(where, " attribute '", attr, "'"));
        if (!fresh) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": attribute '", attr,
                                                         "' references block ", index,
                                                         ", already referenced by ", it->second));
        }
        owner_type[index] = ops[k].type;
      }
    }
  }
  return absl::OkStatus();
}

// The control-flow rules. Expects the checks Validate makes first (blocks well formed,
// operands defined).
absl::Status ValidateControlFlow(const ProgramDesc& program) {
  absl::flat_hash_map<int64_t, std::string> owner_type;
  SLUICE_RETURN_IF_ERROR(CheckReferences(program, owner_type));
  // Each cond and while names its blocks; then yields, so that a misplaced one is named as
  // such, not as a branch that yields nothing; then the ops' full rules.
  for (int b = 0; b < program.num_blocks(); ++b) {
    const std::vector<OpDesc>& ops = program.block(b).ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].type != kCondOp && ops[k].type != kWhileOp) continue;
      const bool is_cond = ops[k].type == kCondOp;
      for (absl::string_view attr : {is_cond ? kTrueBlockAttr : kCondBlockAttr,
                                     is_cond ? kFalseBlockAttr : kBodyBlockAttr}) {
        SLUICE_RETURN_IF_ERROR(RequiredBlock(OpWhere(b, k, ops[k]), ops[k], attr).status());
      }
    }
  }
  for (int b = 0; b < program.num_blocks(); ++b) {
    const std::vector<OpDesc>& ops = program.block(b).ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].type != kYieldOp) continue;
      const std::string where = OpWhere(b, k, ops[k]);
      auto owner = owner_type.find(b);
      const bool owned =
          owner != owner_type.end() && (owner->second == kCondOp || owner->second == kWhileOp);
      if (k + 1 != ops.size() || !owned) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": a yield must be the last op of a block that a cond or while references"));
      }
      if (!ops[k].outputs.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": a yield has no outputs"));
      }
      if (!ops[k].attrs.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": a yield has no attributes"));
      }
      for (const auto& [slot, names] : ops[k].inputs) {
        if (slot != kLoopVarsSlot) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": a yield has one input slot, X, not '", slot, "'"));
        }
      }
    }
  }
  for (int b = 0; b < program.num_blocks(); ++b) {
    const std::vector<OpDesc>& ops = program.block(b).ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].type == kCondOp) {
        SLUICE_RETURN_IF_ERROR(ValidateCond(program, b, OpWhere(b, k, ops[k]), ops[k]));
      } else if (ops[k].type == kWhileOp) {
        SLUICE_RETURN_IF_ERROR(ValidateWhile(program, b, OpWhere(b, k, ops[k]), ops[k]));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ProgramDesc::Validate() const {
  // Blocks first: the operand checks below walk parent chains.
  for (int i = 0; i < num_blocks(); ++i) {
    const BlockDesc& block = blocks_[i];
    if (block.idx() != i) {
      return absl::InvalidArgumentError(
          absl::StrCat("block at position ", i, " has index ", block.idx()));
    }
    if (i == 0 && block.parent_idx() != -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("block 0 (the root) has parent ", block.parent_idx(), ", expected -1"));
    }
    if (i > 0 && (block.parent_idx() < 0 || block.parent_idx() >= i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "block ", i, " has parent ", block.parent_idx(), ", which is not an earlier block"));
    }
    for (size_t v = 0; v < block.vars().size(); ++v) {
      const VarDesc& var = block.vars()[v];
      if (std::string problem = VarNameProblem(var.name); !problem.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("block ", i, " variable #", v, ": ", problem));
      }
      if (block.FindVar(var.name) != &var) {
        return absl::InvalidArgumentError(
            absl::StrCat("block ", i, " variable #", v, " '", var.name,
                         "' is not indexed under its name (renamed after AddVar?)"));
      }
      if (absl::Status shape = Shape::Make(var.shape.dims()).status(); !shape.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("block ", i, " variable '", var.name, "': ", shape.message()));
      }
    }
  }
  for (int i = 0; i < num_blocks(); ++i) {
    const std::vector<OpDesc>& ops = blocks_[i].ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      const OpDesc& op = ops[k];
      if (op.type.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("block ", i, " op #", k, " has no type"));
      }
      const std::string where = absl::StrCat("block ", i, " op #", k, " '", op.type, "'");
      const auto check_slots = [&](absl::string_view kind, const OpSlots& slots) {
        std::set<absl::string_view> seen;
        for (const auto& [slot, names] : slots) {
          if (slot.empty()) {
            return absl::InvalidArgumentError(
                absl::StrCat(where, ": ", kind, " slot with an empty name"));
          }
          if (!seen.insert(slot).second) {
            return absl::InvalidArgumentError(
                absl::StrCat(where, ": ", kind, " slot ", slot, " appears twice"));
          }
          for (const std::string& name : names) {
            if (ResolveVar(*this, i, name) == nullptr) {
              return absl::InvalidArgumentError(absl::StrCat(
                  where, ": ", kind, " ", slot, " names undefined variable '", name, "'"));
            }
          }
        }
        return absl::OkStatus();
      };
      SLUICE_RETURN_IF_ERROR(check_slots("input", op.inputs));
      SLUICE_RETURN_IF_ERROR(check_slots("output", op.outputs));
    }
  }
  return ValidateControlFlow(*this);
}

std::string ProgramDesc::ToText() const {
  std::string text = absl::StrCat(kMagic, " ", kProgramFormatVersion, "\n");
  for (const BlockDesc& block : blocks_) {
    absl::StrAppend(&text, "block ", block.idx(), " parent ", block.parent_idx(), "\n");
    for (const VarDesc& var : block.vars()) absl::StrAppend(&text, VarLine(var), "\n");
    for (const OpDesc& op : block.ops()) absl::StrAppend(&text, OpLine(op), "\n");
  }
  absl::StrAppend(&text, "end\n");
  return text;
}

absl::StatusOr<ProgramDesc> ProgramDesc::FromText(absl::string_view text) {
  return Parser("").Parse(text);
}

absl::Status ProgramDesc::Save(const std::string& path) const { return WriteFile(path, ToText()); }

absl::StatusOr<ProgramDesc> ProgramDesc::Load(const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return Parser(path).Parse(text);
}

uint64_t ProgramDesc::Hash() const { return Fnv1a64(ToText()); }

}  // namespace sluice::framework::ir
