#include "framework/io/persistables.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/io/internal/variable_programs.h"
#include "framework/io/npy.h"

namespace sluice::framework::io {
namespace {

namespace fs = std::filesystem;

// The same error with "variable 'NAME': " in front (the message names the file already).
absl::Status ForVariable(absl::string_view name, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("variable '", name, "': ", status.message()));
}

absl::Status FromErrorCode(const std::error_code& ec, absl::string_view what) {
  return absl::ErrnoToStatus(ec.value(), absl::StrCat(what, ": ", ec.message()));
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

// The topmost directory among `dir` and its ancestors that does not exist yet (what
// create_directories(dir) would create first); empty when `dir` exists.
fs::path FirstMissing(const fs::path& dir) {
  fs::path missing;
  std::error_code ec;
  for (fs::path p = dir; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing = p;
    if (p == p.parent_path()) break;
  }
  return missing;
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

  const fs::path root(dir);
  const fs::path created = FirstMissing(root);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return FromErrorCode(ec, dir);
  std::string staging = (root / ".save-XXXXXX").string();
  if (mkdtemp(staging.data()) == nullptr) {
    const int err = errno;
    if (!created.empty()) fs::remove_all(created, ec);
    return absl::ErrnoToStatus(err, absl::StrCat(dir, ": cannot create a temporary directory"));
  }
  auto clean_up = [&] {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    if (!created.empty()) fs::remove_all(created, ignored);
  };
  for (size_t i = 0; i < vars.size(); ++i) {
    const HostTensor& value = values[i];
    const absl::Status written = WriteNpy(PersistablePath(staging, vars[i].name),
                                          NpyArray{value.dtype, value.shape, value.bytes});
    if (!written.ok()) {
      clean_up();
      return ForVariable(vars[i].name, written);
    }
  }
  for (const ir::VarDesc& var : vars) {
    const std::string target = PersistablePath(dir, var.name);
    fs::rename(PersistablePath(staging, var.name), target, ec);
    if (ec) {
      const absl::Status status = ForVariable(var.name, FromErrorCode(ec, target));
      clean_up();
      return status;
    }
  }
  fs::remove(staging, ec);
  if (ec) return FromErrorCode(ec, staging);
  return absl::OkStatus();
}

absl::Status LoadPersistables(Executor& executor, const ir::ProgramDesc& program, Scope* scope,
                              const std::string& dir) {
  // A loader program: assign from fed host values into each persistable. Every file is
  // read and checked before it runs, so an error leaves the scope as it was.
  const std::vector<ir::VarDesc> vars = PersistableVars(program);
  std::vector<HostTensor> values;
  for (const ir::VarDesc& var : vars) {
    SLUICE_RETURN_IF_ERROR(CheckFileName(var.name));
    const std::string path = PersistablePath(dir, var.name);
    absl::StatusOr<NpyArray> array = ReadNpy(path);
    if (!array.ok()) return ForVariable(var.name, array.status());
    if (array->dtype != var.dtype || array->shape != var.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", var.name, "': ", path, " holds ", Describe(array->dtype, array->shape),
          ", the program declares ", Describe(var.dtype, var.shape)));
    }
    values.push_back(HostTensor{array->dtype, array->shape, std::move(array->bytes)});
  }
  return internal::AssignVariables(executor, scope, vars, std::move(values), "@load");
}

}  // namespace sluice::framework::io
