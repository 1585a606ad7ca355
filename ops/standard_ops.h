// RegisterStandardOps: every built-in op schema and its kernels, into a registry the caller
// owns. Host kernels serve the cpu and sim devices.
#ifndef SLUICE_OPS_STANDARD_OPS_H_
#define SLUICE_OPS_STANDARD_OPS_H_

#include "absl/status/status.h"
#include "ops/op_registry.h"

namespace sluice::ops {

// AlreadyExists when called twice on one registry.
absl::Status RegisterStandardOps(OpRegistry* registry);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_STANDARD_OPS_H_
