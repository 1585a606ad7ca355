// Registration entry points of the built-in op families, called by RegisterStandardOps
// (ops/standard_ops.h). Each family has its schemas (and grad makers) in ops/<family>_ops.cc,
// its host kernels (cpu and sim) in ops/cpu/<family>_kernels.cc, and its CUDA kernels in
// ops/cuda/<family>_op_kernels.cc (device code in ops/cuda/<family>_kernels.cu).
#ifndef SLUICE_OPS_INTERNAL_OP_FAMILIES_H_
#define SLUICE_OPS_INTERNAL_OP_FAMILIES_H_

#include "absl/status/status.h"
#include "ops/op_registry.h"

namespace sluice::ops::internal {

// fill_constant, fill_zeros_like, assign, cast(+grad), scale, sum, memcpy_h2d, memcpy_d2h,
// uniform_random, gaussian_random.
absl::Status RegisterBasicOps(OpRegistry* registry);
absl::Status RegisterBasicHostKernels(OpRegistry* registry);

// add, sub, mul, div, max, min (numpy broadcasting), relu, sigmoid, tanh, exp, log, sqrt,
// square, and their grad ops.
absl::Status RegisterElementwiseOps(OpRegistry* registry);
absl::Status RegisterElementwiseHostKernels(OpRegistry* registry);

// matmul, reduce_sum, reduce_mean, softmax, log_softmax, softmax_with_cross_entropy, and
// their grad ops.
absl::Status RegisterNnOps(OpRegistry* registry);
absl::Status RegisterNnHostKernels(OpRegistry* registry);

// reshape, transpose, concat, split (and grads); sgd, adam.
absl::Status RegisterShapeAndOptimizerOps(OpRegistry* registry);
absl::Status RegisterShapeAndOptimizerHostKernels(OpRegistry* registry);

// The cuda kernels of every family, for the dtypes their host kernels take. Registers nothing
// (and returns OK) in a build without the CUDA provider (ops/cuda/cuda_kernels_stub.cc).
// Call it after the families' schemas are registered.
absl::Status RegisterCudaKernels(OpRegistry* registry);

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_OP_FAMILIES_H_
