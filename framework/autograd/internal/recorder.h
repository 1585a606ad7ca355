// Recorder: eager autograd's GradRecorder (framework/eager/internal/grad_hook.h). After an
// op whose input requires a gradient, it builds the op's Node (node.h): the compiled grad
// plan, an edge per input toward its producer or leaf, the forward tensors the plan reads
// (with their versions), and an AutogradMeta on each float output. An output the plan
// reads is handed to the caller as an alias, so the node can keep the storage without a
// cycle (node.h). Nothing is recorded under NoGradGuard.
//
// Thread-safe (the plan cache locks; the rest touches only the call's tensors).
#ifndef SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_RECORDER_H_
#define SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_RECORDER_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "framework/autograd/internal/grad_plan.h"
#include "framework/autograd/internal/node.h"
#include "framework/eager/internal/grad_hook.h"
#include "ops/op_registry.h"

namespace sluice::autograd::internal {

class Recorder final : public eager::internal::GradRecorder {
 public:
  explicit Recorder(const ops::OpRegistry* registry) : plans_(registry) {}

  absl::Status Record(absl::string_view op, const vm::AttrMap& attrs,
                      absl::Span<eager::internal::TensorState* const> inputs,
                      absl::Span<const int> input_slots,
                      absl::Span<eager::internal::TensorState*> outputs,
                      absl::Span<const int> output_slots) override;
  absl::Status CheckInPlace(absl::string_view op,
                            absl::Span<eager::internal::TensorState* const> inputs,
                            absl::Span<eager::internal::TensorState* const> outputs) override;

 private:
  GradPlanCache plans_;
};

// The meta of `state` when it requires a gradient, else null.
AutogradMeta* MetaOf(const eager::internal::TensorState* state);

// Makes sure `state`'s context has a recorder installed.
void EnsureRecorder(eager::internal::TensorState* state);

}  // namespace sluice::autograd::internal

#endif  // SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_RECORDER_H_
