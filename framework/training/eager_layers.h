// Layers for eager training, shaped like the static builder's (framework/builder/layers.h):
// a layer owns leaf parameter tensors that require gradients (autograd::SetRequiresGrad),
// and calling it runs its ops eagerly, recording them for autograd::Backward.
//
// Value type (copies share the parameters); thread-compatible.
#ifndef SLUICE_FRAMEWORK_TRAINING_EAGER_LAYERS_H_
#define SLUICE_FRAMEWORK_TRAINING_EAGER_LAYERS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data_type.h"
#include "core/device.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"

namespace sluice::eager::nn {

struct LinearOptions {
  DataType dtype = DataType::kF32;
  std::optional<Device> device;  // unset: the context's default device
  std::optional<int64_t> seed;   // of the weight's initializer; unset: the context's next
  bool bias = true;
};

// y = x @ weight (+ bias), weight [in, out] uniform in ±sqrt(6 / (in + out)) (Glorot, as
// the static nn::Linear), bias [out] zeros.
class Linear {
 public:
  // InvalidArgument for non-positive sizes or a non-float dtype.
  static absl::StatusOr<Linear> Create(Context& ctx, int64_t in_features, int64_t out_features,
                                       LinearOptions options = {});
  // Creates the layer over given parameters (weight [in, out], bias [out] or empty), made
  // leaves that require gradients here (SetRequiresGrad; a tensor computed by recorded ops
  // is refused): to train from known initial values.
  static absl::StatusOr<Linear> FromParameters(Tensor weight, Tensor bias);

  // x is [..., in_features].
  absl::StatusOr<Tensor> operator()(const Tensor& x) const;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // empty without a bias
  std::vector<Tensor> parameters() const;

 private:
  Linear(Tensor weight, Tensor bias) : weight_(std::move(weight)), bias_(std::move(bias)) {}
  Tensor weight_;
  Tensor bias_;
};

}  // namespace sluice::eager::nn

#endif  // SLUICE_FRAMEWORK_TRAINING_EAGER_LAYERS_H_
