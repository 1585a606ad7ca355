// Optimizers for static programs: Minimize(loss) appends the backward
// pass (AppendBackward) and one in-place update op per parameter to the current main
// program, and declares the optimizer's state — the learning rate and per-parameter
// accumulators — as persistable variables of both programs with their initializers in the
// startup program, so that running startup once and main every step trains the model.
//
//   Sgd   sgd(Param, Grad, LearningRate) -> ParamOut = Param
//   Adam  adam(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow)
//           -> ParamOut, Moment1Out, Moment2Out, Beta1PowOut, Beta2PowOut (the same vars);
//         moments start at 0, Beta1Pow/Beta2Pow at beta1/beta2 (the kernel reads them as
//         beta^t of the step being taken).
//
// Variables: "learning_rate_<n>" [1] (one per parameter dtype), "<param>_moment1_<n>",
// "<param>_moment2_<n>", "<param>_beta1_pow_<n>", "<param>_beta2_pow_<n>".
// Optimizer objects hold only hyperparameters: one may minimize several losses. Value
// types; thread-compatible (Minimize mutates the current programs).
#ifndef SLUICE_FRAMEWORK_OPTIM_OPTIMIZER_H_
#define SLUICE_FRAMEWORK_OPTIM_OPTIMIZER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "core/data_type.h"
#include "framework/builder/program.h"

namespace sluice::framework {

// The part every optimizer shares: checks, backward, the learning-rate variable, and a
// per-parameter hook for the update.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Inside a ProgramGuard whose main program is the loss's (FailedPrecondition outside one,
  // InvalidArgument for a loss of another program). Returns AppendBackward's (parameter,
  // gradient) pairs, each now updated by one op; AppendBackward's errors unchanged. A
  // failed call leaves both programs as they were.
  absl::StatusOr<std::vector<std::pair<Var, Var>>> Minimize(
      const Var& loss, const absl::flat_hash_set<std::string>& no_grad_set = {});

  double learning_rate() const { return learning_rate_; }

 protected:
  explicit Optimizer(double learning_rate) : learning_rate_(learning_rate) {}

  // Appends the update of `param` by `grad` to main (`lr` has param's dtype), declaring any
  // state it needs in main and startup.
  virtual absl::Status AppendUpdate(Program& main, Program& startup, const Var& param,
                                    const Var& grad, const Var& lr) = 0;

  // A persistable accumulator "<param>_<what>_<n>" of `shape` and param's dtype, in main
  // and startup, filled with `value` by the startup program; the main program's handle.
  static absl::StatusOr<Var> CreateAccumulator(Program& main, Program& startup, const Var& param,
                                               absl::string_view what, const Shape& shape,
                                               double value);

 private:
  // Minimize's work on the current programs, which it restores when this fails.
  absl::StatusOr<std::vector<std::pair<Var, Var>>> Append(
      Program& main, Program& startup, const Var& loss,
      const absl::flat_hash_set<std::string>& no_grad_set);

  double learning_rate_;
};

// Plain gradient descent: param -= lr * grad.
class Sgd final : public Optimizer {
 public:
  explicit Sgd(double learning_rate) : Optimizer(learning_rate) {}

 private:
  absl::Status AppendUpdate(Program& main, Program& startup, const Var& param, const Var& grad,
                            const Var& lr) override;
};

// Adam with bias correction (the adam op's update; ops/shape_and_optimizer_ops.cc).
class Adam final : public Optimizer {
 public:
  explicit Adam(double learning_rate, double beta1 = 0.9, double beta2 = 0.999,
                double epsilon = 1e-8)
      : Optimizer(learning_rate), beta1_(beta1), beta2_(beta2), epsilon_(epsilon) {}

 private:
  absl::Status AppendUpdate(Program& main, Program& startup, const Var& param, const Var& grad,
                            const Var& lr) override;

  double beta1_;
  double beta2_;
  double epsilon_;
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_OPTIM_OPTIMIZER_H_
