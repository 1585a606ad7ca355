#include "framework/graph/specialization.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/stream_id.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/control_flow/lower_sub_blocks.h"

namespace sluice::framework::graph {
namespace {

absl::Status Prefixed(const std::string& name, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
}

// Every variable some op of the program writes (any block).
absl::flat_hash_set<std::string> WrittenNames(const ir::ProgramDesc& program) {
  absl::flat_hash_set<std::string> written;
  for (int b = 0; b < program.num_blocks(); ++b) {
    for (const ir::OpDesc& op : program.block(b).ops()) {
      for (const auto& [slot, names] : op.outputs) written.insert(names.begin(), names.end());
    }
  }
  return written;
}

}  // namespace

namespace internal {

// Trace's constructor and bindings are private; the specialization's builder reaches them.
struct TraceAccess {
  static Trace NewTrace(Program& main, Program& startup, const eager::Context& ctx, Device device) {
    return Trace(main, startup, ctx, device);
  }
  static std::vector<std::pair<std::string, eager::Tensor>>& Params(Trace& trace) {
    return trace.params_;
  }
};

}  // namespace internal

namespace {

// The state the startup program makes and the graph's scope does not hold yet, made now
// (an earlier trace's state of another dtype or shape is refused, naming it).
absl::Status InitializeMissingState(eager::Context& ctx, const SpecializationKey& key,
                                    const std::string& name, Specialization* spec) {
  bool missing = false;
  for (const ir::VarDesc& var : spec->startup->desc().block(0).vars()) {
    const vm::BlobRef* held = spec->scope->Find(var.name);
    if (held == nullptr || *held == nullptr) {
      missing = true;
    } else if ((*held)->dtype() != var.dtype || (*held)->shape() != var.shape) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, ": state '", var.name, "' is ", DataTypeName((*held)->dtype()), " ",
          (*held)->shape().ToString(), " from an earlier trace, but this trace declares it ",
          DataTypeName(var.dtype), " ", var.shape.ToString()));
    }
  }
  if (missing) {
    ExecutorOptions executor_options;
    executor_options.interpreter.device = key.device;
    Scope fresh;  // outlives the executor, whose interpreter binds its variables
    Executor executor(&ctx.registry(), ctx.vm(), executor_options);
    absl::StatusOr<RunResult> init = executor.Run(spec->startup->desc(), {}, {}, &fresh);
    if (!init.ok()) return Prefixed(name, init.status());
    for (const std::string& var : fresh.LocalNames()) {
      const vm::BlobRef* held = spec->scope->Find(var);
      if (held == nullptr || *held == nullptr) spec->scope->Set(var, *fresh.Find(var));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Specialization>> BuildSpecialization(
    eager::Context& ctx, const GraphFunction& function, const GraphOptions& options,
    const std::string& name, SpecializationKey key, std::shared_ptr<Scope> scope) {
  auto spec = std::make_unique<Specialization>();
  spec->key = key;
  spec->scope = std::move(scope);
  spec->main = std::make_unique<Program>(&ctx.registry());
  spec->startup = std::make_unique<Program>(&ctx.registry());
  Program& main = *spec->main;
  // --- Trace. ---
  Trace trace = internal::TraceAccess::NewTrace(main, *spec->startup, ctx, key.device);
  std::vector<std::string> output_names;
  {
    ProgramGuard guard(main, *spec->startup);
    std::vector<Value> inputs;
    for (size_t i = 0; i < key.inputs.size(); ++i) {
      absl::StatusOr<Var> var =
          Data(absl::StrCat("input_", i), key.inputs[i].second, key.inputs[i].first);
      if (!var.ok()) return Prefixed(name, var.status());
      inputs.emplace_back(*std::move(var));
    }
    absl::StatusOr<std::vector<Value>> outputs = function(trace, inputs);
    if (!outputs.ok()) return Prefixed(name, outputs.status());
    for (size_t i = 0; i < outputs->size(); ++i) {
      const Value& value = (*outputs)[i];
      if (!value.is_static() || value.var().program() != &main) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": output ", i,
                         " is not a value of the traced program (an eager tensor, or a variable of "
                         "another program)"));
      }
      output_names.push_back(value.var().name());
      spec->outputs.push_back({value.var().dtype(), value.var().shape()});
    }
  }
  // --- State. ---
  SLUICE_RETURN_IF_ERROR(InitializeMissingState(ctx, key, name, spec.get()));
  // --- Bindings: inputs to the frame's own blobs, parameters to the eager tensors'. ---
  SLUICE_ASSIGN_OR_RETURN(spec->stream,
                          ctx.vm()->GetStream(StreamKey{key.device, StreamType::kLazyJobLauncher}));
  control_flow::SubBlockLowering::ProgramBindings top;
  std::vector<vm::BlobRef> input_blobs;
  for (size_t i = 0; i < key.inputs.size(); ++i) {
    const std::string var = absl::StrCat("input_", i);
    SLUICE_ASSIGN_OR_RETURN(
        vm::BlobRef blob,
        ctx.vm()->NewLazyBlob(spec->stream, key.inputs[i].first, key.inputs[i].second,
                              absl::StrCat(name, ".", var)));
    top.feeds[var] = blob.get();
    input_blobs.push_back(std::move(blob));
  }
  const absl::flat_hash_set<std::string> written = WrittenNames(main.desc());
  absl::flat_hash_set<std::string> bound_params;
  for (auto& [var, tensor] : internal::TraceAccess::Params(trace)) {
    top.persistables[var] = tensor.blob().get();
    bound_params.insert(var);
    (written.contains(var) ? spec->updated_params : spec->read_params).push_back(tensor);
  }
  for (const ir::VarDesc& var : main.desc().block(0).vars()) {
    if (!var.persistable || bound_params.contains(var.name)) continue;
    const vm::BlobRef* blob = spec->scope->Find(var.name);
    if (blob == nullptr || *blob == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, ": persistable variable '", var.name,
          "' has no value: bind eager tensors with Trace::Param, and create optimizer state "
          "with an initializer in the startup program"));
    }
    top.persistables[var.name] = blob->get();
    spec->state.push_back(blob->get());
  }
  // --- Lowering. ---
  control_flow::SubBlockLowering lowering(main.desc(), ctx.registry(), *ctx.vm(), spec->stream,
                                          &spec->cancel, &spec->ops_run,
                                          options.release_temporaries);
  absl::StatusOr<control_flow::Frame> frame = lowering.BuildProgram(top, output_names);
  if (!frame.ok()) return Prefixed(name, frame.status());
  absl::StatusOr<std::unique_ptr<GraphLaunch>> launch =
      GraphLaunch::Create(name, *std::move(frame), std::move(input_blobs), ctx.registry());
  if (!launch.ok()) return Prefixed(name, launch.status());
  spec->launch = *std::move(launch);
  return spec;
}

}  // namespace sluice::framework::graph
