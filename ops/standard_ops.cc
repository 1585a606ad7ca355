#include "ops/standard_ops.h"

#include "core/status.h"
#include "ops/internal/op_families.h"

namespace sluice::ops {

absl::Status RegisterStandardOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(internal::RegisterBasicOps(registry));
  SLUICE_RETURN_IF_ERROR(internal::RegisterBasicHostKernels(registry));
  return absl::OkStatus();
}

}  // namespace sluice::ops
