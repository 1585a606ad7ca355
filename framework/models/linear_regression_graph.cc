#include "framework/models/linear_regression_graph.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/losses.h"
#include "framework/optim/optimizer.h"

namespace sluice::framework {

graph::GraphFunction LinearRegressionStep(eager::Tensor weight, eager::Tensor bias,
                                          double learning_rate) {
  return [weight = std::move(weight), bias = std::move(bias), learning_rate](
             graph::Trace& trace,
             const std::vector<Value>& inputs) -> absl::StatusOr<std::vector<Value>> {
    if (inputs.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("the linear regression step takes (x, y); got ", inputs.size(), " inputs"));
    }
    SLUICE_ASSIGN_OR_RETURN(Var w, trace.Param(weight));
    SLUICE_ASSIGN_OR_RETURN(Var b, trace.Param(bias));
    SLUICE_ASSIGN_OR_RETURN(Value product, fn::Matmul(inputs[0], w));
    SLUICE_ASSIGN_OR_RETURN(Value prediction, fn::Add(product, b));
    SLUICE_ASSIGN_OR_RETURN(Value loss, nn::MseLoss(prediction, inputs[1]));
    Adam adam(learning_rate);
    SLUICE_RETURN_IF_ERROR(adam.Minimize(loss.var()).status());
    return std::vector<Value>{loss};
  };
}

}  // namespace sluice::framework
