// Test-only reference for running a Program: executes the global block's ops one by one,
// in program order, through an eager::Context (Context::Call by op name; CallInto for an op
// whose outputs name its inputs — the in-place optimizer updates), with variables kept in a
// name -> Tensor map. No analysis, no streams (the "stream" attribute is ignored), no
// garbage collection: the simplest thing that gives a program's numbers, so the builder,
// autodiff and optimizer tests can check values independently of the interpreter.
//
// A Scope map is what one would keep across runs: persistable values written by a startup
// program stay in it for the main program; a run overwrites the non-persistable ones.
#ifndef SLUICE_TESTS_FRAMEWORK_PROGRAM_REFERENCE_RUNNER_H_
#define SLUICE_TESTS_FRAMEWORK_PROGRAM_REFERENCE_RUNNER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework::reference {

using Scope = absl::flat_hash_map<std::string, eager::Tensor>;

// Runs every op of `program`'s global block on `scope`'s tensors; waits for the results
// (the first kernel error comes back here).
inline absl::Status RunProgram(eager::Context& ctx, const ir::ProgramDesc& program, Scope* scope) {
  const std::vector<ir::OpDesc>& ops = program.global_block().ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::OpDesc& op = ops[i];
    const std::string where = absl::StrCat("op #", i, " '", op.type, "'");
    SLUICE_ASSIGN_OR_RETURN(const ops::OpSchema* schema, ctx.registry().FindSchema(op.type));
    std::vector<std::vector<eager::Tensor>> inputs;
    absl::flat_hash_set<std::string> input_names;
    for (const ops::ArgDef& slot : schema->inputs()) {
      inputs.emplace_back();
      for (const std::string& name : op.Input(slot.name)) {
        auto it = scope->find(name);
        if (it == scope->end()) {
          return absl::FailedPreconditionError(
              absl::StrCat(where, ": input '", slot.name, "' ('", name, "') has no value"));
        }
        inputs.back().push_back(it->second);
        input_names.insert(name);
      }
    }
    vm::AttrMap attrs;
    for (const auto& [name, value] : op.attrs.values()) {
      if (name != kStreamAttr) attrs.Set(name, value);
    }
    bool in_place = false;
    for (const std::string& name : op.OutputNames()) in_place |= input_names.contains(name);
    if (in_place) {
      std::vector<std::vector<eager::Tensor>> outputs;
      for (const ops::ArgDef& slot : schema->outputs()) {
        outputs.emplace_back();
        for (const std::string& name : op.Output(slot.name)) {
          auto it = scope->find(name);
          if (it == scope->end()) {
            return absl::FailedPreconditionError(absl::StrCat(
                where, ": in-place output '", slot.name, "' ('", name, "') has no value"));
          }
          outputs.back().push_back(it->second);
        }
      }
      SLUICE_RETURN_IF_ERROR(ctx.CallInto(op.type, inputs, outputs, attrs));
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<eager::Tensor> results, ctx.Call(op.type, inputs, attrs));
    size_t k = 0;
    for (const ops::ArgDef& slot : schema->outputs()) {
      for (const std::string& name : op.Output(slot.name)) {
        if (k == results.size()) {
          return absl::InternalError(absl::StrCat(where, ": fewer results than output names"));
        }
        (*scope)[name] = results[k++];
      }
    }
    if (k != results.size()) {
      return absl::InternalError(absl::StrCat(where, ": more results than output names"));
    }
  }
  return ctx.Sync();
}

template <typename T>
absl::Status Feed(eager::Context& ctx, Scope* scope, const std::string& name,
                  const std::vector<T>& values, const Shape& shape) {
  SLUICE_ASSIGN_OR_RETURN(eager::Tensor tensor, ctx.FromVector(values, shape));
  (*scope)[name] = std::move(tensor);
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<std::vector<T>> Fetch(const Scope& scope, const std::string& name) {
  auto it = scope.find(name);
  if (it == scope.end()) return absl::NotFoundError(absl::StrCat("no value for '", name, "'"));
  return it->second.ToVector<T>();
}

// A cpu-only context for tests.
inline eager::Context NewCpuContext() {
  eager::ContextOptions options;
  options.runtime.num_sim_devices = 0;
  options.runtime.enable_cuda = false;
  absl::StatusOr<eager::Context> ctx = eager::Context::Create(options);
  SLUICE_CHECK(ctx.ok());
  return *std::move(ctx);
}

}  // namespace sluice::framework::reference

#endif  // SLUICE_TESTS_FRAMEWORK_PROGRAM_REFERENCE_RUNNER_H_
