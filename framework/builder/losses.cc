#include "framework/builder/losses.h"

#include "core/status.h"

namespace sluice::nn {

using framework::Value;
using framework::Var;

absl::StatusOr<Value> MseLoss(const Value& input, const Value& label) {
  SLUICE_ASSIGN_OR_RETURN(Value diff, fn::Sub(input, label));
  SLUICE_ASSIGN_OR_RETURN(Value squared, fn::Square(diff));
  return fn::ReduceMean(squared);
}

absl::StatusOr<Var> MseLoss(const Var& input, const Var& label) {
  SLUICE_ASSIGN_OR_RETURN(Value loss, MseLoss(Value(input), Value(label)));
  return loss.var();
}

absl::StatusOr<Value> SoftmaxCrossEntropyLoss(const Value& logits, const Value& label) {
  SLUICE_ASSIGN_OR_RETURN(auto outputs, fn::SoftmaxWithCrossEntropy(logits, label));
  return fn::ReduceMean(outputs.second);
}

absl::StatusOr<Var> SoftmaxCrossEntropyLoss(const Var& logits, const Var& label) {
  SLUICE_ASSIGN_OR_RETURN(Value loss, SoftmaxCrossEntropyLoss(Value(logits), Value(label)));
  return loss.var();
}

}  // namespace sluice::nn
