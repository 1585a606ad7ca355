#include "framework/global/placement.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status.h"

namespace sluice::global {

absl::StatusOr<Placement> Placement::Create(DeviceType device_type, std::vector<int> ranks,
                                            std::vector<int64_t> hierarchy) {
  if (ranks.empty()) return absl::InvalidArgumentError("a placement needs at least one rank");
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("placement rank ", ranks[i], " is negative"));
    }
    if (std::find(ranks.begin(), ranks.begin() + i, ranks[i]) != ranks.begin() + i) {
      return absl::InvalidArgumentError(absl::StrCat("placement lists rank ", ranks[i], " twice"));
    }
  }
  if (hierarchy.empty()) hierarchy = {static_cast<int64_t>(ranks.size())};
  if (hierarchy.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("placements have 1 or 2 mesh axes, not ", hierarchy.size()));
  }
  int64_t product = 1;
  for (int64_t d : hierarchy) {
    if (d < 1) return absl::InvalidArgumentError(absl::StrCat("mesh axis of size ", d));
    product *= d;
  }
  if (product != static_cast<int64_t>(ranks.size())) {
    return absl::InvalidArgumentError(absl::StrCat("a mesh [", absl::StrJoin(hierarchy, ", "),
                                                   "] does not hold ", ranks.size(), " ranks"));
  }
  return Placement(device_type, std::move(ranks), std::move(hierarchy));
}

namespace {

absl::StatusOr<std::vector<int>> ParseRankList(absl::string_view text, absl::string_view whole) {
  std::vector<int> ranks;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int rank;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &rank)) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement '", whole, "': '", item, "' is not a rank"));
    }
    ranks.push_back(rank);
  }
  return ranks;
}

}  // namespace

absl::StatusOr<Placement> Placement::Parse(absl::string_view text) {
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement '", text, "' is not TYPE:[RANKS] (e.g. cpu:[0, 1])"));
  }
  SLUICE_ASSIGN_OR_RETURN(Device device, Device::Parse(text.substr(0, colon)));
  absl::string_view body = absl::StripAsciiWhitespace(text.substr(colon + 1));
  if (!absl::ConsumePrefix(&body, "[") || !absl::ConsumeSuffix(&body, "]")) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement '", text, "': the ranks go in brackets"));
  }
  body = absl::StripAsciiWhitespace(body);
  if (!absl::StartsWith(body, "[")) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<int> ranks, ParseRankList(body, text));
    return Create(device.type(), std::move(ranks));
  }
  std::vector<int> ranks;
  int64_t rows = 0, columns = -1;
  while (!body.empty()) {
    if (!absl::ConsumePrefix(&body, "[")) {
      return absl::InvalidArgumentError(absl::StrCat("placement '", text, "': expected '['"));
    }
    const size_t close = body.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("placement '", text, "': missing ']'"));
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<int> row, ParseRankList(body.substr(0, close), text));
    if (columns >= 0 && static_cast<int64_t>(row.size()) != columns) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement '", text, "': the mesh's rows differ in length"));
    }
    columns = static_cast<int64_t>(row.size());
    ++rows;
    ranks.insert(ranks.end(), row.begin(), row.end());
    body = absl::StripAsciiWhitespace(body.substr(close + 1));
    absl::ConsumePrefix(&body, ",");
    body = absl::StripAsciiWhitespace(body);
  }
  return Create(device.type(), std::move(ranks), {rows, columns});
}

std::optional<int> Placement::ParallelId(int rank) const {
  auto it = std::find(ranks_.begin(), ranks_.end(), rank);
  if (it == ranks_.end()) return std::nullopt;
  return static_cast<int>(it - ranks_.begin());
}

std::vector<int64_t> Placement::Coordinates(int id) const {
  std::vector<int64_t> coords(hierarchy_.size());
  int64_t rest = id;
  for (int axis = ndim() - 1; axis >= 0; --axis) {
    coords[axis] = rest % hierarchy_[axis];
    rest /= hierarchy_[axis];
  }
  return coords;
}

std::vector<int> Placement::AxisGroup(int id, int axis) const {
  std::vector<int64_t> coords = Coordinates(id);
  std::vector<int> group;
  for (int64_t c = 0; c < hierarchy_[axis]; ++c) {
    coords[axis] = c;
    int64_t index = 0;
    for (int a = 0; a < ndim(); ++a) index = index * hierarchy_[a] + coords[a];
    group.push_back(ranks_[index]);
  }
  return group;
}

std::string Placement::ToString() const {
  std::string text = absl::StrCat(DeviceTypeName(device_type_), ":[");
  if (ndim() == 1) {
    absl::StrAppend(&text, absl::StrJoin(ranks_, ", "));
  } else {
    const int64_t columns = hierarchy_[1];
    for (int64_t r = 0; r < hierarchy_[0]; ++r) {
      std::vector<int> row(ranks_.begin() + r * columns, ranks_.begin() + (r + 1) * columns);
      absl::StrAppend(&text, r == 0 ? "" : ", ", "[", absl::StrJoin(row, ", "), "]");
    }
  }
  absl::StrAppend(&text, "]");
  return text;
}

}  // namespace sluice::global
