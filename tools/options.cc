#include "tools/options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status.h"

namespace sluice::tools {
namespace {

constexpr size_t kWidth = 80;     // help lines wrap before this column
constexpr size_t kMaxLabel = 24;  // a longer "--name VALUE" puts its help on the next line

// Appends `text` word-wrapped, each line indented by `indent` spaces; the first line
// continues whatever `out` holds (which must end at column `indent`).
void AppendWrapped(absl::string_view text, size_t indent, std::string* out) {
  size_t column = indent;
  bool first = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    if (!first && column + 1 + word.size() > kWidth) {
      absl::StrAppend(out, "\n", std::string(indent, ' '));
      column = indent;
    } else if (!first) {
      out->push_back(' ');
      ++column;
    }
    absl::StrAppend(out, word);
    column += word.size();
    first = false;
  }
  out->push_back('\n');
}

}  // namespace

OptionParser::OptionParser(std::string command, std::string summary, std::string epilogue)
    : command_(std::move(command)), summary_(std::move(summary)), epilogue_(std::move(epilogue)) {}

void OptionParser::Add(Option option) {
  SLUICE_CHECK(absl::StartsWith(option.name, "-") && Find(option.name) == nullptr);
  SLUICE_CHECK(option.name != "--help" && option.name != "-h");
  options_.push_back(std::move(option));
}

const OptionParser::Option* OptionParser::Find(absl::string_view name) const {
  for (const Option& option : options_) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

void OptionParser::AddFlag(std::string name, std::string help, bool* out) {
  Add(Option{std::move(name), "", std::move(help), "", false, [out](absl::string_view) {
               *out = true;
               return absl::OkStatus();
             }});
}

void OptionParser::AddString(std::string name, std::string value_name, std::string help,
                             std::string* out) {
  Add(Option{std::move(name), std::move(value_name), std::move(help), *out, false,
             [out](absl::string_view value) {
               *out = std::string(value);
               return absl::OkStatus();
             }});
}

void OptionParser::AddChoice(std::string name, std::string value_name, std::string help,
                             std::vector<std::string> choices, std::string* out) {
  Add(Option{std::move(name), std::move(value_name), std::move(help), *out, false,
             [choices = std::move(choices), out](absl::string_view value) -> absl::Status {
               if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
                 return absl::InvalidArgumentError(
                     absl::StrCat("'", value, "' is not one of ", absl::StrJoin(choices, ", ")));
               }
               *out = std::string(value);
               return absl::OkStatus();
             }});
}

void OptionParser::AddDouble(std::string name, std::string value_name, std::string help, double min,
                             double max, double* out) {
  AddValue(std::move(name), std::move(value_name), std::move(help), absl::StrCat(*out),
           [min, max, out](absl::string_view text) -> absl::Status {
             double value;
             if (!absl::SimpleAtod(text, &value) || !std::isfinite(value) || value < min ||
                 value > max) {
               return absl::InvalidArgumentError(
                   absl::StrCat("'", text, "' is not a number in [", min, ", ", max, "]"));
             }
             *out = value;
             return absl::OkStatus();
           });
}

void OptionParser::AddValue(std::string name, std::string value_name, std::string help,
                            std::string default_text, ValueParser parse) {
  SLUICE_CHECK(!value_name.empty());
  Add(Option{std::move(name), std::move(value_name), std::move(help), std::move(default_text),
             false, std::move(parse)});
}

void OptionParser::AddRepeated(std::string name, std::string value_name, std::string help,
                               ValueParser parse) {
  SLUICE_CHECK(!value_name.empty());
  Add(Option{std::move(name), std::move(value_name), std::move(help), "", true, std::move(parse)});
}

void OptionParser::AddPositional(std::string name, std::string help, std::string* out) {
  positionals_.push_back(Positional{std::move(name), std::move(help), out});
}

absl::StatusOr<OptionParser::Outcome> OptionParser::Parse(int argc, const char* const* argv) {
  absl::Status error;  // the first usage error; parsing goes on to find a --help
  auto fail = [&error](std::string message) {
    if (error.ok()) error = absl::InvalidArgumentError(std::move(message));
  };
  bool help = false;
  bool options_ended = false;
  size_t positional = 0;
  std::vector<int> seen(options_.size(), 0);
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (!options_ended && arg == "--") {
      options_ended = true;
      continue;
    }
    if (!options_ended && (arg == "--help" || arg == "-h")) {
      help = true;
      continue;
    }
    if (options_ended || arg.size() < 2 || arg[0] != '-') {
      if (positional < positionals_.size()) {
        *positionals_[positional++].out = std::string(arg);
      } else {
        fail(absl::StrCat("unexpected argument '", arg, "'"));
      }
      continue;
    }
    absl::string_view name = arg;
    std::optional<absl::string_view> value;
    if (const size_t eq = arg.find('='); absl::StartsWith(arg, "--") && eq != arg.npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    const Option* option = Find(name);
    if (option == nullptr) {
      fail(absl::StrCat("unknown option '", name, "'"));
      continue;
    }
    if (++seen[option - options_.data()] > 1 && !option->repeatable) {
      fail(absl::StrCat("option '", name, "' given more than once"));
    }
    if (option->value_name.empty()) {
      if (value.has_value()) {
        fail(absl::StrCat("option '", name, "' takes no value"));
        continue;
      }
      value = "";
    } else if (!value.has_value()) {
      if (i + 1 >= argc || absl::StartsWith(argv[i + 1], "--")) {
        fail(absl::StrCat("option '", name, "' needs a value ", option->value_name));
        continue;
      }
      value = argv[++i];
    }
    if (absl::Status parsed = option->parse(*value); !parsed.ok()) {
      fail(absl::StrCat("option '", name, "': ", parsed.message()));
    }
  }
  if (help) return Outcome::kHelp;
  if (error.ok() && positional < positionals_.size()) {
    fail(absl::StrCat("missing ", positionals_[positional].name));
  }
  if (!error.ok()) return error;
  return Outcome::kRun;
}

std::string OptionParser::Help() const {
  std::string out = absl::StrCat("usage: sluice ", command_);
  for (const Positional& p : positionals_) absl::StrAppend(&out, " ", p.name);
  absl::StrAppend(&out, " [options]\n");
  if (!summary_.empty()) absl::StrAppend(&out, "\n", summary_);
  if (!summary_.empty() && summary_.back() != '\n') out.push_back('\n');

  struct Row {
    std::string label;
    std::string help;
  };
  std::vector<Row> arguments, options;
  for (const Positional& p : positionals_) arguments.push_back({p.name, p.help});
  for (const Option& option : options_) {
    Row row{option.name, option.help};
    if (!option.value_name.empty()) absl::StrAppend(&row.label, " ", option.value_name);
    if (!option.default_text.empty())
      absl::StrAppend(&row.help, " (default ", option.default_text, ")");
    if (option.repeatable) absl::StrAppend(&row.help, " (repeatable)");
    options.push_back(std::move(row));
  }
  options.push_back({"-h, --help", "print this help and exit"});

  size_t label_width = 0;
  for (const std::vector<Row>* rows : {&arguments, &options}) {
    for (const Row& row : *rows) {
      if (row.label.size() <= kMaxLabel) label_width = std::max(label_width, row.label.size());
    }
  }
  const size_t indent = 2 + label_width + 2;
  auto append_rows = [&](absl::string_view title, const std::vector<Row>& rows) {
    if (rows.empty()) return;
    absl::StrAppend(&out, "\n", title, ":\n");
    for (const Row& row : rows) {
      absl::StrAppend(&out, "  ", row.label);
      if (row.label.size() > label_width) {
        absl::StrAppend(&out, "\n", std::string(indent, ' '));
      } else {
        out.append(indent - 2 - row.label.size(), ' ');
      }
      AppendWrapped(row.help, indent, &out);
    }
  };
  append_rows("arguments", arguments);
  append_rows("options", options);
  if (!epilogue_.empty()) {
    absl::StrAppend(&out, "\n", epilogue_);
    if (epilogue_.back() != '\n') out.push_back('\n');
  }
  return out;
}

std::string OptionParser::UsageError(absl::string_view message) const {
  return absl::StrCat("sluice ", command_, ": ", message, "; see 'sluice ", command_, " --help'");
}

std::optional<int> ParseCommandLine(OptionParser& parser, int argc, char** argv) {
  const absl::StatusOr<OptionParser::Outcome> outcome = parser.Parse(argc, argv);
  if (!outcome.ok()) {
    std::fprintf(stderr, "%s\n", parser.UsageError(outcome.status().message()).c_str());
    return kExitUsage;
  }
  if (*outcome == OptionParser::Outcome::kHelp) {
    std::fputs(parser.Help().c_str(), stdout);
    return kExitOk;
  }
  return std::nullopt;
}

int ReportFailure(absl::string_view command, const absl::Status& status) {
  std::fprintf(stderr, "sluice %s: %s\n", std::string(command).c_str(), status.ToString().c_str());
  return kExitFailure;
}

}  // namespace sluice::tools
