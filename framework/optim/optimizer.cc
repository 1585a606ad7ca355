#include "framework/optim/optimizer.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autodiff/backward.h"
#include "framework/builder/persistable.h"

namespace sluice::framework {

absl::StatusOr<std::vector<std::pair<Var, Var>>> Optimizer::Minimize(
    const Var& loss, const absl::flat_hash_set<std::string>& no_grad_set) {
  Program* main = CurrentMainProgram();
  Program* startup = CurrentStartupProgram();
  if (main == nullptr || startup == nullptr) {
    return absl::FailedPreconditionError(
        "Minimize: no current programs (call it inside a ProgramGuard)");
  }
  if (main->current_block() != 0) {
    return absl::FailedPreconditionError(
        "Minimize: called while a cond branch or loop body is being built");
  }
  // A failed call leaves both programs as they were.
  ir::ProgramDesc main_before = main->desc();
  ir::ProgramDesc startup_before = startup->desc();
  absl::StatusOr<std::vector<std::pair<Var, Var>>> result =
      Append(*main, *startup, loss, no_grad_set);
  if (!result.ok()) {
    main->mutable_desc() = std::move(main_before);
    startup->mutable_desc() = std::move(startup_before);
  }
  return result;
}

absl::StatusOr<std::vector<std::pair<Var, Var>>> Optimizer::Append(
    Program& main, Program& startup, const Var& loss,
    const absl::flat_hash_set<std::string>& no_grad_set) {
  if (loss.program() != &main) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Minimize: loss '", loss.name(), "' is not a variable of the current main program"));
  }
  using ParamGrads = std::vector<std::pair<Var, Var>>;
  SLUICE_ASSIGN_OR_RETURN(ParamGrads params_grads, AppendBackward(loss, no_grad_set));

  // One learning-rate variable per parameter dtype (the update ops take lr in param's).
  absl::flat_hash_map<DataType, Var> rates;
  for (const auto& [param, grad] : params_grads) {
    const DataType dtype = param.dtype();
    auto it = rates.find(dtype);
    if (it == rates.end()) {
      PersistableVar lr;
      lr.name = UniqueNameInBoth(main, startup, "learning_rate");
      lr.shape = Shape({1});
      lr.dtype = dtype;
      SLUICE_ASSIGN_OR_RETURN(Var var,
                              CreatePersistable(main, startup, lr, "fill_constant",
                                                vm::AttrMap().Set("value", learning_rate_)));
      it = rates.emplace(dtype, std::move(var)).first;
    }
    SLUICE_RETURN_IF_ERROR(AppendUpdate(main, startup, param, grad, it->second));
  }
  return params_grads;
}

absl::StatusOr<Var> Optimizer::CreateAccumulator(Program& main, Program& startup, const Var& param,
                                                 absl::string_view what, const Shape& shape,
                                                 double value) {
  PersistableVar var;
  var.name = UniqueNameInBoth(main, startup, absl::StrCat(param.name(), "_", what));
  var.shape = shape;
  var.dtype = param.dtype();
  return CreatePersistable(main, startup, var, "fill_constant", vm::AttrMap().Set("value", value));
}

absl::Status Sgd::AppendUpdate(Program& main, Program&, const Var& param, const Var& grad,
                               const Var& lr) {
  return AppendOpInto(main, "sgd", {{param}, {grad}, {lr}}, {{param}});
}

absl::Status Adam::AppendUpdate(Program& main, Program& startup, const Var& param, const Var& grad,
                                const Var& lr) {
  const Shape shape = param.shape();
  SLUICE_ASSIGN_OR_RETURN(Var m1, CreateAccumulator(main, startup, param, "moment1", shape, 0.0));
  SLUICE_ASSIGN_OR_RETURN(Var m2, CreateAccumulator(main, startup, param, "moment2", shape, 0.0));
  SLUICE_ASSIGN_OR_RETURN(Var b1p,
                          CreateAccumulator(main, startup, param, "beta1_pow", Shape({1}), beta1_));
  SLUICE_ASSIGN_OR_RETURN(Var b2p,
                          CreateAccumulator(main, startup, param, "beta2_pow", Shape({1}), beta2_));
  return AppendOpInto(
      main, "adam", {{param}, {grad}, {lr}, {m1}, {m2}, {b1p}, {b2p}},
      {{param}, {m1}, {m2}, {b1p}, {b2p}},
      vm::AttrMap().Set("beta1", beta1_).Set("beta2", beta2_).Set("epsilon", epsilon_));
}

}  // namespace sluice::framework
