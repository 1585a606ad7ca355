// Test-only reference for running a Program: executes the global block's ops one by one,
// in program order (a cond runs its taken branch, a while its condition and body blocks,
// each on a copy of the scope, as framework/ir/control_flow.h defines them), through an
// eager::Context (Context::Call by op name; CallInto for an op whose outputs name its inputs — the
// in-place optimizer updates), with variables kept in a name -> Tensor map. No analysis, no streams
// (the "stream" attribute is ignored), no garbage collection: the simplest thing that gives a
// program's numbers, so the builder, autodiff and optimizer tests can check values independently of
// the interpreter.
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
#include "framework/executor/executor.h"
#include "framework/ir/control_flow.h"
#include "framework/ir/program_desc.h"
#include "gtest/gtest.h"

namespace sluice::framework::reference {

using Scope = absl::flat_hash_map<std::string, eager::Tensor>;

// One op of block `block` that is not control flow, on `scope`'s tensors.
inline absl::Status RunOp(eager::Context& ctx, const ir::OpDesc& op, const std::string& where,
                          Scope* scope) {
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
          return absl::FailedPreconditionError(absl::StrCat(where, ": in-place output '", slot.name,
                                                            "' ('", name, "') has no value"));
        }
        outputs.back().push_back(it->second);
      }
    }
    return ctx.CallInto(op.type, inputs, outputs, attrs);
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
  return absl::OkStatus();
}

// `name`'s tensor in `scope`, or FailedPrecondition starting with `where`.
inline absl::StatusOr<eager::Tensor> Lookup(const Scope& scope, const std::string& name,
                                            const std::string& where) {
  auto it = scope.find(name);
  if (it == scope.end()) {
    return absl::FailedPreconditionError(absl::StrCat(where, ": '", name, "' has no value"));
  }
  return it->second;
}

inline absl::Status RunBlock(eager::Context& ctx, const ir::ProgramDesc& program, int block,
                             Scope* scope);

// Runs sub-block `block` on a copy of `scope` in which `bound` names hold `values` (a
// loop's current values); returns what the block yields.
inline absl::StatusOr<std::vector<eager::Tensor>> RunSubBlock(
    eager::Context& ctx, const ir::ProgramDesc& program, int block, const Scope& scope,
    const std::vector<std::string>& bound, const std::vector<eager::Tensor>& values) {
  Scope inner = scope;
  for (size_t i = 0; i < bound.size(); ++i) inner[bound[i]] = values[i];
  SLUICE_RETURN_IF_ERROR(RunBlock(ctx, program, block, &inner));
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> yielded, ir::YieldedNames(program, block));
  std::vector<eager::Tensor> results;
  for (const std::string& name : yielded) {
    SLUICE_ASSIGN_OR_RETURN(eager::Tensor value,
                            Lookup(inner, name, absl::StrCat("block ", block, "'s yield")));
    results.push_back(std::move(value));
  }
  return results;
}

inline absl::StatusOr<bool> ReadBool(const eager::Tensor& t) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, t.ToBytes());
  return !bytes.empty() && bytes[0] != 0;
}

// cond and while, by the rules of framework/ir/control_flow.h.
inline absl::Status RunControlFlow(eager::Context& ctx, const ir::ProgramDesc& program,
                                   const ir::OpDesc& op, const std::string& where, Scope* scope) {
  std::vector<eager::Tensor> results;
  if (op.type == ir::kCondOp) {
    SLUICE_ASSIGN_OR_RETURN(eager::Tensor pred, Lookup(*scope, op.Input(ir::kCondSlot)[0], where));
    SLUICE_ASSIGN_OR_RETURN(const bool taken, ReadBool(pred));
    SLUICE_ASSIGN_OR_RETURN(vm::BlockRef branch,
                            op.attrs.GetBlock(taken ? ir::kTrueBlockAttr : ir::kFalseBlockAttr));
    SLUICE_ASSIGN_OR_RETURN(
        results, RunSubBlock(ctx, program, static_cast<int>(branch.index), *scope, {}, {}));
  } else {
    // Inside the loop the Out names hold the current values; X names the initial ones.
    const std::vector<std::string>& current = op.Output(ir::kOutSlot);
    for (const std::string& name : op.Input(ir::kLoopVarsSlot)) {
      SLUICE_ASSIGN_OR_RETURN(eager::Tensor value, Lookup(*scope, name, where));
      results.push_back(std::move(value));
    }
    SLUICE_ASSIGN_OR_RETURN(vm::BlockRef check, op.attrs.GetBlock(ir::kCondBlockAttr));
    SLUICE_ASSIGN_OR_RETURN(vm::BlockRef body, op.attrs.GetBlock(ir::kBodyBlockAttr));
    const absl::StatusOr<int64_t> max = op.attrs.GetInt(ir::kMaxIterationsAttr);
    for (int64_t done = 0;; ++done) {
      SLUICE_ASSIGN_OR_RETURN(
          std::vector<eager::Tensor> pred,
          RunSubBlock(ctx, program, static_cast<int>(check.index), *scope, current, results));
      SLUICE_ASSIGN_OR_RETURN(const bool again, ReadBool(pred[0]));
      if (!again) break;
      if (max.ok() && done >= *max) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": more than ", *max, " iterations"));
      }
      SLUICE_ASSIGN_OR_RETURN(results, RunSubBlock(ctx, program, static_cast<int>(body.index),
                                                   *scope, current, results));
    }
  }
  const std::vector<std::string>& out = op.Output(ir::kOutSlot);
  for (size_t i = 0; i < out.size(); ++i) (*scope)[out[i]] = results[i];
  return absl::OkStatus();
}

// Runs every op of block `block` (a `yield` does nothing: its block's caller reads it).
inline absl::Status RunBlock(eager::Context& ctx, const ir::ProgramDesc& program, int block,
                             Scope* scope) {
  const std::vector<ir::OpDesc>& ops = program.block(block).ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::OpDesc& op = ops[i];
    const std::string where = absl::StrCat("block ", block, " op #", i, " '", op.type, "'");
    if (op.type == ir::kYieldOp) continue;
    if (ir::IsControlFlowOp(op)) {
      SLUICE_RETURN_IF_ERROR(RunControlFlow(ctx, program, op, where, scope));
    } else {
      SLUICE_RETURN_IF_ERROR(RunOp(ctx, op, where, scope));
    }
  }
  return absl::OkStatus();
}

// Runs every op of `program`'s global block on `scope`'s tensors, control flow included;
// waits for the results (the first kernel error comes back here).
inline absl::Status RunProgram(eager::Context& ctx, const ir::ProgramDesc& program, Scope* scope) {
  SLUICE_RETURN_IF_ERROR(RunBlock(ctx, program, 0, scope));
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

// Runs `program` once per feed set, each on a fresh scope holding the feeds (on cpu), and
// returns the bytes of `fetches` of every run, in order. Failures are test failures.
inline std::vector<std::vector<uint8_t>> FetchesOfRuns(eager::Context& ctx,
                                                       const ir::ProgramDesc& program,
                                                       const std::vector<Feeds>& runs,
                                                       const std::vector<std::string>& fetches) {
  std::vector<std::vector<uint8_t>> fetched;
  for (const Feeds& feeds : runs) {
    Scope scope;
    for (const auto& [name, value] : feeds) {
      scope[name] =
          ctx.FromBytes(value.dtype, value.shape, value.bytes, Device(DeviceType::kCpu, 0)).value();
    }
    const absl::Status ran = RunProgram(ctx, program, &scope);
    EXPECT_TRUE(ran.ok()) << ran;
    for (const std::string& name : fetches) fetched.push_back(scope.at(name).ToBytes().value());
  }
  return fetched;
}

}  // namespace sluice::framework::reference

#endif  // SLUICE_TESTS_FRAMEWORK_PROGRAM_REFERENCE_RUNNER_H_
