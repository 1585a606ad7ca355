// The sequential host reference of `sluice stress --control-flow`: evaluates a static
// Program's block 0 op by op, in program order, on plain float vectors — a cond runs its
// taken branch, a while its condition and body blocks, as framework/ir/control_flow.h
// defines them — with no streams, no VM and no op library. It knows only the op subset
// the control-flow generator (stress/stress_control_flow.h) uses:
//
//   fill_constant, add, sub, mul, max, min (equal shapes or a scalar operand), scale, relu,
//   less_than, less_equal, greater_than, greater_equal, logical_and, logical_or,
//   logical_not, increment, split (rank 1, sections), reshape, cond, while, yield
//
// Each element is computed with the float expression the host kernels use (x + y,
// x >= y ? x : y, s * x + b with s and b rounded to float, ...), in the same order, so a
// correct run fetches the reference's exact bytes: the comparison is bit for bit, with no
// tolerance. (tanh, exp and friends are left out for that reason: their f32 kernels are
// private polynomial approximations.) One assumption: scale's s * x + b is either
// contracted into a fused multiply-add in both places or in neither — true on the default
// x86-64 target, which has no FMA; a build for a target with FMA might break it.
//
// Free functions; thread-compatible.
#ifndef SLUICE_STRESS_STRESS_REFERENCE_H_
#define SLUICE_STRESS_STRESS_REFERENCE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/ir/program_desc.h"

namespace sluice::stress {

// Runs `program` on `feeds` (f32 or bool tensors) and returns the `fetches` (f32 or bool),
// in order. Errors: Unimplemented naming an op or dtype outside the subset;
// InvalidArgument naming the op for an operand without a value or shapes the subset does
// not broadcast; ResourceExhausted naming the loop when a while runs its body more than
// its max_iterations.
absl::StatusOr<std::vector<framework::HostTensor>> EvaluateReference(
    const framework::ir::ProgramDesc& program, const framework::Feeds& feeds,
    const std::vector<std::string>& fetches);

}  // namespace sluice::stress

#endif  // SLUICE_STRESS_STRESS_REFERENCE_H_
