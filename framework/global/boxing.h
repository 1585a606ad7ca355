// Boxing: converting a global tensor's local part from one layout (NdSbp) to another on its
// placement, with the collectives each conversion needs, one mesh axis at a time: when the
// layouts differ, every split axis is gathered first (inner mesh axes first), then each
// axis converted from B or P to its target (outer axes first), so that two mesh axes
// splitting one tensor axis keep their blocks in mesh order. Along an axis of n ranks (the
// group that differs only in that coordinate):
//   P -> B  all_reduce(sum)           P -> S(k)  reduce_scatter(sum) along k
//   S(k) -> B  all_gather along k     S(i) -> S(j)  all_gather along i, then slice along j
//   B -> S(k)  slice (no transfer)    B -> P  the rank at coordinate 0 keeps the value,
//   S(k) -> P  all_gather, then B -> P          the others hold zeros (no transfer)
// Gathers and scatters along an axis other than the first move it to the front and back
// (transposes). Every rank of the placement must box the same tensors in the same order.
#ifndef SLUICE_FRAMEWORK_GLOBAL_BOXING_H_
#define SLUICE_FRAMEWORK_GLOBAL_BOXING_H_

#include "absl/status/statusor.h"
#include "core/shape.h"
#include "framework/eager/tensor.h"
#include "framework/global/placement.h"
#include "framework/global/sbp.h"

namespace sluice::global {

// The local shape of a tensor of `logical` shape under `sbp` on `placement`: every axis
// split along a mesh axis divided by that axis's size. InvalidArgument when a split axis
// does not exist or does not divide evenly (naming the axis and sizes).
absl::StatusOr<Shape> LocalShape(const Shape& logical, const Placement& placement,
                                 const NdSbp& sbp);

// This rank's part (parallel id `id`) under `to`, from its part `local` under `from`.
absl::StatusOr<eager::Tensor> Box(const eager::Tensor& local, const Placement& placement, int id,
                                  const Shape& logical, const NdSbp& from, const NdSbp& to);

}  // namespace sluice::global

#endif  // SLUICE_FRAMEWORK_GLOBAL_BOXING_H_
