#include "framework/training/eager_optimizers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autograd/autograd.h"
#include "framework/eager/context.h"

namespace sluice::eager {
namespace {

absl::Status CheckParams(const std::vector<Tensor>& params, absl::string_view who) {
  if (params.empty()) return absl::InvalidArgumentError(absl::StrCat(who, ": no parameters"));
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].valid()) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": parameter ", i, " is empty"));
    }
    if (!autograd::RequiresGrad(params[i]) || !autograd::IsLeaf(params[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": parameter ", i,
                       " is not a leaf that requires a gradient (autograd::SetRequiresGrad)"));
    }
  }
  return absl::OkStatus();
}

// A one-element tensor of `like`'s dtype on its device holding `value`.
absl::StatusOr<Tensor> ScalarLike(const Tensor& like, double value) {
  Context ctx = like.context();
  return fn::FillConstant(ctx, Shape({1}), value, like.dtype(), like.device());
}

}  // namespace

absl::Status SgdStep(const Tensor& param, const Tensor& grad, const Tensor& lr) {
  if (!param.valid()) return absl::InvalidArgumentError("op 'sgd': empty Tensor");
  Context ctx = param.context();
  return ctx.CallInto("sgd", {{param}, {grad}, {lr}}, {{param}});
}

absl::Status AdamStep(const Tensor& param, const Tensor& grad, const Tensor& lr,
                      const AdamState& state, double beta1, double beta2, double epsilon) {
  if (!param.valid()) return absl::InvalidArgumentError("op 'adam': empty Tensor");
  Context ctx = param.context();
  return ctx.CallInto(
      "adam",
      {{param},
       {grad},
       {lr},
       {state.moment1},
       {state.moment2},
       {state.beta1_pow},
       {state.beta2_pow}},
      {{param}, {state.moment1}, {state.moment2}, {state.beta1_pow}, {state.beta2_pow}},
      vm::AttrMap().Set("beta1", beta1).Set("beta2", beta2).Set("epsilon", epsilon));
}

absl::StatusOr<Sgd> Sgd::Create(std::vector<Tensor> params, double learning_rate) {
  SLUICE_RETURN_IF_ERROR(CheckParams(params, "Sgd"));
  Sgd sgd;
  for (const Tensor& p : params) {
    SLUICE_ASSIGN_OR_RETURN(Tensor lr, ScalarLike(p, learning_rate));
    sgd.lr_.push_back(std::move(lr));
  }
  sgd.params_ = std::move(params);
  return sgd;
}

absl::Status Sgd::Step() {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor grad = autograd::GradOf(params_[i]);
    if (grad.valid()) SLUICE_RETURN_IF_ERROR(SgdStep(params_[i], grad, lr_[i]));
  }
  return absl::OkStatus();
}

void Sgd::ZeroGrad() {
  for (const Tensor& p : params_) autograd::ZeroGrad(p);
}

absl::StatusOr<Adam> Adam::Create(std::vector<Tensor> params, AdamOptions options) {
  SLUICE_RETURN_IF_ERROR(CheckParams(params, "Adam"));
  Adam adam;
  adam.options_ = options;
  for (const Tensor& p : params) {
    SLUICE_ASSIGN_OR_RETURN(Tensor lr, ScalarLike(p, options.learning_rate));
    adam.lr_.push_back(std::move(lr));
    Context ctx = p.context();
    AdamState state;
    SLUICE_ASSIGN_OR_RETURN(state.moment1,
                            fn::FillConstant(ctx, p.shape(), 0.0, p.dtype(), p.device()));
    SLUICE_ASSIGN_OR_RETURN(state.moment2,
                            fn::FillConstant(ctx, p.shape(), 0.0, p.dtype(), p.device()));
    SLUICE_ASSIGN_OR_RETURN(state.beta1_pow, ScalarLike(p, options.beta1));
    SLUICE_ASSIGN_OR_RETURN(state.beta2_pow, ScalarLike(p, options.beta2));
    adam.state_.push_back(std::move(state));
  }
  adam.params_ = std::move(params);
  return adam;
}

absl::Status Adam::Step() {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor grad = autograd::GradOf(params_[i]);
    if (!grad.valid()) continue;
    SLUICE_RETURN_IF_ERROR(AdamStep(params_[i], grad, lr_[i], state_[i], options_.beta1,
                                    options_.beta2, options_.epsilon));
  }
  return absl::OkStatus();
}

void Adam::ZeroGrad() {
  for (const Tensor& p : params_) autograd::ZeroGrad(p);
}

}  // namespace sluice::eager
