#include "framework/io/internal/variable_programs.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::framework::io::internal {

absl::StatusOr<std::vector<HostTensor>> FetchVariables(Executor& executor, Scope* scope,
                                                       const std::vector<ir::VarDesc>& vars) {
  ir::ProgramDesc reader;
  std::vector<std::string> names;
  for (const ir::VarDesc& var : vars) {
    SLUICE_RETURN_IF_ERROR(reader.mutable_global_block().AddVar(var).status());
    names.push_back(var.name);
  }
  SLUICE_ASSIGN_OR_RETURN(RunResult result, executor.Run(reader, {}, names, scope));
  return std::move(result.fetches);
}

absl::Status AssignVariables(Executor& executor, Scope* scope, const std::vector<ir::VarDesc>& vars,
                             std::vector<HostTensor> values, absl::string_view suffix) {
  ir::ProgramDesc writer;
  Feeds feeds;
  for (size_t i = 0; i < vars.size(); ++i) {
    const ir::VarDesc& var = vars[i];
    ir::VarDesc in = var;
    in.name = absl::StrCat(var.name, suffix);
    in.persistable = false;
    SLUICE_RETURN_IF_ERROR(writer.mutable_global_block().AddVar(in).status());
    SLUICE_RETURN_IF_ERROR(writer.mutable_global_block().AddVar(var).status());
    writer.mutable_global_block().AppendOp(
        {"assign", {{"X", {in.name}}}, {{"Out", {var.name}}}, {}});
    feeds.emplace_back(in.name, std::move(values[i]));
  }
  return executor.Run(writer, feeds, {}, scope).status();
}

}  // namespace sluice::framework::io::internal
