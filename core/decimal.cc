#include "core/decimal.h"

namespace sluice {

bool ParseDecimal(absl::string_view text, int64_t* value) {
  const bool negative = !text.empty() && text[0] == '-';
  const absl::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty() || digits.size() > 19) return false;
  uint64_t v = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return false;
  *value = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

}  // namespace sluice
