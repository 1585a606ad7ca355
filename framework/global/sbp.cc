#include "framework/global/sbp.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status.h"

namespace sluice::global {

std::string Sbp::ToString() const {
  switch (kind) {
    case Kind::kSplit:
      return absl::StrCat("S(", axis, ")");
    case Kind::kBroadcast:
      return "B";
    case Kind::kPartialSum:
      return "P";
  }
  return "?";
}

absl::StatusOr<Sbp> Sbp::Parse(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t == "B" || t == "broadcast") return Broadcast();
  if (t == "P" || t == "partial_sum") return PartialSum();
  if ((absl::ConsumePrefix(&t, "S(") || absl::ConsumePrefix(&t, "split(")) &&
      absl::ConsumeSuffix(&t, ")")) {
    int axis;
    if (absl::SimpleAtoi(t, &axis) && axis >= 0) return Split(axis);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", text, "' is not an sbp: expected S(axis), B or P (split, broadcast, partial_sum)"));
}

std::string NdSbpToString(const NdSbp& sbp) {
  std::vector<std::string> items;
  for (const Sbp& s : sbp) items.push_back(s.ToString());
  return absl::StrCat("(", absl::StrJoin(items, ", "), ")");
}

absl::StatusOr<NdSbp> ParseNdSbp(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  if (absl::ConsumePrefix(&t, "(") && !absl::ConsumeSuffix(&t, ")")) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': missing ')'"));
  }
  NdSbp sbp;
  // Split at the commas between items, not inside "S(0)".
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= t.size(); ++i) {
    if (i == t.size() || (t[i] == ',' && depth == 0)) {
      SLUICE_ASSIGN_OR_RETURN(Sbp item, Sbp::Parse(t.substr(start, i - start)));
      sbp.push_back(item);
      start = i + 1;
    } else if (t[i] == '(') {
      ++depth;
    } else if (t[i] == ')') {
      --depth;
    }
  }
  return sbp;
}

}  // namespace sluice::global
