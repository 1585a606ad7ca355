// OptionParser: declared options parse argv and generate --help; every usage error names
// the option or argument at fault.
#include "tools/options.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::tools::options_test {
namespace {

using ::testing::HasSubstr;

// A parser like a subcommand's: one positional, every kind of option.
struct Fixture {
  std::string program;
  bool check = false;
  std::string trace;
  std::string mode = "fast";
  int steps = 1;
  int64_t elements = 64;
  uint64_t seed = 7;
  double rate = 0.5;
  std::vector<std::string> feeds;
  OptionParser parser{"try", "Tries things.\n", "Exit status: 0.\n"};

  Fixture() {
    parser.AddPositional("PROGRAM", "the program to try", &program);
    parser.AddFlag("--check", "check everything", &check);
    parser.AddString("--trace", "FILE", "write a trace", &trace);
    parser.AddChoice("--mode", "M", "fast or slow", {"fast", "slow"}, &mode);
    parser.AddInteger("--steps", "N", "steps to run", 1, 100, &steps);
    parser.AddInteger<int64_t>("--elements", "E", "elements", 1, INT64_MAX, &elements);
    parser.AddInteger<uint64_t>("--seed", "S", "the seed", 0, UINT64_MAX, &seed);
    parser.AddDouble("--rate", "R", "a rate", 0.0, 1.0, &rate);
    parser.AddRepeated("--feed", "NAME=FILE", "feed a variable",
                       [this](absl::string_view value) -> absl::Status {
                         if (value.find('=') == absl::string_view::npos) {
                           return absl::InvalidArgumentError("expected NAME=FILE");
                         }
                         feeds.emplace_back(value);
                         return absl::OkStatus();
                       });
  }

  absl::StatusOr<OptionParser::Outcome> Parse(std::initializer_list<const char*> args) {
    std::vector<const char*> argv = {"try"};
    argv.insert(argv.end(), args.begin(), args.end());
    return parser.Parse(static_cast<int>(argv.size()), argv.data());
  }

  // The usage error's message; fails the test when parsing succeeds.
  std::string Error(std::initializer_list<const char*> args) {
    absl::StatusOr<OptionParser::Outcome> outcome = Parse(args);
    EXPECT_FALSE(outcome.ok());
    if (outcome.ok()) return "";
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(outcome.status().message());
  }
};

TEST(OptionParserTest, ParsesEveryKindOfOption) {
  Fixture f;
  absl::StatusOr<OptionParser::Outcome> outcome =
      f.Parse({"--steps", "3", "p.program", "--check", "--trace=t.json", "--mode", "slow",
               "--elements", "4096", "--seed", "18446744073709551615", "--rate", "0.25", "--feed",
               "x=x.npy", "--feed=y=y.npy"});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, OptionParser::Outcome::kRun);
  EXPECT_EQ(f.program, "p.program");
  EXPECT_TRUE(f.check);
  EXPECT_EQ(f.trace, "t.json");
  EXPECT_EQ(f.mode, "slow");
  EXPECT_EQ(f.steps, 3);
  EXPECT_EQ(f.elements, 4096);
  EXPECT_EQ(f.seed, UINT64_MAX);
  EXPECT_DOUBLE_EQ(f.rate, 0.25);
  EXPECT_EQ(f.feeds, (std::vector<std::string>{"x=x.npy", "y=y.npy"}));
}

TEST(OptionParserTest, KeepsDefaultsOfOptionsNotGiven) {
  Fixture f;
  ASSERT_TRUE(f.Parse({"p.program"}).ok());
  EXPECT_FALSE(f.check);
  EXPECT_EQ(f.mode, "fast");
  EXPECT_EQ(f.steps, 1);
  EXPECT_EQ(f.seed, 7u);
  EXPECT_TRUE(f.feeds.empty());
}

TEST(OptionParserTest, UnknownOptionIsNamed) {
  Fixture f;
  EXPECT_EQ(f.Error({"p.program", "--fetc", "x"}), "unknown option '--fetc'");
  EXPECT_EQ(f.Error({"p.program", "--fetc=x"}), "unknown option '--fetc'");
  EXPECT_EQ(f.Error({"p.program", "-x"}), "unknown option '-x'");
}

TEST(OptionParserTest, UsageErrorPointsAtHelp) {
  Fixture f;
  EXPECT_EQ(f.parser.UsageError("unknown option '--fetc'"),
            "sluice try: unknown option '--fetc'; see 'sluice try --help'");
}

TEST(OptionParserTest, MissingValueIsNamed) {
  Fixture f;
  EXPECT_EQ(f.Error({"p.program", "--steps"}), "option '--steps' needs a value N");
  // A following option is not taken as the value.
  EXPECT_EQ(f.Error({"p.program", "--trace", "--check"}), "option '--trace' needs a value FILE");
}

TEST(OptionParserTest, BadIntegersAreNamed) {
  Fixture f;
  EXPECT_EQ(f.Error({"p.program", "--steps", "x"}),
            "option '--steps': 'x' is not an integer in [1, 100]");
  EXPECT_EQ(f.Error({"p.program", "--steps", "0"}),
            "option '--steps': '0' is not an integer in [1, 100]");
  EXPECT_EQ(f.Error({"p.program", "--steps", "101"}),
            "option '--steps': '101' is not an integer in [1, 100]");
  EXPECT_EQ(f.Error({"p.program", "--steps", "2.5"}),
            "option '--steps': '2.5' is not an integer in [1, 100]");
  EXPECT_EQ(f.Error({"p.program", "--seed", "-1"}),
            "option '--seed': '-1' is not a non-negative integer");
  EXPECT_THAT(f.Error({"p.program", "--elements", "99999999999999999999"}),
              HasSubstr("option '--elements': '99999999999999999999' is not an integer"));
}

TEST(OptionParserTest, BadFloatsAreNamed) {
  Fixture f;
  EXPECT_EQ(f.Error({"p.program", "--rate", "fast"}),
            "option '--rate': 'fast' is not a number in [0, 1]");
  EXPECT_EQ(f.Error({"p.program", "--rate", "1.5"}),
            "option '--rate': '1.5' is not a number in [0, 1]");
  EXPECT_EQ(f.Error({"p.program", "--rate", "nan"}),
            "option '--rate': 'nan' is not a number in [0, 1]");
}

TEST(OptionParserTest, BadChoiceAndBadCustomValueAreNamed) {
  Fixture f;
  EXPECT_EQ(f.Error({"p.program", "--mode", "medium"}),
            "option '--mode': 'medium' is not one of fast, slow");
  EXPECT_EQ(f.Error({"p.program", "--feed", "x"}), "option '--feed': expected NAME=FILE");
}

TEST(OptionParserTest, RepeatedSingleOptionIsAnError) {
  Fixture f;
  EXPECT_EQ(f.Error({"p.program", "--steps", "2", "--steps", "3"}),
            "option '--steps' given more than once");
  EXPECT_EQ(f.Error({"p.program", "--check", "--check"}), "option '--check' given more than once");
}

TEST(OptionParserTest, RepeatableOptionCollectsEveryValueInOrder) {
  Fixture f;
  ASSERT_TRUE(f.Parse({"--feed", "a=1", "p.program", "--feed", "b=2", "--feed", "c=3"}).ok());
  EXPECT_EQ(f.feeds, (std::vector<std::string>{"a=1", "b=2", "c=3"}));
}

TEST(OptionParserTest, FlagTakesNoValue) {
  Fixture f;
  EXPECT_EQ(f.Error({"p.program", "--check=yes"}), "option '--check' takes no value");
}

TEST(OptionParserTest, PositionalArguments) {
  Fixture f;
  EXPECT_EQ(f.Error({"--check"}), "missing PROGRAM");
  EXPECT_EQ(f.Error({"a.program", "b.program"}), "unexpected argument 'b.program'");
  // After "--" a word starting with '-' is positional; a lone "-" always is.
  Fixture g;
  ASSERT_TRUE(g.Parse({"--", "-odd.program"}).ok());
  EXPECT_EQ(g.program, "-odd.program");
  Fixture h;
  ASSERT_TRUE(h.Parse({"-"}).ok());
  EXPECT_EQ(h.program, "-");
}

TEST(OptionParserTest, ValueMayStartWithOneDash) {
  Fixture f;
  ASSERT_TRUE(f.Parse({"p.program", "--trace", "-"}).ok());
  EXPECT_EQ(f.trace, "-");
}

TEST(OptionParserTest, HelpWinsOverUsageErrors) {
  for (const char* help : {"--help", "-h"}) {
    Fixture f;
    absl::StatusOr<OptionParser::Outcome> outcome = f.Parse({"--fetc", help, "--steps", "x"});
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(*outcome, OptionParser::Outcome::kHelp);
  }
}

TEST(OptionParserTest, HelpListsEveryOptionWithValueDefaultAndRepeatable) {
  Fixture f;
  const std::string help = f.parser.Help();
  EXPECT_THAT(help, HasSubstr("usage: sluice try PROGRAM [options]\n\nTries things.\n"));
  EXPECT_THAT(help, HasSubstr("PROGRAM"));
  EXPECT_THAT(help, HasSubstr("the program to try"));
  for (const char* label : {"--check ", "--trace FILE", "--mode M", "--steps N", "--elements E",
                            "--seed S", "--rate R", "--feed NAME=FILE", "-h, --help"}) {
    EXPECT_THAT(help, HasSubstr(std::string("\n  ") + label)) << label;
  }
  EXPECT_THAT(help, HasSubstr("steps to run (default 1)"));
  EXPECT_THAT(help, HasSubstr("fast or slow (default fast)"));
  EXPECT_THAT(help, HasSubstr("the seed (default 7)"));
  EXPECT_THAT(help, HasSubstr("a rate (default 0.5)"));
  EXPECT_THAT(help, HasSubstr("feed a variable (repeatable)"));
  EXPECT_THAT(help, HasSubstr("write a trace\n"));  // no default when the string is empty
  EXPECT_TRUE(absl::EndsWith(help, "\nExit status: 0.\n")) << help;
}

TEST(OptionParserTest, HelpWrapsLongTextWithinEightyColumns) {
  bool flag = false;
  OptionParser parser("wrap", "");
  parser.AddFlag("--a-very-long-option-name-indeed",
                 "a long help text that goes on and on, well past the end of one line of the "
                 "terminal, so that it must wrap onto a second and maybe a third line",
                 &flag);
  const std::string help = parser.Help();
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    EXPECT_LE(line.size(), 80u) << line;
  }
  EXPECT_THAT(help, HasSubstr("--a-very-long-option-name-indeed\n"));
  EXPECT_THAT(help, HasSubstr("third line"));
}

}  // namespace
}  // namespace sluice::tools::options_test
