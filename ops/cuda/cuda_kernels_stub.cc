// The CUDA kernels of a build without the CUDA toolkit: there are none to register.
#include "ops/internal/op_families.h"

namespace sluice::ops::internal {

absl::Status RegisterCudaKernels(OpRegistry*) { return absl::OkStatus(); }

}  // namespace sluice::ops::internal
