#include "framework/io/scope_variables.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework::io {

absl::StatusOr<HostTensor> ReadVariable(Executor& executor, Scope* scope, const std::string& name) {
  const vm::BlobRef* blob = scope->Find(name);
  if (blob == nullptr || *blob == nullptr) {
    return absl::NotFoundError(absl::StrCat("variable '", name, "' is not in the scope"));
  }
  // A program of the one variable, persistable so the scope's value is bound: fetching it
  // runs no op.
  ir::ProgramDesc reader;
  ir::VarDesc var;
  var.name = name;
  var.dtype = (*blob)->dtype();
  var.shape = (*blob)->shape();
  var.persistable = true;
  SLUICE_RETURN_IF_ERROR(reader.mutable_global_block().AddVar(var).status());
  absl::StatusOr<RunResult> result = executor.Run(reader, {}, {name}, scope);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("variable '", name, "': ", result.status().message()));
  }
  return std::move(result->fetches.front());
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
  ir::ProgramDesc writer;
  ir::VarDesc in;
  in.name = absl::StrCat(name, "@set");
  in.dtype = value.dtype;
  in.shape = value.shape;
  ir::VarDesc out = in;
  out.name = name;
  out.persistable = true;
  SLUICE_RETURN_IF_ERROR(writer.mutable_global_block().AddVar(in).status());
  SLUICE_RETURN_IF_ERROR(writer.mutable_global_block().AddVar(out).status());
  writer.mutable_global_block().AppendOp({"assign", {{"X", {in.name}}}, {{"Out", {name}}}, {}});
  const absl::Status written = executor.Run(writer, {{in.name, value}}, {}, scope).status();
  if (!written.ok() && previous != nullptr) scope->Set(name, std::move(previous));
  return written;
}

}  // namespace sluice::framework::io
