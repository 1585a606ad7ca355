// Fuzz target: the attribute parser (vm/attrs.h, AttrMap::Parse). What it accepts must print
// and parse back to the same text (compared as text: a NaN attribute is not equal to itself).
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_check.h"
#include "vm/attrs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = sluice::fuzz;
  absl::StatusOr<sluice::vm::AttrMap> attrs = sluice::vm::AttrMap::Parse(fuzz::AsText(data, size));
  if (!attrs.ok()) {
    fuzz::CheckInputError(attrs.status(), "AttrMap::Parse");
    return 0;
  }
  const std::string text = attrs->ToString();
  absl::StatusOr<sluice::vm::AttrMap> again = sluice::vm::AttrMap::Parse(text);
  fuzz::Check(again.ok(), "AttrMap::ToString's output '" + text +
                              "' does not parse: " + again.status().ToString());
  fuzz::Check(again->ToString() == text, "attributes printed, parsed and printed again differ: '" +
                                             text + "' then '" + again->ToString() + "'");
  return 0;
}
