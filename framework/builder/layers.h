// Layers of the static builder, shaped like paddle.nn layers: creating one declares its
// parameters in the current (main, startup) pair — persistable, trainable variables of the
// same name in both programs, with initializer ops in the startup program only — and
// calling it appends its forward ops to the main program.
//
// A layer object holds Var handles into the main program: it must not outlive that program.
// Value type (copyable; copies share the parameters); thread-compatible.
#ifndef SLUICE_FRAMEWORK_BUILDER_LAYERS_H_
#define SLUICE_FRAMEWORK_BUILDER_LAYERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "core/data_type.h"
#include "framework/builder/program.h"

namespace sluice::nn {

struct LinearOptions {
  DataType dtype = DataType::kF32;
  // Seed of the weight's uniform_random initializer. Unset: a fixed function of the
  // layer's name ("linear_0", ...), so a program built twice initializes identically and two
  // layers of one program still start from different weights.
  std::optional<int64_t> seed;
  // Prefix of the parameter names: "<name>_<n>.w" and "<name>_<n>.b".
  std::string name = "linear";
};

// y = x @ weight + bias, weight [in, out] initialized uniformly in
// ±sqrt(6 / (in + out)) (Glorot), bias [out] initialized to 0.
class Linear {
 public:
  // Inside a ProgramGuard (FailedPrecondition otherwise). InvalidArgument for non-positive
  // sizes or a non-float dtype.
  static absl::StatusOr<Linear> Create(int64_t in_features, int64_t out_features,
                                       LinearOptions options = {});

  // Appends matmul(x, weight) and add(.., bias) to x's program, which must be the program
  // the layer was created in (InvalidArgument otherwise); x is [..., in_features].
  absl::StatusOr<framework::Var> operator()(const framework::Var& x) const;

  // Handles into the main program.
  const framework::Var& weight() const { return weight_; }
  const framework::Var& bias() const { return bias_; }

 private:
  Linear(framework::Var weight, framework::Var bias)
      : weight_(std::move(weight)), bias_(std::move(bias)) {}

  framework::Var weight_;
  framework::Var bias_;
};

}  // namespace sluice::nn

#endif  // SLUICE_FRAMEWORK_BUILDER_LAYERS_H_
