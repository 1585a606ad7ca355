#include "framework/models/linear_regression.h"

#include <cmath>
#include <vector>

#include "core/status.h"
#include "framework/builder/layers.h"
#include "framework/builder/losses.h"
#include "framework/optim/optimizer.h"

namespace sluice::framework {

absl::StatusOr<LinearRegression> BuildLinearRegression(const ops::OpRegistry* registry,
                                                       LinearRegressionOptions options) {
  LinearRegression model;
  model.main = std::make_unique<Program>(registry);
  model.startup = std::make_unique<Program>(registry);
  ProgramGuard guard(*model.main, *model.startup);
  SLUICE_ASSIGN_OR_RETURN(Var x, Data(model.x, Shape({16, 16})));
  SLUICE_ASSIGN_OR_RETURN(Var y, Data(model.y, Shape({16, 1})));
  nn::LinearOptions linear_options;
  linear_options.seed = options.seed;
  SLUICE_ASSIGN_OR_RETURN(nn::Linear linear, nn::Linear::Create(16, 1, linear_options));
  SLUICE_ASSIGN_OR_RETURN(Var prediction, linear(x));
  SLUICE_ASSIGN_OR_RETURN(Var loss, nn::MseLoss(prediction, y));
  Adam adam(options.learning_rate);
  SLUICE_RETURN_IF_ERROR(adam.Minimize(loss).status());
  model.loss = loss.name();
  model.weight = linear.weight().name();
  model.bias = linear.bias().name();
  return model;
}

HostTensor LinearRegressionInput() {
  std::vector<float> x(16 * 16);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) x[i * 16 + j] = std::sin(0.37f * i + 0.11f * j);
  }
  return HostTensor::FromVector(x, Shape({16, 16}));
}

HostTensor LinearRegressionTarget() {
  const std::vector<float> x = LinearRegressionInput().ToVector<float>();
  std::vector<float> y(16);
  for (int i = 0; i < 16; ++i) {
    float sum = 0.5f;
    for (int j = 0; j < 16; ++j) sum += x[i * 16 + j] * 0.1f * (j - 7.5f);
    y[i] = sum;
  }
  return HostTensor::FromVector(y, Shape({16, 1}));
}

}  // namespace sluice::framework
