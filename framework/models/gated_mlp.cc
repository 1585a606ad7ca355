#include "framework/models/gated_mlp.h"

#include <cmath>
#include <vector>

#include "core/status.h"
#include "framework/builder/functional.h"
#include "framework/builder/layers.h"
#include "framework/builder/losses.h"
#include "framework/optim/optimizer.h"

namespace sluice::framework {

absl::StatusOr<GatedMlp> BuildGatedMlp(const ops::OpRegistry* registry,
                                       const GatedMlpOptions& options) {
  GatedMlp model;
  model.main = std::make_unique<Program>(registry);
  model.startup = std::make_unique<Program>(registry);
  ProgramGuard guard(*model.main, *model.startup);
  SLUICE_ASSIGN_OR_RETURN(Var x, Data(model.x, Shape({options.batch, options.features})));
  SLUICE_ASSIGN_OR_RETURN(Var y, Data(model.y, Shape({options.batch, 1})));
  Value h_in = x;
  int64_t in = options.features;
  for (int layer = 0; layer < options.hidden_layers; ++layer) {
    SLUICE_ASSIGN_OR_RETURN(nn::Linear linear, nn::Linear::Create(in, options.hidden));
    SLUICE_ASSIGN_OR_RETURN(Var h, linear(h_in.var()));
    SLUICE_ASSIGN_OR_RETURN(Value t, fn::Tanh(h));
    SLUICE_ASSIGN_OR_RETURN(Value s, fn::Sigmoid(h));
    SLUICE_ASSIGN_OR_RETURN(Value ts, fn::Mul(t, s));
    SLUICE_ASSIGN_OR_RETURN(Value half, fn::Scale(h, 0.5));
    SLUICE_ASSIGN_OR_RETURN(Value g, fn::Add(ts, half));
    SLUICE_ASSIGN_OR_RETURN(h_in, fn::Relu(g));
    in = options.hidden;
  }
  SLUICE_ASSIGN_OR_RETURN(nn::Linear head, nn::Linear::Create(in, 1));
  SLUICE_ASSIGN_OR_RETURN(Var prediction, head(h_in.var()));
  SLUICE_ASSIGN_OR_RETURN(Var loss, nn::MseLoss(prediction, y));
  Adam adam(options.learning_rate);
  SLUICE_RETURN_IF_ERROR(adam.Minimize(loss).status());
  model.loss = loss.name();
  return model;
}

HostTensor GatedMlpInput(const GatedMlpOptions& options) {
  std::vector<float> x(static_cast<size_t>(options.batch * options.features));
  for (int64_t i = 0; i < options.batch; ++i) {
    for (int64_t j = 0; j < options.features; ++j) {
      x[static_cast<size_t>(i * options.features + j)] =
          std::sin(0.3f * static_cast<float>(i) + 0.7f * static_cast<float>(j));
    }
  }
  return HostTensor::FromVector(x, Shape({options.batch, options.features}));
}

HostTensor GatedMlpTarget(const GatedMlpOptions& options) {
  std::vector<float> y(static_cast<size_t>(options.batch));
  for (int64_t i = 0; i < options.batch; ++i) {
    y[static_cast<size_t>(i)] = std::cos(0.05f * static_cast<float>(i));
  }
  return HostTensor::FromVector(y, Shape({options.batch, 1}));
}

}  // namespace sluice::framework
