#include "vm/attrs.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace sluice::vm {
namespace {

template <typename T>
absl::StatusOr<T> Get(const std::map<std::string, AttrValue, std::less<>>& values,
                      absl::string_view name, absl::string_view type_name) {
  auto it = values.find(name);
  if (it == values.end()) return absl::NotFoundError(absl::StrCat("no attribute '", name, "'"));
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' is not ", type_name));
}

}  // namespace

absl::StatusOr<int64_t> AttrMap::GetInt(absl::string_view name) const {
  return Get<int64_t>(values_, name, "an int");
}
absl::StatusOr<double> AttrMap::GetFloat(absl::string_view name) const {
  return Get<double>(values_, name, "a float");
}
absl::StatusOr<std::string> AttrMap::GetString(absl::string_view name) const {
  return Get<std::string>(values_, name, "a string");
}
absl::StatusOr<std::vector<int64_t>> AttrMap::GetInts(absl::string_view name) const {
  return Get<std::vector<int64_t>>(values_, name, "an int list");
}
absl::StatusOr<BlockRef> AttrMap::GetBlock(absl::string_view name) const {
  return Get<BlockRef>(values_, name, "a block reference");
}

bool operator==(const AttrMap& a, const AttrMap& b) {
  if (a.values_.size() != b.values_.size()) return false;
  for (auto x = a.values_.begin(), y = b.values_.begin(); x != a.values_.end(); ++x, ++y) {
    if (x->first != y->first) return false;
    const double* dx = std::get_if<double>(&x->second);
    const double* dy = std::get_if<double>(&y->second);
    if (dx != nullptr && dy != nullptr && std::isnan(*dx) && std::isnan(*dy)) continue;
    if (x->second != y->second) return false;
  }
  return true;
}

std::string AttrMap::ToString() const {
  std::vector<std::string> parts;
  for (const auto& [name, value] : values_) {
    std::string text;
    if (const auto* i = std::get_if<int64_t>(&value)) {
      text = absl::StrCat("i:", *i);
    } else if (const auto* f = std::get_if<double>(&value)) {
      char buf[40];
      std::snprintf(buf, sizeof(buf), "%.17g", *f);
      text = absl::StrCat("f:", buf);
    } else if (const auto* s = std::get_if<std::string>(&value)) {
      text = absl::StrCat("s:", *s);
    } else if (const auto* b = std::get_if<BlockRef>(&value)) {
      text = absl::StrCat("b:", b->index);
    } else {
      text = absl::StrCat("v:", absl::StrJoin(std::get<std::vector<int64_t>>(value), ";"));
    }
    parts.push_back(absl::StrCat(name, "=", text));
  }
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<AttrMap> AttrMap::Parse(absl::string_view text) {
  AttrMap map;
  if (text.empty()) return map;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos || eq == 0 || part.size() < eq + 3 || part[eq + 2] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("bad attribute '", part, "' (want NAME=T:VALUE, T one of i f s v b)"));
    }
    const std::string name(part.substr(0, eq));
    const char type = part[eq + 1];
    const absl::string_view body = part.substr(eq + 3);
    if (type == 'i') {
      int64_t v;
      if (!absl::SimpleAtoi(body, &v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("attribute '", name, "': bad int '", body, "'"));
      }
      map.Set(name, v);
    } else if (type == 'f') {
      const std::string copy(body);
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(copy.c_str(), &end);
      // ERANGE comes with overflow (infinite result) and with underflow; an underflow to a
      // subnormal is exact for what ToString printed (%.17g), an underflow to zero is not.
      const bool out_of_range = errno == ERANGE && (std::isinf(v) || v == 0.0);
      if (copy.empty() || end != copy.c_str() + copy.size() || out_of_range) {
        return absl::InvalidArgumentError(
            absl::StrCat("attribute '", name, "': bad float '", body, "'"));
      }
      map.Set(name, v);
    } else if (type == 's') {
      if (body.find_first_of(" \t\n=") != absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "': bad string"));
      }
      map.Set(name, std::string(body));
    } else if (type == 'v') {
      std::vector<int64_t> v;
      if (!body.empty()) {
        for (absl::string_view item : absl::StrSplit(body, ';')) {
          int64_t x;
          if (!absl::SimpleAtoi(item, &x)) {
            return absl::InvalidArgumentError(
                absl::StrCat("attribute '", name, "': bad int '", item, "'"));
          }
          v.push_back(x);
        }
      }
      map.Set(name, std::move(v));
    } else if (type == 'b') {
      int64_t index;
      if (!absl::SimpleAtoi(body, &index) || index < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("attribute '", name, "': bad block index '", body, "'"));
      }
      map.Set(name, BlockRef{index});
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", name, "': unknown type '", std::string(1, type), "'"));
    }
  }
  return map;
}

}  // namespace sluice::vm
