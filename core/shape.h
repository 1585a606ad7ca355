// Shape: the dimensions of a tensor, with NumPy-style broadcasting.
#ifndef SLUICE_CORE_SHAPE_H_
#define SLUICE_CORE_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sluice {

// A list of non-negative dimensions; rank 0 is a scalar with one element.
// Value type; thread-compatible.
class Shape {
 public:
  using Dims = absl::InlinedVector<int64_t, 6>;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(absl::Span<const int64_t> dims) : dims_(dims.begin(), dims.end()) {}

  // Validating constructor for user input: every dimension must be >= 0 and the element
  // count must fit in int64.
  static absl::StatusOr<Shape> Make(absl::Span<const int64_t> dims);
  // Make's checks without building a Shape (for callers that already hold one).
  static absl::Status Check(absl::Span<const int64_t> dims);

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  absl::Span<const int64_t> dims() const { return dims_; }
  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  // Row-major strides in elements.
  Dims Strides() const;

  std::string ToString() const;  // "[2, 3]"
  // Parses ToString()'s form: '[', dimensions as decimal integers separated by ',' (each
  // optionally preceded by spaces), ']'; "[]" is a scalar. Make's checks apply. Errors
  // (InvalidArgument) quote the text and name the bad dimension.
  static absl::StatusOr<Shape> Parse(absl::string_view text);
  // Element by element: shapes are short, and a library memcmp costs more than the loop.
  friend bool operator==(const Shape& a, const Shape& b) {
    const absl::Span<const int64_t> x = a.dims_, y = b.dims_;
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] != y[i]) return false;
    }
    return true;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  Dims dims_;
};

// The NumPy broadcast of two shapes: dimensions are aligned from the right and each pair
// must be equal or contain a 1. The error names both shapes.
absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// Strides for reading `from` as if it had shape `to` (a broadcast of `from`): broadcast
// dimensions get stride 0. Requires that `to` is a valid broadcast of `from`.
Shape::Dims BroadcastStrides(const Shape& from, const Shape& to);

}  // namespace sluice

#endif  // SLUICE_CORE_SHAPE_H_
