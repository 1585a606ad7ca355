#include "framework/io/persistables.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/io/internal/staged_directory.h"
#include "framework/io/internal/variable_programs.h"
#include "framework/io/npy.h"

namespace sluice::framework::io {
namespace {

namespace fs = std::filesystem;

// The same error with "variable 'NAME': " in front (the message names the file already).
absl::Status ForVariable(absl::string_view name, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("variable '", name, "': ", status.message()));
}

// A variable name must stay inside the directory: one path component, not "." or "..".
absl::Status CheckFileName(absl::string_view name) {
  if (name == "." || name == ".." || name.find('/') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable '", name, "': the name cannot be used as a file name"));
  }
  return absl::OkStatus();
}

std::string Describe(DataType dtype, const Shape& shape) {
  return absl::StrCat(DataTypeName(dtype), shape.ToString());
}

// An open directory, closed on scope exit.
class DirectoryHandle {
 public:
  explicit DirectoryHandle(int fd) : fd_(fd) {}
  DirectoryHandle(const DirectoryHandle&) = delete;
  DirectoryHandle& operator=(const DirectoryHandle&) = delete;
  ~DirectoryHandle() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// The whole file `name` in the directory open as `dir_fd`; NotFound when it is missing.
absl::StatusOr<std::string> ReadAt(int dir_fd, const std::string& name, const std::string& path) {
  const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  std::string data;
  char buffer[1 << 16];
  int err = 0;
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      data.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      err = errno;
      break;
    }
  }
  close(fd);
  if (err != 0) return absl::ErrnoToStatus(err, absl::StrCat(path, ": read failed"));
  return data;
}

// What one pass over the directory found: the checked values of the files present, and the
// variables whose files are missing.
struct DirectoryContents {
  std::vector<ir::VarDesc> present;
  std::vector<HostTensor> values;
  std::vector<ir::VarDesc> missing;
  bool replaced = false;  // `dir` was swapped for another directory during the pass
};

absl::StatusOr<DirectoryContents> ReadDirectory(const std::vector<ir::VarDesc>& vars,
                                                const std::string& dir) {
  // One handle for every file: a save that swaps `dir` meanwhile does not mix two sets.
  DirectoryHandle handle(open(dir.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY));
  if (handle.fd() < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(dir, ": cannot open the directory"));
  }
  DirectoryContents contents;
  for (const ir::VarDesc& var : vars) {
    const std::string path = PersistablePath(dir, var.name);
    absl::StatusOr<std::string> data = ReadAt(handle.fd(), absl::StrCat(var.name, ".npy"), path);
    if (absl::IsNotFound(data.status())) {
      contents.missing.push_back(var);
      continue;
    }
    if (!data.ok()) return ForVariable(var.name, data.status());
    absl::StatusOr<NpyArray> array = ParseNpy(*data, path);
    if (!array.ok()) return ForVariable(var.name, array.status());
    if (array->dtype != var.dtype || array->shape != var.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", var.name, "': ", path, " holds ", Describe(array->dtype, array->shape),
          ", the program declares ", Describe(var.dtype, var.shape)));
    }
    contents.present.push_back(var);
    contents.values.push_back(HostTensor{array->dtype, array->shape, std::move(array->bytes)});
  }
  if (!contents.missing.empty()) {
    // A save removes the old set right after swapping it out; files gone from the handle's
    // directory while `dir` names another one mean exactly that.
    struct stat opened {};
    struct stat named {};
    contents.replaced = fstat(handle.fd(), &opened) == 0 && stat(dir.c_str(), &named) == 0 &&
                        (opened.st_ino != named.st_ino || opened.st_dev != named.st_dev);
  }
  return contents;
}

}  // namespace

std::vector<ir::VarDesc> PersistableVars(const ir::ProgramDesc& program) {
  std::vector<ir::VarDesc> vars;
  for (const ir::VarDesc& var : program.global_block().vars()) {
    if (var.persistable) vars.push_back(var);
  }
  return vars;
}

std::string PersistablePath(absl::string_view dir, absl::string_view name) {
  return (fs::path(std::string(dir)) / absl::StrCat(name, ".npy")).string();
}

absl::Status SavePersistables(Executor& executor, const ir::ProgramDesc& program, Scope* scope,
                              const std::string& dir) {
  const std::vector<ir::VarDesc> vars = PersistableVars(program);
  for (const ir::VarDesc& var : vars) SLUICE_RETURN_IF_ERROR(CheckFileName(var.name));
  // Every value is read before anything is written, so a missing variable touches no file.
  std::vector<HostTensor> values;
  if (!vars.empty()) {
    SLUICE_ASSIGN_OR_RETURN(values, internal::FetchVariables(executor, scope, vars));
  }
  // Destroyed before Commit (an error return), it removes everything it made.
  SLUICE_ASSIGN_OR_RETURN(internal::StagedDirectory staged, internal::StagedDirectory::Begin(dir));
  std::set<std::string> written;
  for (size_t i = 0; i < vars.size(); ++i) {
    const std::string file = absl::StrCat(vars[i].name, ".npy");
    const HostTensor& value = values[i];
    const absl::Status status = WriteNpy(PersistablePath(staged.staging(), vars[i].name),
                                         NpyArray{value.dtype, value.shape, value.bytes});
    if (!status.ok()) return ForVariable(vars[i].name, status);
    written.insert(file);
  }
  return staged.Commit(written);
}

absl::StatusOr<LoadReport> LoadPersistables(Executor& executor, const ir::ProgramDesc& program,
                                            Scope* scope, const std::string& dir,
                                            const LoadOptions& options) {
  // A loader program: assign from fed host values into each persistable. Every file is
  // read and checked before it runs, so an error leaves the scope as it was.
  const std::vector<ir::VarDesc> vars = PersistableVars(program);
  for (const ir::VarDesc& var : vars) SLUICE_RETURN_IF_ERROR(CheckFileName(var.name));
  constexpr int kAttempts = 3;
  DirectoryContents contents;
  for (int attempt = 1;; ++attempt) {
    SLUICE_ASSIGN_OR_RETURN(contents, ReadDirectory(vars, dir));
    if (!contents.replaced || attempt == kAttempts) break;
  }
  if (!contents.missing.empty() && !options.allow_missing) {
    std::vector<std::string> items;
    for (const ir::VarDesc& var : contents.missing) {
      items.push_back(
          absl::StrCat("variable '", var.name, "' (", PersistablePath(dir, var.name), ")"));
    }
    return absl::NotFoundError(
        absl::StrCat(dir, " lacks the files of ", contents.missing.size(), " of the program's ",
                     vars.size(), " persistable variables: ", absl::StrJoin(items, ", ")));
  }
  LoadReport report;
  for (const ir::VarDesc& var : contents.present) report.loaded.push_back(var.name);
  for (const ir::VarDesc& var : contents.missing) report.skipped.push_back(var.name);
  if (!contents.present.empty()) {
    SLUICE_RETURN_IF_ERROR(internal::AssignVariables(executor, scope, contents.present,
                                                     std::move(contents.values), "@load"));
  }
  return report;
}

absl::Status LoadPersistables(Executor& executor, const ir::ProgramDesc& program, Scope* scope,
                              const std::string& dir) {
  return LoadPersistables(executor, program, scope, dir, LoadOptions{}).status();
}

}  // namespace sluice::framework::io
