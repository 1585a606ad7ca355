// ParseDecimal: the strict integer reader of Sluice's text formats (shapes, program text).
#ifndef SLUICE_CORE_DECIMAL_H_
#define SLUICE_CORE_DECIMAL_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace sluice {

// A decimal integer with an optional leading '-': no '+', no spaces, nothing after it, so
// "1e3", " 2" and "0x10" are refused instead of read the way strtoll would. False (and
// `*value` untouched) when `text` is not such an integer or does not fit in int64.
// Thread-safe (a pure function).
bool ParseDecimal(absl::string_view text, int64_t* value);

}  // namespace sluice

#endif  // SLUICE_CORE_DECIMAL_H_
