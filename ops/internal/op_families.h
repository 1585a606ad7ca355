// Registration entry points of the built-in op families, called by RegisterStandardOps
// (ops/standard_ops.h). Each family has its schemas (and grad makers) in ops/<family>_ops.cc
// and its host kernels (cpu and sim) in ops/cpu/<family>_kernels.cc.
#ifndef SLUICE_OPS_INTERNAL_OP_FAMILIES_H_
#define SLUICE_OPS_INTERNAL_OP_FAMILIES_H_

#include "absl/status/status.h"
#include "ops/op_registry.h"

namespace sluice::ops::internal {

// fill_constant, fill_zeros_like, assign, cast(+grad), scale, sum, memcpy_h2d, memcpy_d2h,
// uniform_random, gaussian_random.
absl::Status RegisterBasicOps(OpRegistry* registry);
absl::Status RegisterBasicHostKernels(OpRegistry* registry);

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_OP_FAMILIES_H_
