// The command line of one `sluice` subcommand: its options and positional arguments are
// declared once (name, value name, help text, default, repeatable or not), and the same
// declarations parse argv and generate `--help`. Every subcommand goes through it, so all of
// them spell errors and exit codes alike.
//
// Syntax: `--name VALUE` or `--name=VALUE` for an option with a value, `--name` for a flag,
// `-h` / `--help` anywhere for the help, `--` to end the options (every later argument is
// positional). A word not starting with '-' (or exactly "-") is the next positional
// argument. A value is the next word unless that starts with "--": `--fetch --steps` is a
// missing value, while `--offset -5` passes "-5".
//
// Usage errors (each message names the option or argument at fault):
//   unknown option '--fetc'               option '--steps' needs a value N
//   option '--steps': 'x' is not an integer                (bad integer, float or choice)
//   option '--steps' given more than once (non-repeatable)   missing PROGRAM
//   unexpected argument 'extra'           option '--sync-check' takes no value
//
// Exit codes shared by every subcommand: kExitOk, kExitFailure (the work ran and failed, a
// check failed, an input could not be read), kExitUsage (the command line is wrong).
//
// Thread-compatible; declarations store the output pointers, which must outlive Parse.
#ifndef SLUICE_TOOLS_OPTIONS_H_
#define SLUICE_TOOLS_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sluice::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

class OptionParser {
 public:
  // Parses one option value (or "" for a flag); an error message says what is wrong with
  // the value, and Parse puts "option '--name': " in front of it.
  using ValueParser = std::function<absl::Status(absl::string_view value)>;

  enum class Outcome { kRun, kHelp };

  // `command` is the subcommand ("run"). `summary` (what the command does) and `epilogue`
  // (e.g. its output format and exit status) are printed verbatim by Help, before and after
  // the option list; either may be empty.
  OptionParser(std::string command, std::string summary, std::string epilogue = "");

  const std::string& command() const { return command_; }

  // Declarations. `name` is the spelling with its dashes ("--steps"), unique per parser;
  // `value_name` is what Help shows for the value ("N"); `help` is one sentence or so,
  // word-wrapped by Help, which adds "(default ...)" and "(repeatable)" itself.

  // A flag: sets *out to true when given.
  void AddFlag(std::string name, std::string help, bool* out);
  // Any text; the default shown is *out's value when not empty.
  void AddString(std::string name, std::string value_name, std::string help, std::string* out);
  // One of `choices`; the default shown is *out's value.
  void AddChoice(std::string name, std::string value_name, std::string help,
                 std::vector<std::string> choices, std::string* out);
  // A decimal integer in [min, max] (int, int64_t or uint64_t); the default shown is *out.
  template <typename T>
  void AddInteger(std::string name, std::string value_name, std::string help, T min, T max, T* out);
  // A decimal number in [min, max] (no nan or inf); the default shown is *out.
  void AddDouble(std::string name, std::string value_name, std::string help, double min, double max,
                 double* out);
  // A value `parse` checks and stores; `default_text` is shown as the default when not empty.
  void AddValue(std::string name, std::string value_name, std::string help,
                std::string default_text, ValueParser parse);
  // An option that may be given any number of times; `parse` sees each value in order.
  void AddRepeated(std::string name, std::string value_name, std::string help, ValueParser parse);
  // A required positional argument ("PROGRAM"), filled in declaration order.
  void AddPositional(std::string name, std::string help, std::string* out);

  // argv[0] is the subcommand's name and is skipped. kHelp when -h or --help appears (even
  // after other errors); otherwise the first usage error as InvalidArgument, or kRun.
  absl::StatusOr<Outcome> Parse(int argc, const char* const* argv);

  // The text --help prints: usage line, summary, arguments, options (one per declaration,
  // plus -h/--help), epilogue.
  std::string Help() const;

  // "sluice <command>: <message>; see 'sluice <command> --help'".
  std::string UsageError(absl::string_view message) const;

 private:
  struct Option {
    std::string name;
    std::string value_name;  // empty for a flag
    std::string help;
    std::string default_text;
    bool repeatable = false;
    ValueParser parse;
  };
  struct Positional {
    std::string name;
    std::string help;
    std::string* out;
  };

  void Add(Option option);
  const Option* Find(absl::string_view name) const;

  std::string command_;
  std::string summary_;
  std::string epilogue_;
  std::vector<Option> options_;
  std::vector<Positional> positionals_;
};

// Parses argv into `parser`'s outputs. Returns kExitOk after printing the help to stdout,
// kExitUsage after printing parser.UsageError(...) to stderr, or nullopt to go on.
std::optional<int> ParseCommandLine(OptionParser& parser, int argc, char** argv);

// Prints "sluice <command>: <status>" to stderr; returns kExitFailure.
int ReportFailure(absl::string_view command, const absl::Status& status);

// --- Implementation details. ---

template <typename T>
void OptionParser::AddInteger(std::string name, std::string value_name, std::string help, T min,
                              T max, T* out) {
  static_assert(std::is_same_v<T, int> || std::is_same_v<T, int64_t> ||
                std::is_same_v<T, uint64_t>);
  std::string default_text = absl::StrCat(*out);
  AddValue(std::move(name), std::move(value_name), std::move(help), std::move(default_text),
           [min, max, out](absl::string_view text) -> absl::Status {
             T value;
             const bool full_range =
                 min == std::numeric_limits<T>::min() && max == std::numeric_limits<T>::max();
             if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
               return absl::InvalidArgumentError(absl::StrCat(
                   "'", text, "' is not ", std::is_signed_v<T> ? "an" : "a non-negative",
                   " integer", full_range ? "" : absl::StrCat(" in [", min, ", ", max, "]")));
             }
             *out = value;
             return absl::OkStatus();
           });
}

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_OPTIONS_H_
