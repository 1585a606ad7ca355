// RegisterStandardOps: every op family's schemas, then its host kernels (cpu, sim) and, in a
// build with the CUDA provider, its cuda kernels.
#include "ops/standard_ops.h"

#include "core/status.h"
#include "ops/internal/op_families.h"

namespace sluice::ops {

absl::Status RegisterStandardOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(internal::RegisterBasicOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterBasicHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterElementwiseOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterElementwiseHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterNnOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterNnHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterNormOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterNormHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterConvOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterConvHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterShapeAndOptimizerOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterShapeAndOptimizerHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterCompareOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterCompareHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterRowOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterRowHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterIndexOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterIndexHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterUnaryMathOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterUnaryMathHostKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterCollectiveOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterCollectiveKernels(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterCudaKernels(registry));
  return absl::OkStatus();
}

}  // namespace sluice::ops
