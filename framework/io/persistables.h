// Saving and loading a program's persistable variables (parameters and optimizer state) as
// a directory of NumPy `.npy` files, one per variable: variable NAME of the program's
// global block is DIR/NAME.npy (io/npy.h), holding exactly the variable's dtype and shape.
// Python reads such a directory with `numpy.load`, and a directory written there with
// `numpy.save` loads back here.
//
// Values move through an Executor, so they are ordered against the runs before and after:
// a save sees what the last submitted run wrote, a load is seen by the next run.
//
// Errors name the variable, the file or the directory. Neither call leaves a partial result:
// - LoadPersistables reads and checks every file before it writes anything, so on error
//   the scope is unchanged. It reads every file through one open handle on DIR, so a save
//   replacing DIR meanwhile is seen wholly or not at all (a load that finds files gone
//   because DIR was replaced under it starts over, a few times at most).
// - SavePersistables replaces the whole set in one step (Linux): it writes every file into
//   a fresh sibling directory, PARENT/.NAME.saving-PID-XXXXXX, flushes the files and the
//   directory to disk, hard-links (or copies, where linking fails) the entries of DIR that
//   name no persistable into it, then exchanges it with DIR by
//   renameat2(RENAME_EXCHANGE) (a plain rename when DIR does not exist yet), flushes
//   PARENT and removes the sibling, which then holds the old set. A reader, or a process
//   killed at any point, sees the complete old set or the complete new set. A save killed
//   before it finished leaves its sibling behind: loads never look at it, and the next
//   save of the same DIR removes it (a sibling is removed only when its writer is gone:
//   each save holds an flock on its sibling and its process id is in the name).
//   When the exchange is impossible (DIR is a mount point, or the file system lacks
//   RENAME_EXCHANGE: EXDEV, EBUSY, EINVAL, ENOSYS) the save fails with FailedPrecondition
//   naming DIR and leaves DIR as it was; it does not fall back to replacing files one by
//   one, which could leave a mix. Save into a subdirectory of the mount point instead.
//   A symbolic link DIR is resolved: the directory it points to is replaced, the link kept.
//   The save needs write access to PARENT, not only to DIR. DIR keeps its permission bits.
//
// Functions only; each call is thread-compatible in its scope (one caller at a time per
// scope, as for Executor::Run on it).
#ifndef SLUICE_FRAMEWORK_IO_PERSISTABLES_H_
#define SLUICE_FRAMEWORK_IO_PERSISTABLES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
// PersistablePath(dir, name), replacing the set in `dir` atomically as described above and
// creating `dir`'s parents when missing. Entries of `dir` that name no persistable are kept.
// Errors: InvalidArgument naming a variable whose name is not a plain file name ("." or
// "..", or holding '/'); the executor's error (naming the variable) when the scope does not
// hold one; FailedPrecondition naming `dir` when it is not a directory, is a file system's
// root, or cannot be exchanged atomically; the file system's error naming the directory or
// file. On error `dir` is as it was (and parents this call created are removed).
absl::Status SavePersistables(Executor& executor, const ir::ProgramDesc& program, Scope* scope,
                              const std::string& dir);

// How LoadPersistables treats a persistable whose file `dir` lacks.
struct LoadOptions {
  // False: every persistable needs its file (NotFound naming all the missing ones).
  // True: load the files present and leave every other persistable as the scope holds it
  // (as the startup program made it, or absent); `dir` itself must still exist.
  bool allow_missing = false;
};

// What a load did, by variable name in declaration order.
struct LoadReport {
  std::vector<std::string> loaded;   // read from their files
  std::vector<std::string> skipped;  // no file: left as they were (allow_missing only)
};

// Reads PersistablePath(dir, name) into every persistable variable `name` of `program`,
// in `scope` (creating the variables it does not hold yet). Errors, each naming the
// variable and the file: NotFound when `dir` is missing, or when files are missing and
// `options.allow_missing` is false (one message listing every missing variable and its
// file); InvalidArgument when a file is not a valid .npy file or holds another dtype or
// shape than the program declares; then the executor's error, if the run writing the
// values fails. On error the scope is unchanged.
absl::StatusOr<LoadReport> LoadPersistables(Executor& executor, const ir::ProgramDesc& program,
                                            Scope* scope, const std::string& dir,
                                            const LoadOptions& options);

// LoadPersistables with every file required (LoadOptions{}).
absl::Status LoadPersistables(Executor& executor, const ir::ProgramDesc& program, Scope* scope,
                              const std::string& dir);

}  // namespace sluice::framework::io

#endif  // SLUICE_FRAMEWORK_IO_PERSISTABLES_H_
