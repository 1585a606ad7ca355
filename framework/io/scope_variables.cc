#include "framework/io/scope_variables.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/io/internal/variable_programs.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework::io {

absl::StatusOr<HostTensor> ReadVariable(Executor& executor, Scope* scope, const std::string& name) {
  const vm::BlobRef* blob = scope->Find(name);
  if (blob == nullptr || *blob == nullptr) {
    return absl::NotFoundError(absl::StrCat("variable '", name, "' is not in the scope"));
  }
  ir::VarDesc var;
  var.name = name;
  var.dtype = (*blob)->dtype();
  var.shape = (*blob)->shape();
  var.persistable = true;
  absl::StatusOr<std::vector<HostTensor>> result = internal::FetchVariables(executor, scope, {var});
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("variable '", name, "': ", result.status().message()));
  }
  return std::move(result->front());
}

absl::Status WriteVariable(Executor& executor, Scope* scope, const std::string& name,
                           const HostTensor& value) {
  if (name.empty()) return absl::InvalidArgumentError("WriteVariable: empty variable name");
  const size_t expected = static_cast<size_t>(value.shape.NumElements()) * SizeOf(value.dtype);
  if (value.bytes.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable '", name, "': ", value.bytes.size(), " bytes given for ",
                     DataTypeName(value.dtype), value.shape.ToString(), " (", expected, " bytes)"));
  }
  // The variable is replaced, not written in place: the value may have another dtype,
  // shape or device than the one the scope holds. Drop it, so the writer program binds a
  // fresh one on the executor's device; put it back if the write fails.
  vm::BlobRef previous;
  if (const vm::BlobRef* held = scope->FindLocal(name); held != nullptr) previous = *held;
  scope->Erase(name);
  ir::VarDesc var;
  var.name = name;
  var.dtype = value.dtype;
  var.shape = value.shape;
  var.persistable = true;
  const absl::Status written = internal::AssignVariables(executor, scope, {var}, {value}, "@set");
  if (!written.ok() && previous != nullptr) scope->Set(name, std::move(previous));
  return written;
}

}  // namespace sluice::framework::io
