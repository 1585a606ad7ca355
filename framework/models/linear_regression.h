// The demo model: Linear(16 -> 1) + MSELoss, trained with Adam on a
// fixed 16x16 batch whose targets come from a known linear function. `sluice demo`, the
// executor benchmark and the end-to-end tests build it from here, so they run the same
// program; `examples/linear_regression/` holds it as files for `sluice run`.
#ifndef SLUICE_FRAMEWORK_MODELS_LINEAR_REGRESSION_H_
#define SLUICE_FRAMEWORK_MODELS_LINEAR_REGRESSION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "framework/builder/program.h"
#include "framework/interpreter/host_tensor.h"
#include "ops/op_registry.h"

namespace sluice::framework {

struct LinearRegression {
  std::unique_ptr<Program> main;
  std::unique_ptr<Program> startup;
  std::string x = "x";  // feed [16, 16] f32
  std::string y = "y";  // feed [16, 1] f32
  std::string loss;     // fetch, one element
  std::string weight;   // the Linear layer's parameters
  std::string bias;
};

struct LinearRegressionOptions {
  double learning_rate = 0.01;
  int64_t seed = 1;  // the weight initializer's seed
};

// `registry` must outlive the programs.
absl::StatusOr<LinearRegression> BuildLinearRegression(const ops::OpRegistry* registry,
                                                       LinearRegressionOptions options = {});

// The fixed batch: x[i][j] = sin(0.37 i + 0.11 j), y = x @ w_true + 0.5 with
// w_true[j] = 0.1 (j - 7.5). Deterministic.
HostTensor LinearRegressionInput();
HostTensor LinearRegressionTarget();

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_MODELS_LINEAR_REGRESSION_H_
