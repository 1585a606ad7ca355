#include "framework/autodiff/backward.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autodiff/internal/grad_planner.h"

namespace sluice::framework {

absl::StatusOr<std::vector<std::pair<Var, Var>>> AppendBackward(
    const Var& loss, const absl::flat_hash_set<std::string>& no_grad_set) {
  if (!loss.valid()) return absl::InvalidArgumentError("AppendBackward: an empty loss Var");
  Program& program = *loss.program();
  if (program.current_block() != 0) {
    return absl::FailedPreconditionError(
        "AppendBackward: called while a cond branch or loop body is being built");
  }
  const ir::VarDesc* var = program.desc().global_block().FindVar(loss.name());
  if (var == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("AppendBackward: loss '", loss.name(),
                                                   "' is not a variable of its program's "
                                                   "global block"));
  }
  if (var->shape.NumElements() != 1 || !IsFloating(var->dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AppendBackward: loss '", loss.name(), "' is ", DataTypeName(var->dtype),
                     var->shape.ToString(), "; it must be a one-element f32 or f64 variable"));
  }
  // Restore the program on any error, so that a failed call changes nothing.
  ir::ProgramDesc before = program.desc();
  autodiff_internal::GradPlanner::Config config;
  config.program = &program;
  config.no_grad_set = &no_grad_set;
  autodiff_internal::GradPlanner planner(std::move(config));
  auto run = [&]() -> absl::StatusOr<std::vector<std::pair<Var, Var>>> {
    SLUICE_ASSIGN_OR_RETURN(const bool needed, planner.PlanFromLoss(loss.name()));
    if (!needed) return std::vector<std::pair<Var, Var>>{};
    SLUICE_RETURN_IF_ERROR(planner.Append());
    std::vector<std::pair<Var, Var>> params;
    for (const ir::VarDesc& v : program.desc().global_block().vars()) {
      if (v.is_parameter && planner.NeedsGrad(v.name) && planner.HasGrad(v.name)) {
        params.emplace_back(Var(&program, v.name), Var(&program, planner.GradVar(v.name)));
      }
    }
    return params;
  };
  absl::StatusOr<std::vector<std::pair<Var, Var>>> result = run();
  if (!result.ok()) {
    // A control-flow gradient may have failed inside one of its new blocks.
    while (program.current_block() != 0) program.LeaveBlock();
    program.mutable_desc() = std::move(before);
  }
  return result;
}

}  // namespace sluice::framework
