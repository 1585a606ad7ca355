// SBP signatures: for an op on global tensors, the layout each input must have and the
// layout of the outputs, one mesh axis at a time, chosen so that running the op on the
// local parts computes the parts of the logical result. When the inputs' layouts fit a
// rule the op runs as it is; otherwise the signature asks for the inputs converted (boxing)
// to a layout that fits, at worst broadcast.
//
// Rules per mesh axis (the inputs' logical shapes as the op's schema sees them):
//   elementwise binary ops (add, sub, mul, div, max, min) on equal shapes:
//     (S(k), S(k)) -> S(k); (B, B) -> B; add, sub: (P, P) -> P; mul: (P, B), (B, P) -> P;
//     div: (P, B) -> P
//   unary elementwise ops (relu, sigmoid, tanh, exp, log, sqrt, square, cast, assign,
//   scale): S(k) -> S(k), B -> B; the linear ones (assign, scale without bias) P -> P
//   matmul (no transposes): (S(0), B) -> S(0); (B, S(1)) -> S(1); (S(1), S(0)) -> P;
//     (B, B) -> B; (P, B), (B, P) -> P
//   reduce_sum: S(k) over a reduced axis -> P; S(k) elsewhere -> S(k') (k' counts the
//     kept axes before k); B -> B; P -> P
//   every other op, and inputs that fit no rule: every input B -> B
#ifndef SLUICE_FRAMEWORK_GLOBAL_SBP_SIGNATURE_H_
#define SLUICE_FRAMEWORK_GLOBAL_SBP_SIGNATURE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/shape.h"
#include "framework/global/sbp.h"
#include "vm/attrs.h"

namespace sluice::global {

struct SbpSignature {
  std::vector<NdSbp> inputs;  // the layout each input must have (boxing converts)
  NdSbp output;               // the layout of every output
};

// `inputs`: the inputs' current layouts and logical shapes (flattened over slots), `attrs`
// the op's attributes with defaults, `mesh_axes` the placement's. Never fails for a known
// layout: the fallback broadcasts (and an op without inputs makes broadcast outputs).
SbpSignature InferSbpSignature(absl::string_view op, const std::vector<NdSbp>& inputs,
                               const std::vector<Shape>& shapes, const vm::AttrMap& attrs,
                               int mesh_axes);

}  // namespace sluice::global

#endif  // SLUICE_FRAMEWORK_GLOBAL_SBP_SIGNATURE_H_
