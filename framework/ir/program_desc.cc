#include "framework/ir/program_desc.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <set>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/decimal.h"
#include "core/status.h"
#include "framework/ir/control_flow.h"

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
