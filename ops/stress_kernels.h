// Stress kernels: the VM's own minimal float32 kernels, looked up by name in a
// KernelRegistry (not the OpRegistry: they have no schemas, inference or gradients). The VM's
// tests and benchmarks, `sluice stress` and `sluice replay --ops stress` run them. Each
// validates its operands at launch and runs its loop as stream work, so on sim it runs
// asynchronously on the stream's thread, in stream order; they work on any stream whose
// memory the host can address (cpu, sim).
//
//   noop              no work at all (measures VM overhead)
//   fill   -> y       y[i] = value                         attr value: f
//   add    a, b -> y  y[i] = a[i] + b[i]
//   mul    a, b -> y  y[i] = a[i] * b[i]
//   scale  x -> y     y[i] = alpha * x[i] + beta           attrs alpha, beta: f
//   copy   x -> y     y = x (any two host-addressable devices)
// Shapes must match exactly (InvalidArgument naming the operand).
#ifndef SLUICE_OPS_STRESS_KERNELS_H_
#define SLUICE_OPS_STRESS_KERNELS_H_

#include "absl/status/status.h"
#include "ops/kernel_registry.h"

namespace sluice::ops {

// Adds the kernels above to `registry`. AlreadyExists when one of their names is taken.
absl::Status RegisterStressKernels(KernelRegistry* registry);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_STRESS_KERNELS_H_
