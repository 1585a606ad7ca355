#include "framework/autograd/internal/recorder.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/autograd/internal/grad_mode.h"
#include "framework/eager/internal/context_state.h"
#include "framework/eager/internal/tensor_access.h"
#include "framework/eager/stream_scope.h"

namespace sluice::autograd::internal {

using eager::internal::TensorAccess;
using eager::internal::TensorState;

AutogradMeta* MetaOf(const TensorState* state) {
  return state->requires_grad() ? static_cast<AutogradMeta*>(state->grad_meta()) : nullptr;
}

void EnsureRecorder(TensorState* state) {
  eager::internal::ContextState* ctx = state->context();
  if (ctx->grad_recorder.load(std::memory_order_acquire) != nullptr) return;
  ctx->InstallGradRecorder(std::make_unique<Recorder>(&ctx->registry));
}

absl::Status Recorder::Record(absl::string_view op, const vm::AttrMap& attrs,
                              absl::Span<TensorState* const> inputs,
                              absl::Span<const int> input_slots, absl::Span<TensorState*> outputs,
                              absl::Span<const int> output_slots) {
  if (!Recording()) return absl::OkStatus();
  auto node = std::make_shared<Node>();
  node->plan = plans_.Get(op, attrs, input_slots, output_slots);
  if (const StreamKey* stream = eager::StreamScope::Current()) node->stream = *stream;
  node->next.resize(inputs.size());
  node->saved_inputs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (const AutogradMeta* meta = MetaOf(inputs[i]); meta != nullptr) {
      Edge& edge = node->next[i];
      if (meta->grad_fn != nullptr) {
        edge.node = meta->grad_fn;
        edge.output = meta->output;
      } else {
        edge.leaf = meta->grad;
      }
    }
    if (node->plan->reads_input[i]) {
      node->saved_inputs[i] = {TensorAccess::Share(inputs[i]), inputs[i]->version()};
    }
  }
  node->outputs.resize(outputs.size());
  node->saved_outputs.resize(outputs.size());
  node->retained.resize(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    TensorState* out = outputs[k];
    const vm::Blob& blob = *out->blob();
    node->outputs[k] = {blob.dtype(), blob.shape(), blob.device()};
    if (!IsFloating(blob.dtype())) continue;  // no gradient flows through integers
    if (node->plan->reads_output[k]) {
      // The node keeps the owner (no meta); the caller gets an alias carrying the meta.
      node->saved_outputs[k] = {TensorAccess::Share(out), out->version()};
      TensorState* alias = TensorState::NewAlias(out);
      outputs[k] = alias;
      out = alias;
    }
    auto meta = std::make_unique<AutogradMeta>();
    meta->grad_fn = node;
    meta->output = static_cast<int>(k);
    if (!out->InstallGradMeta(meta.get())) {
      return absl::InternalError(absl::StrCat("op '", op, "': a new output already has a meta"));
    }
    meta.release();  // the state owns it now
  }
  return absl::OkStatus();
}

absl::Status Recorder::CheckInPlace(absl::string_view op, absl::Span<TensorState* const> inputs,
                                    absl::Span<TensorState* const> outputs) {
  if (!Recording()) return absl::OkStatus();
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k]->requires_grad()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "op '", op, "' writes in place and reads input ", k,
          ", a tensor that requires a gradient, while gradients are being recorded: the "
          "in-place call is not recorded, so that gradient would be lost; use the "
          "out-of-place op, or update under autograd::NoGradGuard"));
    }
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k]->requires_grad()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "op '", op, "' writes in place into output ", k,
          ", a tensor that requires a gradient, while gradients are being recorded; update "
          "parameters under autograd::NoGradGuard"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::autograd::internal
