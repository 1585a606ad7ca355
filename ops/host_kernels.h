// Host kernels: elementwise and copy kernels for streams whose memory the host can address
// (cpu, sim). Each validates its operands at launch and runs its loop as stream work, so on
// sim it runs asynchronously on the stream's thread, in stream order. They are what the VM's
// tests, benchmarks and `sluice stress` run; the op layer proper (schemas, inference,
// typed kernels per device) builds on the same registry.
//
//   noop              no work at all (measures VM overhead)
//   fill   -> y       y[i] = value                         attr value: f
//   add    a, b -> y  y[i] = a[i] + b[i]
//   mul    a, b -> y  y[i] = a[i] * b[i]
//   scale  x -> y     y[i] = alpha * x[i] + beta           attrs alpha, beta: f
//   copy   x -> y     y = x (any two host-addressable devices)
// Float32 only for now; shapes must match exactly (InvalidArgument naming the operand).
#ifndef SLUICE_OPS_HOST_KERNELS_H_
#define SLUICE_OPS_HOST_KERNELS_H_

#include "absl/status/status.h"
#include "ops/kernel_registry.h"

namespace sluice::ops {

absl::Status RegisterHostKernels(KernelRegistry* registry);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_HOST_KERNELS_H_
