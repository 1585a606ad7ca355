// What every fuzz target shares: a check that stops the run the way libFuzzer records as a
// crash (abort, after printing why), and the rule every reader's errors follow.
#ifndef SLUICE_TESTS_FUZZ_FUZZ_CHECK_H_
#define SLUICE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::fuzz {

// Aborts, printing `what`, when `ok` is false: a broken round trip or error contract is a
// finding, the same as a sanitizer report.
inline void Check(bool ok, absl::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

// A reader's error for bad input: InvalidArgument (or DataLoss for a truncated text), with
// a message that says something.
inline void CheckInputError(const absl::Status& status, absl::string_view reader) {
  Check(status.code() == absl::StatusCode::kInvalidArgument ||
            status.code() == absl::StatusCode::kDataLoss,
        std::string(reader) +
            " gave an error that is not InvalidArgument or DataLoss: " + status.ToString());
  Check(!status.message().empty(), std::string(reader) + " gave an error with no message");
}

inline absl::string_view AsText(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace sluice::fuzz

#endif  // SLUICE_TESTS_FUZZ_FUZZ_CHECK_H_
