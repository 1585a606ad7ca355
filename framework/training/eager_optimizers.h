// Optimizers for eager training (framework/autograd/): each holds a list of leaf
// parameters that require gradients, and Step updates every parameter that has a gradient
// in place, through the same `sgd` / `adam` ops the static optimizers append, with
// recording off (autograd::NoGradGuard). ZeroGrad forgets the gradients, so the next
// backward pass starts from zero.
//
//   eager::Sgd sgd = eager::Sgd::Create(layer.parameters(), 0.01).value();
//   for (...) { loss = ...; autograd::Backward(loss); sgd.Step(); sgd.ZeroGrad(); }
//
// State (the learning rate per parameter dtype and device, Adam's moments and powers) is
// made at Create on each parameter's device. Thread-compatible; the parameters' handles
// are shared with the caller.
#ifndef SLUICE_FRAMEWORK_TRAINING_EAGER_OPTIMIZERS_H_
#define SLUICE_FRAMEWORK_TRAINING_EAGER_OPTIMIZERS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/builder/functional.h"
#include "framework/eager/tensor.h"

namespace sluice::eager {

// One in-place update of `param` by the `sgd` op (param -= lr * grad), `lr` a one-element
// tensor of the param's dtype. Errors as Context::CallInto's, naming the op.
absl::Status SgdStep(const Tensor& param, const Tensor& grad, const Tensor& lr);

// Adam's per-parameter state, updated in place with the parameter.
struct AdamState {
  Tensor moment1, moment2, beta1_pow, beta2_pow;
};
// One in-place update of `param` and `state` by the `adam` op.
absl::Status AdamStep(const Tensor& param, const Tensor& grad, const Tensor& lr,
                      const AdamState& state, double beta1 = 0.9, double beta2 = 0.999,
                      double epsilon = 1e-8);

class Sgd {
 public:
  // InvalidArgument for an empty list, an empty tensor, or a parameter that does not
  // require a gradient (naming its index).
  static absl::StatusOr<Sgd> Create(std::vector<Tensor> params, double learning_rate);
  // param -= learning_rate * grad, for each parameter with a gradient.
  absl::Status Step();
  void ZeroGrad();
  const std::vector<Tensor>& params() const { return params_; }

 private:
  Sgd() = default;
  std::vector<Tensor> params_;
  std::vector<Tensor> lr_;  // per parameter: a one-element tensor of its dtype and device
};

struct AdamOptions {
  double learning_rate = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

class Adam {
 public:
  // Errors as Sgd::Create.
  static absl::StatusOr<Adam> Create(std::vector<Tensor> params, AdamOptions options = {});
  absl::Status Step();
  void ZeroGrad();
  const std::vector<Tensor>& params() const { return params_; }

 private:
  Adam() = default;
  AdamOptions options_;
  std::vector<Tensor> params_;
  std::vector<Tensor> lr_;
  std::vector<AdamState> state_;  // moments at 0, powers at beta1 and beta2
};

}  // namespace sluice::eager

#endif  // SLUICE_FRAMEWORK_TRAINING_EAGER_OPTIMIZERS_H_
