// Reading and writing one variable of a Scope from the host, by name: what an embedder's
// `scope.find_var(name).get_tensor()` reads and `.set(array, place)` writes (the Python
// package's static API, the C API). Values move through an Executor, as persistables do
// (persistables.h), so they are ordered against the runs before and after: a read sees
// what the last submitted run wrote, a write is seen by the next run.
//
// Functions only; each call is thread-compatible in its scope (one caller at a time per
// scope, as for Executor::Run on it).
#ifndef SLUICE_FRAMEWORK_IO_SCOPE_VARIABLES_H_
#define SLUICE_FRAMEWORK_IO_SCOPE_VARIABLES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/scope.h"

namespace sluice::framework::io {

// The value `scope` (or an ancestor) holds for `name`, copied to the host. NotFound naming
// the variable when no scope on the way holds it; the run's error (naming the variable)
// when the value's producer failed.
absl::StatusOr<HostTensor> ReadVariable(Executor& executor, Scope* scope, const std::string& name);

// Sets variable `name` of `scope` to a copy of `value`, on the executor's device, replacing
// the variable (of any dtype, shape or device) if the scope holds one: interpreters built
// over the old variable rebuild at their next run. InvalidArgument for a
// value whose byte count does not match its dtype and shape, or an empty name.
absl::Status WriteVariable(Executor& executor, Scope* scope, const std::string& name,
                           const HostTensor& value);

}  // namespace sluice::framework::io

#endif  // SLUICE_FRAMEWORK_IO_SCOPE_VARIABLES_H_
