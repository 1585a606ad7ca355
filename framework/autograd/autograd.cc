#include "framework/autograd/autograd.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autograd/internal/engine.h"
#include "framework/autograd/internal/grad_mode.h"
#include "framework/autograd/internal/node.h"
#include "framework/autograd/internal/recorder.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/eager/internal/context_state.h"
#include "framework/eager/internal/tensor_access.h"

namespace sluice::autograd {
namespace {

using eager::Tensor;
using eager::internal::TensorAccess;
using eager::internal::TensorState;
using internal::AutogradMeta;

// The meta of `t` whether or not it currently requires a gradient (null without one).
AutogradMeta* AnyMeta(const Tensor& t) {
  return static_cast<AutogradMeta*>(TensorAccess::State(t)->grad_meta());
}

// The seeds of `roots`: `grads[r]` checked against the root, or ones for a one-element
// root. `what` names the call in errors.
absl::StatusOr<std::vector<Tensor>> Seeds(const std::vector<Tensor>& roots,
                                          const std::vector<Tensor>& grads,
                                          absl::string_view what) {
  if (!grads.empty() && grads.size() != roots.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", grads.size(), " output gradients for ", roots.size(), " outputs"));
  }
  std::vector<Tensor> seeds;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    if (!root.valid())
      return absl::InvalidArgumentError(absl::StrCat(what, ": output ", r, " is an empty Tensor"));
    if (!IsFloating(root.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": output ", r, " is ",
                                                     DataTypeName(root.dtype()),
                                                     "; gradients are for float tensors"));
    }
    if (internal::MetaOf(TensorAccess::State(root)) == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": output ", r,
                       " does not require a gradient (no input of the ops that made "
                       "it requires one, or they ran under NoGradGuard)"));
    }
    const Tensor given = grads.empty() ? Tensor() : grads[r];
    if (given.valid()) {
      if (given.dtype() != root.dtype() || given.shape() != root.shape()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": the gradient of output ", r, " is ", DataTypeName(given.dtype()),
                         given.shape().ToString(), ", the output ", DataTypeName(root.dtype()),
                         root.shape().ToString()));
      }
      if (RequiresGrad(given)) {
        // A copy without history: the seed reaches the slots of the leaves, and a seed
        // carrying its own graph would tie that graph to them (a cycle: it would never be
        // freed). A detached alias would still hold the seed's state, and so its graph.
        NoGradGuard no_grad;
        SLUICE_ASSIGN_OR_RETURN(Tensor copy, fn::Assign(given));
        seeds.push_back(std::move(copy));
      } else {
        seeds.push_back(given);
      }
      continue;
    }
    if (root.num_elements() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": output ", r, " has shape ", root.shape().ToString(),
          "; a backward pass from a tensor of more than one element needs its gradient"));
    }
    eager::Context context = root.context();
    SLUICE_ASSIGN_OR_RETURN(
        Tensor ones, fn::FillConstant(context, root.shape(), 1.0, root.dtype(), root.device()));
    seeds.push_back(std::move(ones));
  }
  return seeds;
}

}  // namespace

absl::Status SetRequiresGrad(const Tensor& t, bool requires_grad) {
  if (!t.valid()) return absl::InvalidArgumentError("SetRequiresGrad: empty Tensor");
  TensorState* state = TensorAccess::State(t);
  AutogradMeta* meta = AnyMeta(t);
  if (meta != nullptr && meta->grad_fn != nullptr) {
    if (requires_grad) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "SetRequiresGrad: the tensor was computed by recorded ops (not a leaf); use Detach to "
        "get one without history");
  }
  if (requires_grad && !IsFloating(t.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("SetRequiresGrad: the tensor is ",
                                                   DataTypeName(t.dtype()),
                                                   "; only float tensors have gradients"));
  }
  if (meta == nullptr) {
    if (!requires_grad) return absl::OkStatus();
    auto fresh = std::make_unique<AutogradMeta>();
    fresh->grad = std::make_shared<internal::GradSlot>();
    if (state->InstallGradMeta(fresh.get())) fresh.release();
    meta = AnyMeta(t);
  }
  meta->requires_grad.store(requires_grad, std::memory_order_relaxed);
  internal::EnsureRecorder(state);
  return absl::OkStatus();
}

bool RequiresGrad(const Tensor& t) { return t.valid() && TensorAccess::State(t)->requires_grad(); }

bool IsLeaf(const Tensor& t) {
  const AutogradMeta* meta = t.valid() ? AnyMeta(t) : nullptr;
  return meta == nullptr || meta->grad_fn == nullptr;
}

namespace {

// `meta`'s gradient slot: a leaf's is set at SetRequiresGrad; a non-leaf's by RetainGrad,
// under its node's lock.
std::shared_ptr<internal::GradSlot> SlotOf(const AutogradMeta* meta) {
  if (meta == nullptr) return nullptr;
  if (meta->grad_fn == nullptr) return meta->grad;
  PlainMutexLock lock(&meta->grad_fn->mu);
  return meta->grad;
}

}  // namespace

Tensor GradOf(const Tensor& t) {
  const std::shared_ptr<internal::GradSlot> slot = SlotOf(t.valid() ? AnyMeta(t) : nullptr);
  if (slot == nullptr) return Tensor();
  PlainMutexLock lock(&slot->mu);
  return slot->grad;
}

void ZeroGrad(const Tensor& t) {
  const std::shared_ptr<internal::GradSlot> slot = SlotOf(t.valid() ? AnyMeta(t) : nullptr);
  if (slot == nullptr) return;
  PlainMutexLock lock(&slot->mu);
  slot->grad = Tensor();
}

absl::Status RetainGrad(const Tensor& t) {
  AutogradMeta* meta = t.valid() ? internal::MetaOf(TensorAccess::State(t)) : nullptr;
  if (meta == nullptr) {
    return absl::FailedPreconditionError("RetainGrad: the tensor does not require a gradient");
  }
  if (meta->grad_fn == nullptr) return absl::OkStatus();  // a leaf keeps its gradient anyway
  PlainMutexLock lock(&meta->grad_fn->mu);
  if (meta->grad == nullptr) meta->grad = std::make_shared<internal::GradSlot>();
  meta->grad_fn->retained[static_cast<size_t>(meta->output)] = meta->grad;
  return absl::OkStatus();
}

Tensor Detach(const Tensor& t) {
  if (!t.valid()) return Tensor();
  return TensorAccess::Adopt(TensorState::NewAlias(TensorAccess::State(t)));
}

absl::Status Backward(const Tensor& root, const Tensor& grad, BackwardOptions options) {
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<Tensor> seeds,
      Seeds({root}, grad.valid() ? std::vector<Tensor>{grad} : std::vector<Tensor>{}, "Backward"));
  return internal::RunBackward({root}, seeds, options.retain_graph, nullptr);
}

absl::StatusOr<std::vector<Tensor>> Grad(const std::vector<Tensor>& outputs,
                                         const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& output_grads,
                                         BackwardOptions options) {
  if (outputs.empty()) return absl::InvalidArgumentError("Grad: no outputs");
  SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> seeds, Seeds(outputs, output_grads, "Grad"));
  std::vector<internal::Capture> captures(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    AutogradMeta* meta =
        inputs[i].valid() ? internal::MetaOf(TensorAccess::State(inputs[i])) : nullptr;
    if (meta == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("Grad: input ", i, " does not require a gradient"));
    }
    if (meta->grad_fn == nullptr) {
      captures[i].leaf = meta->grad;
    } else {
      captures[i].node = meta->grad_fn.get();
      captures[i].output = meta->output;
    }
  }
  SLUICE_RETURN_IF_ERROR(internal::RunBackward(outputs, seeds, options.retain_graph, &captures));
  std::vector<Tensor> grads;
  for (size_t i = 0; i < captures.size(); ++i) {
    if (!captures[i].grad.valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Grad: input ", i, " does not reach the outputs"));
    }
    grads.push_back(std::move(captures[i].grad));
  }
  return grads;
}

NoGradGuard::NoGradGuard() { ++internal::no_grad_depth; }
NoGradGuard::~NoGradGuard() { --internal::no_grad_depth; }

}  // namespace sluice::autograd
