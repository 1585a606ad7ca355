#include "framework/builder/layers.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/persistable.h"

namespace sluice::nn {

using framework::Program;
using framework::Var;

absl::StatusOr<Linear> Linear::Create(int64_t in_features, int64_t out_features,
                                      LinearOptions options) {
  Program* main = framework::CurrentMainProgram();
  Program* startup = framework::CurrentStartupProgram();
  if (main == nullptr || startup == nullptr) {
    return absl::FailedPreconditionError(
        "Linear::Create: no current programs (create layers inside a ProgramGuard)");
  }
  if (in_features <= 0 || out_features <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("Linear::Create: sizes must be positive, got ",
                                                   in_features, " -> ", out_features));
  }
  if (!IsFloating(options.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Linear::Create: dtype ", DataTypeName(options.dtype), " is not f32 or f64"));
  }
  const std::string base = framework::UniqueNameInBoth(*main, *startup, options.name, {".w", ".b"});
  // absl::Hash is not stable across builds; a fixed byte-wise hash keeps the default seed
  // the same everywhere.
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : base) hash = (hash ^ c) * 0x100000001b3ull;
  const int64_t seed = options.seed.value_or(static_cast<int64_t>(hash >> 1));
  const double limit = std::sqrt(6.0 / static_cast<double>(in_features + out_features));

  framework::PersistableVar weight;
  weight.name = absl::StrCat(base, ".w");
  weight.shape = Shape({in_features, out_features});
  weight.dtype = options.dtype;
  weight.is_parameter = true;
  SLUICE_ASSIGN_OR_RETURN(
      Var w, framework::CreatePersistable(
                 *main, *startup, weight, "uniform_random",
                 vm::AttrMap().Set("min", -limit).Set("max", limit).Set("seed", seed)));
  framework::PersistableVar bias;
  bias.name = absl::StrCat(base, ".b");
  bias.shape = Shape({out_features});
  bias.dtype = options.dtype;
  bias.is_parameter = true;
  SLUICE_ASSIGN_OR_RETURN(Var b,
                          framework::CreatePersistable(*main, *startup, bias, "fill_constant",
                                                       vm::AttrMap().Set("value", 0.0)));
  return Linear(std::move(w), std::move(b));
}

absl::StatusOr<Var> Linear::operator()(const Var& x) const {
  if (x.program() != weight_.program()) {
    return absl::InvalidArgumentError(absl::StrCat("Linear '", weight_.name(), "': input '",
                                                   x.name(),
                                                   "' belongs to another Program than the layer"));
  }
  Program& program = *weight_.program();
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> product,
                          framework::AppendOp(program, "matmul", {{x}, {weight_}}));
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> sum,
                          framework::AppendOp(program, "add", {{product[0][0]}, {bias_}}));
  return sum[0][0];
}

}  // namespace sluice::nn
