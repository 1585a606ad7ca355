// AxisLayout: how a whole tensor splits into parts along one axis, checked — what concat,
// split and their grads compute on every device (the host kernels copy the chunks with
// memcpy, the cuda kernels with 2-D async copies).
#ifndef SLUICE_OPS_INTERNAL_AXIS_LAYOUT_H_
#define SLUICE_OPS_INTERNAL_AXIS_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ops/cpu/host_kernel.h"

namespace sluice::ops::internal {

// `outer` rows, each holding one chunk of every part in turn (bytes).
struct AxisLayout {
  int64_t outer = 1;
  absl::InlinedVector<size_t, 4> chunks;
  size_t row = 0;  // the sum of the chunks
};

// Checks that `parts` concatenate along `axis` (the attribute, may be negative) to `whole`:
// same dtype and rank, equal dims off the axis, sizes along it adding up. InvalidArgument
// naming `op`, the operand and its role otherwise.
absl::StatusOr<AxisLayout> LayoutAlong(absl::string_view op, int64_t axis, const HostTensor& whole,
                                       absl::string_view whole_role,
                                       absl::Span<const HostTensor> parts,
                                       absl::string_view part_role);

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_AXIS_LAYOUT_H_
