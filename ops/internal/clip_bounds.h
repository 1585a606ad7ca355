// The bounds of the clip op (ops/elementwise_ops.cc) in an element type. One conversion for
// the schema (which refuses bounds at build time) and for the host and CUDA kernels (which
// read the same attributes at run time), so every device clips to the same values.
#ifndef SLUICE_OPS_INTERNAL_CLIP_BOUNDS_H_
#define SLUICE_OPS_INTERNAL_CLIP_BOUNDS_H_

#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/data_type.h"

namespace sluice::ops::internal {

template <typename T>
struct ClipBounds {
  T lo;
  T hi;
};

// Saturates an integral-valued double (or an infinity) into T's range: an infinite bound
// means no bound at all.
template <typename T>
T SaturateToInteger(double v) {
  // 2^digits is one past T's largest value and exact in double, unlike the largest value
  // itself for int64.
  const double top = std::ldexp(1.0, std::numeric_limits<T>::digits);
  if (v >= top) return std::numeric_limits<T>::max();
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
    return std::numeric_limits<T>::lowest();
  }
  return static_cast<T>(v);
}

// The attributes 'min' (lo) and 'max' (hi) of `op` as bounds of T. InvalidArgument naming
// both when either is NaN or lo > hi (NumPy would return hi everywhere; a reversed pair is
// almost always a swapped call, and it leaves the gradient's "inside" undefined). Floats:
// each bound rounded to the nearest T (as scale's attributes are). Integers: lo rounded up
// and hi rounded down, then saturated to T's range, so the result is the integer in [lo, hi]
// nearest to x; InvalidArgument when no integer lies in [lo, hi].
template <typename T>
absl::StatusOr<ClipBounds<T>> MakeClipBounds(absl::string_view op, double lo, double hi) {
  auto error = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("op '", op, "': attributes 'min' (", lo, ") and 'max' (", hi, "): ", why));
  };
  if (std::isnan(lo) || std::isnan(hi)) return error("a bound is NaN");
  if (lo > hi) return error("'min' is greater than 'max'");
  if constexpr (std::is_floating_point_v<T>) {
    return ClipBounds<T>{static_cast<T>(lo), static_cast<T>(hi)};
  } else {
    const ClipBounds<T> b{SaturateToInteger<T>(std::ceil(lo)),
                          SaturateToInteger<T>(std::floor(hi))};
    if (b.lo > b.hi) {
      return error(absl::StrCat("no ", DataTypeName(DataTypeOf<T>()), " value lies between them"));
    }
    return b;
  }
}

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_CLIP_BOUNDS_H_
