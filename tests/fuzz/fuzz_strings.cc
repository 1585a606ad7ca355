// Fuzz target: the short strings users type: devices ("sim:1"), dtypes ("f32"), stream
// types and stream keys ("sim:0/compute:1"), shapes ("[2, 3]"), placements
// ("cpu:[[0, 1], [2, 3]]") and layouts ("(S(0), B)"). The first byte picks the parser, the
// rest is the text. What a parser accepts must print and parse back equal, and print the
// same text again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "core/stream_id.h"
#include "core/stream_type.h"
#include "framework/global/placement.h"
#include "framework/global/sbp.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace fuzz = sluice::fuzz;

// Parse(text), then Print and Parse again: equal values and equal text.
template <typename T, typename ParseFn, typename PrintFn>
void RoundTrip(absl::string_view what, absl::string_view text, ParseFn parse, PrintFn print) {
  absl::StatusOr<T> value = parse(text);
  if (!value.ok()) {
    fuzz::CheckInputError(value.status(), what);
    return;
  }
  const std::string printed(print(*value));
  absl::StatusOr<T> again = parse(printed);
  fuzz::Check(again.ok(), std::string(what) + ": its own output '" + printed +
                              "' does not parse: " + again.status().ToString());
  fuzz::Check(*again == *value, std::string(what) + ": '" + printed + "' parses to another value");
  fuzz::Check(std::string(print(*again)) == printed,
              std::string(what) + ": '" + printed + "' prints differently the second time");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;  // NOLINT: the parsers below span three namespaces
  if (size == 0) return 0;
  const absl::string_view text = fuzz::AsText(data + 1, size - 1);
  switch (data[0] % 8) {
    case 0:
      RoundTrip<Device>("Device::Parse", text, Device::Parse,
                        [](const Device& d) { return d.ToString(); });
      break;
    case 1:
      RoundTrip<DataType>("ParseDataType", text, ParseDataType, DataTypeName);
      break;
    case 2:
      RoundTrip<StreamType>("ParseStreamType", text, ParseStreamType, StreamTypeName);
      break;
    case 3:
      RoundTrip<StreamKey>("StreamKey::Parse", text, StreamKey::Parse,
                           [](const StreamKey& k) { return k.ToString(); });
      break;
    case 4:
      RoundTrip<Shape>("Shape::Parse", text, Shape::Parse,
                       [](const Shape& s) { return s.ToString(); });
      break;
    case 5:
      RoundTrip<global::Placement>("Placement::Parse", text, global::Placement::Parse,
                                   [](const global::Placement& p) { return p.ToString(); });
      break;
    case 6:
      RoundTrip<global::Sbp>("Sbp::Parse", text, global::Sbp::Parse,
                             [](const global::Sbp& s) { return s.ToString(); });
      break;
    default:
      RoundTrip<global::NdSbp>("ParseNdSbp", text, global::ParseNdSbp, global::NdSbpToString);
      break;
  }
  return 0;
}
