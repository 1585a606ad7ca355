// The two small programs through which framework/io moves variables between the host and a
// Scope, ordered with the executor's runs: one that fetches variables and runs no op, and
// one that assigns fed host values to variables. Persistables (persistables.h) and single
// variables (scope_variables.h) both go through them.
//
// Functions only; thread-compatible in the scope, as Executor::Run on it.
#ifndef SLUICE_FRAMEWORK_IO_INTERNAL_VARIABLE_PROGRAMS_H_
#define SLUICE_FRAMEWORK_IO_INTERNAL_VARIABLE_PROGRAMS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework::io::internal {

// The values `scope` holds for `vars` (persistable, so the scope's values are bound), in
// order, fetched by a program of the variables alone. The executor's errors unchanged.
absl::StatusOr<std::vector<HostTensor>> FetchVariables(Executor& executor, Scope* scope,
                                                       const std::vector<ir::VarDesc>& vars);

// Sets each of `vars` (persistable) to the matching entry of `values` by one program that
// assigns from a feed named "<variable><suffix>" per variable. The executor's errors
// unchanged (nothing is written when the run is refused).
absl::Status AssignVariables(Executor& executor, Scope* scope, const std::vector<ir::VarDesc>& vars,
                             std::vector<HostTensor> values, absl::string_view suffix);

}  // namespace sluice::framework::io::internal

#endif  // SLUICE_FRAMEWORK_IO_INTERNAL_VARIABLE_PROGRAMS_H_
