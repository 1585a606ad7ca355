// Saving and loading a program's persistable variables (parameters and optimizer state) as
// a directory of NumPy `.npy` files, one per variable: variable NAME of the program's
// global block is DIR/NAME.npy (io/npy.h), holding exactly the variable's dtype and shape.
// Python reads such a directory with `numpy.load`, and a directory written there with
// `numpy.save` loads back here.
//
// Values move through an Executor, so they are ordered against the runs before and after:
// a save sees what the last submitted run wrote, a load is seen by the next run.
//
// Errors name the variable and the file. Neither call leaves a partial result behind:
// - LoadPersistables reads and checks every file before it writes anything, so on error
//   the scope is unchanged.
// - SavePersistables writes every file under a temporary name in a fresh subdirectory of
//   DIR, then renames each into place; on error the temporaries are removed (and DIR too
//   when this call created it). Files of DIR that name no persistable are left alone. The
//   renames themselves are not one atomic step: should one of them fail (which needs the
//   file system to fail between two renames in one directory), the files renamed before it
//   hold the new values.
//
// Functions only; each call is thread-compatible in its scope (one caller at a time per
// scope, as for Executor::Run on it).
#ifndef SLUICE_FRAMEWORK_IO_PERSISTABLES_H_
#define SLUICE_FRAMEWORK_IO_PERSISTABLES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework::io {

// The persistable variables of `program`'s global block, in declaration order.
std::vector<ir::VarDesc> PersistableVars(const ir::ProgramDesc& program);

// Where variable `name` lives in `dir`: dir/name.npy.
std::string PersistablePath(absl::string_view dir, absl::string_view name);

// Writes every persistable variable of `program`, as `scope` holds it, to
// PersistablePath(dir, name), creating `dir` (and its parents) when missing and replacing
// files already there. Errors: InvalidArgument naming a variable whose name is not a plain
// file name ("." or "..", or holding '/'); the executor's error (naming the variable) when
// the scope does not hold one; the file system's error naming the directory or file.
absl::Status SavePersistables(Executor& executor, const ir::ProgramDesc& program, Scope* scope,
                              const std::string& dir);

// Reads PersistablePath(dir, name) into every persistable variable `name` of `program`,
// in `scope` (creating the variables it does not hold yet). Errors, each naming the
// variable and the file: NotFound when the file is missing, InvalidArgument when it is not
// a valid .npy file or holds another dtype or shape than the program declares; then the
// executor's error, if the run writing the values fails.
absl::Status LoadPersistables(Executor& executor, const ir::ProgramDesc& program, Scope* scope,
                              const std::string& dir);

}  // namespace sluice::framework::io

#endif  // SLUICE_FRAMEWORK_IO_PERSISTABLES_H_
