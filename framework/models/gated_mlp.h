// A gated MLP trained with Adam: a static program with many elementwise ops in its forward
// and backward parts, for the subgraph compiler's tests and benchmarks (with compilation on
// and off the losses must be equal; BM_Compiled_GatedMlpStep). Per hidden layer:
//   h = x @ W + b;  g = tanh(h) * sigmoid(h) + h * 0.5;  x' = relu(g)
// then a linear output and an MSE loss.
#ifndef SLUICE_FRAMEWORK_MODELS_GATED_MLP_H_
#define SLUICE_FRAMEWORK_MODELS_GATED_MLP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "framework/builder/program.h"
#include "framework/interpreter/host_tensor.h"
#include "ops/op_registry.h"

namespace sluice::framework {

struct GatedMlpOptions {
  int64_t batch = 64;
  int64_t features = 32;
  int64_t hidden = 64;
  int hidden_layers = 2;
  double learning_rate = 0.01;
};

struct GatedMlp {
  std::unique_ptr<Program> main;
  std::unique_ptr<Program> startup;
  std::string x = "x";
  std::string y = "y";
  std::string loss;
};

// `registry` must outlive the programs.
absl::StatusOr<GatedMlp> BuildGatedMlp(const ops::OpRegistry* registry,
                                       const GatedMlpOptions& options = {});

// A fixed batch for `options`: x[i][j] = sin(0.3 i + 0.7 j), y[i] = cos(0.05 i).
HostTensor GatedMlpInput(const GatedMlpOptions& options);
HostTensor GatedMlpTarget(const GatedMlpOptions& options);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_MODELS_GATED_MLP_H_
