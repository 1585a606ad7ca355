#include "framework/builder/persistable.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::framework {

std::string UniqueNameInBoth(Program& main, Program& startup, absl::string_view prefix,
                             const std::vector<std::string>& suffixes) {
  const std::vector<std::string> all = suffixes.empty() ? std::vector<std::string>{""} : suffixes;
  while (true) {
    std::string base = main.UniqueName(prefix);
    bool free = true;
    for (const std::string& suffix : all) {
      const std::string name = absl::StrCat(base, suffix);
      free = free && !main.desc().global_block().HasVar(name) &&
             !startup.desc().global_block().HasVar(name);
    }
    if (free) return base;
  }
}

absl::StatusOr<Var> CreatePersistable(Program& main, Program& startup, const PersistableVar& var,
                                      absl::string_view init_op, vm::AttrMap init_attrs) {
  if (main.current_block() != 0 || startup.current_block() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "persistable variable '", var.name,
        "': create parameters and other persistables outside cond branches and loop bodies "
        "(they belong to the global block)"));
  }
  for (const Program* program : {&main, &startup}) {
    if (program->desc().global_block().HasVar(var.name)) {
      return absl::AlreadyExistsError(absl::StrCat("persistable variable '", var.name, "': the ",
                                                   program == &main ? "main" : "startup",
                                                   " program already has a variable of that name"));
    }
  }
  ir::VarDesc desc;
  desc.name = var.name;
  desc.dtype = var.dtype;
  desc.shape = var.shape;
  desc.persistable = true;
  desc.is_parameter = var.is_parameter;
  SLUICE_ASSIGN_OR_RETURN(Var in_startup, CreateVar(startup, desc));
  init_attrs.Set("shape", std::vector<int64_t>(var.shape.dims().begin(), var.shape.dims().end()))
      .Set("dtype", std::string(DataTypeName(var.dtype)));
  SLUICE_RETURN_IF_ERROR(AppendOpInto(startup, init_op, {}, {{in_startup}}, std::move(init_attrs)));
  return CreateVar(main, std::move(desc));
}

}  // namespace sluice::framework
