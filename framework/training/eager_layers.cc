#include "framework/training/eager_layers.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"

namespace sluice::eager::nn {

absl::StatusOr<Linear> Linear::Create(Context& ctx, int64_t in_features, int64_t out_features,
                                      LinearOptions options) {
  if (in_features <= 0 || out_features <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Linear: sizes must be positive, got ", in_features, " x ", out_features));
  }
  if (!IsFloating(options.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Linear: dtype ", DataTypeName(options.dtype), " is not a float type"));
  }
  const double limit = std::sqrt(6.0 / static_cast<double>(in_features + out_features));
  SLUICE_ASSIGN_OR_RETURN(Tensor weight,
                          fn::UniformRandom(ctx, Shape({in_features, out_features}), -limit, limit,
                                            options.seed, options.dtype, options.device));
  Tensor bias;
  if (options.bias) {
    SLUICE_ASSIGN_OR_RETURN(
        bias, fn::FillConstant(ctx, Shape({out_features}), 0.0, options.dtype, options.device));
  }
  return FromParameters(std::move(weight), std::move(bias));
}

absl::StatusOr<Linear> Linear::FromParameters(Tensor weight, Tensor bias) {
  if (!weight.valid() || weight.shape().rank() != 2) {
    return absl::InvalidArgumentError("Linear: the weight must be a matrix [in, out]");
  }
  if (bias.valid() && (bias.shape().rank() != 1 || bias.shape().dim(0) != weight.shape().dim(1))) {
    return absl::InvalidArgumentError(absl::StrCat("Linear: the bias ", bias.shape().ToString(),
                                                   " does not match the weight ",
                                                   weight.shape().ToString()));
  }
  if (!autograd::IsLeaf(weight) || (bias.valid() && !autograd::IsLeaf(bias))) {
    return absl::InvalidArgumentError(
        "Linear: parameters must be leaves (not computed by recorded ops); use autograd::Detach");
  }
  SLUICE_RETURN_IF_ERROR(autograd::SetRequiresGrad(weight));
  if (bias.valid()) SLUICE_RETURN_IF_ERROR(autograd::SetRequiresGrad(bias));
  return Linear(std::move(weight), std::move(bias));
}

absl::StatusOr<Tensor> Linear::operator()(const Tensor& x) const {
  SLUICE_ASSIGN_OR_RETURN(Tensor y, fn::Matmul(x, weight_));
  if (!bias_.valid()) return y;
  return fn::Add(y, bias_);
}

std::vector<Tensor> Linear::parameters() const {
  std::vector<Tensor> params = {weight_};
  if (bias_.valid()) params.push_back(bias_);
  return params;
}

}  // namespace sluice::eager::nn
