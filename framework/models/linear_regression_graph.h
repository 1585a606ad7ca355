// The demo model's training step (linear_regression.h) as a graph function
// (framework/graph): Linear(16 -> 1) over eager parameters bound with Trace::Param,
// MSELoss, and static Adam appended inside the trace, so each call of the graph is one
// training step that updates the eager parameters in place. `sluice demo --graph`, the
// graph benchmarks and tests train with it; from the static startup program's initial
// values it gives the static demo's losses.
#ifndef SLUICE_FRAMEWORK_MODELS_LINEAR_REGRESSION_GRAPH_H_
#define SLUICE_FRAMEWORK_MODELS_LINEAR_REGRESSION_GRAPH_H_

#include "framework/eager/tensor.h"
#include "framework/graph/graph.h"

namespace sluice::framework {

// Inputs (x [N, 16], y [N, 1]); one output, the loss. `weight` [16, 1] and `bias` [1] are
// the eager parameters the step reads and updates.
graph::GraphFunction LinearRegressionStep(eager::Tensor weight, eager::Tensor bias,
                                          double learning_rate = 0.01);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_MODELS_LINEAR_REGRESSION_GRAPH_H_
