// Registration entry points of the built-in op families, called by RegisterStandardOps
// (ops/standard_ops.h). Each family has its schemas (and grad makers) in ops/<family>_ops.cc,
// its host kernels (cpu and sim) in ops/cpu/<family>_kernels.cc, and its CUDA kernels in
// ops/cuda/<family>_op_kernels.cc (device code in ops/cuda/<family>_kernels.cu).
#ifndef SLUICE_OPS_INTERNAL_OP_FAMILIES_H_
#define SLUICE_OPS_INTERNAL_OP_FAMILIES_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
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
// The i32 and i64 kernels of add, sub, mul, div, neg, abs and relu (ops/cpu/
// integer_arith_kernels.cc); RegisterElementwiseHostKernels calls it.
absl::Status RegisterIntegerArithHostKernels(OpRegistry* registry);

// matmul, reduce_sum, reduce_mean, softmax, log_softmax, softmax_with_cross_entropy, and
// their grad ops.
absl::Status RegisterNnOps(OpRegistry* registry);
absl::Status RegisterNnHostKernels(OpRegistry* registry);

// batch_norm_infer, layer_norm, and their grad ops (ops/norm_ops.cc).
absl::Status RegisterNormOps(OpRegistry* registry);
absl::Status RegisterNormHostKernels(OpRegistry* registry);

// conv2d, max_pool2d, avg_pool2d (NCHW, f32 and f64) and their grad ops (ops/conv_ops.cc).
absl::Status RegisterConvOps(OpRegistry* registry);
absl::Status RegisterConvHostKernels(OpRegistry* registry);

// reshape, transpose, concat, split (and grads); sgd, adam.
absl::Status RegisterShapeAndOptimizerOps(OpRegistry* registry);
absl::Status RegisterShapeAndOptimizerHostKernels(OpRegistry* registry);

// less_than, less_equal, greater_than, greater_equal, equal, not_equal (numeric X, Y ->
// bool, broadcasting), logical_and, logical_or, logical_xor, logical_not (bool -> bool), and
// increment (with its grad maker). Host kernels for every dtype the schemas take.
absl::Status RegisterCompareOps(OpRegistry* registry);
absl::Status RegisterCompareHostKernels(OpRegistry* registry);
// increment's rule for its attribute 'value', shared by the schema and the kernels: OK for f32
// and f64; for i32 and i64 InvalidArgument naming `op` and the attribute unless `value` is an
// integer in the dtype's range (so that converting it is exact and defined).
absl::Status CheckIncrementValue(absl::string_view op, DataType dtype, double value);

// write_row and read_row (a buffer's row by a scalar index, for autodiff's loop stacks).
// Host kernels for every dtype.
absl::Status RegisterRowOps(OpRegistry* registry);
absl::Status RegisterRowHostKernels(OpRegistry* registry);

// gather, slice, where (and grads) and erf (ops/index_ops.cc). Host kernels: gather, slice
// for every dtype, where under Cond's bool for X and Y of every dtype, the rest f32 and f64.
absl::Status RegisterIndexOps(OpRegistry* registry);
absl::Status RegisterIndexHostKernels(OpRegistry* registry);

// sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh (and their grad ops),
// floor, ceil, round: f32 and f64 (ops/unary_math_ops.cc, table in internal/unary_math.h).
absl::Status RegisterUnaryMathOps(OpRegistry* registry);
absl::Status RegisterUnaryMathHostKernels(OpRegistry* registry);

// all_reduce, all_gather, reduce_scatter, broadcast, reduce, send, recv (ops/collective_ops.cc),
// and their kernel for every device type and dtype (ops/collective_kernel.cc): one kernel,
// which runs a host communicator's call as stream work and lets a device communicator
// enqueue on the device's stream.
absl::Status RegisterCollectiveOps(OpRegistry* registry);
absl::Status RegisterCollectiveKernels(OpRegistry* registry);

// The cuda kernels of every family, for the dtypes their host kernels take. Registers nothing
// (and returns OK) in a build without the CUDA provider (ops/cuda/cuda_kernels_stub.cc).
// Call it after the families' schemas are registered.
absl::Status RegisterCudaKernels(OpRegistry* registry);

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_OP_FAMILIES_H_
