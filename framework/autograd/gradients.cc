#include "framework/autograd/gradients.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autodiff/backward.h"
#include "framework/autograd/autograd.h"

namespace sluice::fn {

using framework::Value;
using framework::Var;

absl::StatusOr<std::vector<Value>> Gradients(const Value& loss, const std::vector<Value>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].is_static() != loss.is_static()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gradients: param ", i, " is ",
                       params[i].is_static() ? "a static var" : "an eager tensor",
                       " but the loss is ", loss.is_static() ? "a static var" : "an eager tensor"));
    }
  }
  std::vector<Value> grads;
  if (!loss.is_static()) {
    std::vector<eager::Tensor> inputs;
    for (const Value& p : params) inputs.push_back(p.tensor());
    SLUICE_ASSIGN_OR_RETURN(std::vector<eager::Tensor> tensors,
                            autograd::Grad({loss.tensor()}, inputs));
    for (eager::Tensor& t : tensors) grads.emplace_back(std::move(t));
    return grads;
  }
  using Pairs = std::vector<std::pair<Var, Var>>;
  SLUICE_ASSIGN_OR_RETURN(Pairs pairs, framework::AppendBackward(loss.var()));
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].var().name();
    bool found = false;
    for (const auto& [param, grad] : pairs) {
      if (param.name() == name) {
        grads.emplace_back(grad);
        found = true;
        break;
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Gradients: param ", i, " ('", name,
          "') is not a parameter the loss depends on (no gradient was appended for it)"));
    }
  }
  return grads;
}

}  // namespace sluice::fn
