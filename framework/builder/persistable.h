// Persistable variables that live in both programs of a (main, startup) pair — parameters
// (Linear's weight and bias) and optimizer state (learning rate, moments, beta powers) —
// declared under one name in each, with their initializer op in the startup program only.
// Running the startup program once fills them in the root scope; the main program then
// reads and updates them run after run.
//
// Free functions over Programs the caller owns; thread-compatible like Program.
#ifndef SLUICE_FRAMEWORK_BUILDER_PERSISTABLE_H_
#define SLUICE_FRAMEWORK_BUILDER_PERSISTABLE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "framework/builder/program.h"
#include "vm/attrs.h"

namespace sluice::framework {

// A name base "<prefix>_<n>" (from main.UniqueName) such that "<base><suffix>" names no
// variable of `main` or `startup`, for every suffix ({""} when empty).
std::string UniqueNameInBoth(Program& main, Program& startup, absl::string_view prefix,
                             const std::vector<std::string>& suffixes = {});

struct PersistableVar {
  std::string name;
  Shape shape;
  DataType dtype = DataType::kF32;
  bool is_parameter = false;  // trainable: autodiff gives it a gradient, optimizers update it
};

// Declares `var` (persistable) in main and in startup, and appends to startup the
// initializer `init_op` writing it, with `init_attrs` plus "shape" and "dtype" from `var`
// ("fill_constant" with "value", "uniform_random" with "min", "max", "seed", ...).
// Returns the main program's handle. AlreadyExists naming the variable when either program
// has it (nothing is added then); FailedPrecondition while either program is building a
// cond branch or loop body (persistables belong to the global block); the initializer's
// errors as AppendOpInto (the startup program keeps the declaration then: a programming
// error, not something to retry).
absl::StatusOr<Var> CreatePersistable(Program& main, Program& startup, const PersistableVar& var,
                                      absl::string_view init_op, vm::AttrMap init_attrs);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_BUILDER_PERSISTABLE_H_
