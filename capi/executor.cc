// Programs, executors, runs with host and device-resident feeds and fetches, run results,
// and persistables.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "capi/internal/handles.h"
#include "capi/sluice_c_api.h"
#include "core/status.h"
#include "framework/io/persistables.h"
#include "framework/io/scope_variables.h"
#include "framework/onnx/onnx_import.h"
#include "ops/standard_ops.h"

using sluice::capi::Guard;
using sluice::capi::NotNull;

namespace {

namespace framework = sluice::framework;

// `name`, checked not NULL; `what` and `index` name it in the error.
absl::StatusOr<std::string> Name(const char* const* names, size_t index, const char* function,
                                 const char* what) {
  if (names == nullptr || names[index] == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(function, ": ", what, "[", index, "] is NULL"));
  }
  return std::string(names[index]);
}

// The host feeds as the executor takes them; every buffer checked.
absl::StatusOr<framework::Feeds> HostFeeds(const char* const* names,
                                           const SluiceHostBuffer* buffers, size_t count,
                                           const char* function) {
  framework::Feeds feeds;
  if (count > 0) SLUICE_RETURN_IF_ERROR(NotNull(buffers, function, "feeds"));
  for (size_t i = 0; i < count; ++i) {
    SLUICE_ASSIGN_OR_RETURN(std::string name, Name(names, i, function, "feed_names"));
    const SluiceHostBuffer& buffer = buffers[i];
    const std::string what = absl::StrCat("feed '", name, "'");
    SLUICE_ASSIGN_OR_RETURN(const sluice::DataType dtype,
                            sluice::capi::ToDataType(buffer.dtype, function));
    SLUICE_ASSIGN_OR_RETURN(sluice::Shape shape, sluice::capi::ToShape(buffer.shape, buffer.rank,
                                                                       function, what.c_str()));
    SLUICE_RETURN_IF_ERROR(
        sluice::capi::CheckByteSize(dtype, shape, buffer.byte_size, function, what.c_str()));
    if (buffer.byte_size > 0) SLUICE_RETURN_IF_ERROR(NotNull(buffer.data, function, what.c_str()));
    const auto* data = static_cast<const uint8_t*>(buffer.data);
    feeds.emplace_back(std::move(name),
                       framework::HostTensor{dtype, std::move(shape),
                                             std::vector<uint8_t>(data, data + buffer.byte_size)});
  }
  return feeds;
}

// `name` as the program calls it: an ONNX value name becomes its variable's name.
std::string VarName(const SluiceProgram& program, std::string name) {
  for (const auto& [onnx_name, var] : program.aliases) {
    if (onnx_name == name) return var;
  }
  return name;
}

// Writes the program's initial values that the executor's scope lacks.
absl::Status WriteInitialValues(SluiceExecutor* executor, const SluiceProgram& program) {
  for (const auto& [name, value] : program.initial_values) {
    if (executor->scope.Find(name) != nullptr) continue;
    SLUICE_RETURN_IF_ERROR(
        framework::io::WriteVariable(*executor->executor, &executor->scope, name, value));
  }
  return absl::OkStatus();
}

// "NAME=N[,NAME=N...]" as import options; InvalidArgument naming the bad entry.
absl::StatusOr<framework::onnx::OnnxImportOptions> OnnxOptions(const char* dim_sizes,
                                                               const char* function) {
  framework::onnx::OnnxImportOptions options;
  if (dim_sizes == nullptr) return options;
  for (absl::string_view entry : absl::StrSplit(dim_sizes, ',', absl::SkipEmpty())) {
    const size_t eq = entry.find('=');
    int64_t size = 0;
    if (eq == absl::string_view::npos || eq == 0 ||
        !absl::SimpleAtoi(entry.substr(eq + 1), &size) || size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(function, ": dim_sizes entry '", entry, "' is not NAME=N with N >= 0"));
    }
    options.dim_sizes[std::string(entry.substr(0, eq))] = size;
  }
  return options;
}

absl::Status Run(SluiceExecutor* executor, const SluiceProgram* program,
                 const char* const* feed_names, const SluiceHostBuffer* feeds, size_t num_feeds,
                 const char* const* device_feed_names, const SluiceTensor* const* device_feeds,
                 size_t num_device_feeds, const char* const* fetch_names,
                 const int* fetch_on_device, size_t num_fetches, SluiceRunResult** out,
                 const char* function) {
  SLUICE_RETURN_IF_ERROR(NotNull(executor, function, "executor"));
  SLUICE_RETURN_IF_ERROR(NotNull(program, function, "program"));
  SLUICE_ASSIGN_OR_RETURN(framework::Feeds host_feeds,
                          HostFeeds(feed_names, feeds, num_feeds, function));
  for (auto& feed : host_feeds) feed.first = VarName(*program, feed.first);
  framework::DeviceIo io;
  for (size_t i = 0; i < num_device_feeds; ++i) {
    SLUICE_ASSIGN_OR_RETURN(std::string name,
                            Name(device_feed_names, i, function, "device_feed_names"));
    if (device_feeds == nullptr || device_feeds[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(function, ": device_feeds[", i, "] ('", name, "') is NULL"));
    }
    io.feeds.emplace_back(VarName(*program, std::move(name)), device_feeds[i]->tensor.blob());
  }
  std::vector<std::string> fetches;
  for (size_t i = 0; i < num_fetches; ++i) {
    SLUICE_ASSIGN_OR_RETURN(std::string name, Name(fetch_names, i, function, "fetch_names"));
    name = VarName(*program, std::move(name));
    if (fetch_on_device != nullptr && fetch_on_device[i] != 0) io.fetches.push_back(name);
    fetches.push_back(std::move(name));
  }
  SLUICE_RETURN_IF_ERROR(WriteInitialValues(executor, *program));
  SLUICE_ASSIGN_OR_RETURN(
      framework::RunResult result,
      executor->executor->Run(program->program, host_feeds, io, fetches, &executor->scope));
  // Device fetches become tensors at once, so that their blobs have one owner.
  std::vector<sluice::eager::Tensor> device_tensors(result.device_fetches.size());
  for (size_t i = 0; i < result.device_fetches.size(); ++i) {
    if (result.device_fetches[i] == nullptr) continue;
    SLUICE_ASSIGN_OR_RETURN(device_tensors[i],
                            executor->context.FromBlob(std::move(result.device_fetches[i])));
  }
  if (out != nullptr) {
    *out = new SluiceRunResult{std::move(result.fetches), std::move(device_tensors)};
  }
  return absl::OkStatus();
}

}  // namespace

extern "C" {

SluiceStatus* sluice_program_load(const char* path, SluiceProgram** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(path, fn, "path"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    SLUICE_ASSIGN_OR_RETURN(framework::ir::ProgramDesc program,
                            framework::ir::ProgramDesc::Load(path));
    *out = new SluiceProgram{std::move(program)};
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_program_load_onnx(const char* path, const char* dim_sizes,
                                       SluiceProgram** out) {
  return sluice_program_load_onnx_with_constants(path, dim_sizes, nullptr, nullptr, 0, out);
}

SluiceStatus* sluice_program_load_onnx_with_constants(const char* path, const char* dim_sizes,
                                                      const char* const* constant_names,
                                                      const SluiceHostBuffer* constant_values,
                                                      size_t num_constants, SluiceProgram** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(path, fn, "path"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    SLUICE_ASSIGN_OR_RETURN(framework::onnx::OnnxImportOptions options, OnnxOptions(dim_sizes, fn));
    SLUICE_ASSIGN_OR_RETURN(framework::Feeds constants,
                            HostFeeds(constant_names, constant_values, num_constants, fn));
    for (auto& [name, value] : constants) options.constant_inputs[name] = std::move(value);
    sluice::ops::OpRegistry registry;
    SLUICE_RETURN_IF_ERROR(sluice::ops::RegisterStandardOps(&registry));
    SLUICE_ASSIGN_OR_RETURN(framework::onnx::OnnxImport imported,
                            framework::onnx::ImportOnnxFile(path, &registry, options));
    auto program = std::make_unique<SluiceProgram>();
    program->program = std::move(imported.program);
    program->initial_values = std::move(imported.persistables);
    for (const auto* values : {&imported.inputs, &imported.outputs}) {
      for (const auto& value : *values) program->aliases.emplace_back(value.onnx_name, value.var);
    }
    *out = program.release();
    return absl::OkStatus();
  });
}

void sluice_program_release(SluiceProgram* program) { delete program; }

SluiceStatus* sluice_executor_options_create(SluiceExecutorOptions** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    *out = new SluiceExecutorOptions;
    return absl::OkStatus();
  });
}

void sluice_executor_options_release(SluiceExecutorOptions* options) { delete options; }

SluiceStatus* sluice_executor_options_set_device(SluiceExecutorOptions* options,
                                                 const char* device) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    SLUICE_ASSIGN_OR_RETURN(options->options.interpreter.device,
                            sluice::capi::ParseDevice(device, fn, "device"));
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_executor_options_set_compute_streams(SluiceExecutorOptions* options,
                                                          int32_t streams) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    if (streams < 1) {
      return absl::InvalidArgumentError(absl::StrCat(fn, ": streams ", streams, " is less than 1"));
    }
    options->options.interpreter.compute_streams = streams;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_executor_options_set_compile_subgraphs(SluiceExecutorOptions* options,
                                                            int enabled) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    options->options.interpreter.compile_subgraphs = enabled != 0;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_executor_options_set_inplace(SluiceExecutorOptions* options, int enabled) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    options->options.interpreter.inplace = enabled != 0;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_executor_options_set_addto(SluiceExecutorOptions* options, int enabled) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    options->options.interpreter.addto = enabled != 0;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_executor_create(SluiceContext* context, const SluiceExecutorOptions* options,
                                     SluiceExecutor** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(context, fn, "context"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    const framework::ExecutorOptions executor_options =
        options == nullptr ? framework::ExecutorOptions() : options->options;
    // Owned here until handed out: a throw on the way (out of memory) frees it.
    auto executor =
        std::unique_ptr<SluiceExecutor>(new SluiceExecutor{context->context, nullptr, {}});
    executor->executor = std::make_unique<framework::Executor>(
        &executor->context.registry(), executor->context.vm(), executor_options);
    *out = executor.release();
    return absl::OkStatus();
  });
}

void sluice_executor_release(SluiceExecutor* executor) {
  Guard(__func__, [&, fn = __func__] {
    delete executor;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_executor_run(SluiceExecutor* executor, const SluiceProgram* program,
                                  const char* const* feed_names, const SluiceHostBuffer* feeds,
                                  size_t num_feeds, const char* const* fetch_names,
                                  size_t num_fetches, SluiceRunResult** out) {
  return Guard(__func__, [&, fn = __func__] {
    return Run(executor, program, feed_names, feeds, num_feeds, nullptr, nullptr, 0, fetch_names,
               nullptr, num_fetches, out, fn);
  });
}

SluiceStatus* sluice_executor_run_with_device_io(
    SluiceExecutor* executor, const SluiceProgram* program, const char* const* feed_names,
    const SluiceHostBuffer* feeds, size_t num_feeds, const char* const* device_feed_names,
    const SluiceTensor* const* device_feeds, size_t num_device_feeds,
    const char* const* fetch_names, const int* fetch_on_device, size_t num_fetches,
    SluiceRunResult** out) {
  return Guard(__func__, [&, fn = __func__] {
    return Run(executor, program, feed_names, feeds, num_feeds, device_feed_names, device_feeds,
               num_device_feeds, fetch_names, fetch_on_device, num_fetches, out, fn);
  });
}

SluiceStatus* sluice_executor_save_persistables(SluiceExecutor* executor,
                                                const SluiceProgram* program,
                                                const char* directory) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(executor, fn, "executor"));
    SLUICE_RETURN_IF_ERROR(NotNull(program, fn, "program"));
    SLUICE_RETURN_IF_ERROR(NotNull(directory, fn, "directory"));
    return framework::io::SavePersistables(*executor->executor, program->program, &executor->scope,
                                           directory);
  });
}

SluiceStatus* sluice_executor_load_persistables(SluiceExecutor* executor,
                                                const SluiceProgram* program,
                                                const char* directory) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(executor, fn, "executor"));
    SLUICE_RETURN_IF_ERROR(NotNull(program, fn, "program"));
    SLUICE_RETURN_IF_ERROR(NotNull(directory, fn, "directory"));
    return framework::io::LoadPersistables(*executor->executor, program->program, &executor->scope,
                                           directory);
  });
}

SluiceStatus* sluice_executor_load_persistables_partial(SluiceExecutor* executor,
                                                        const SluiceProgram* program,
                                                        const char* directory, size_t* num_loaded,
                                                        size_t* num_skipped) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(executor, fn, "executor"));
    SLUICE_RETURN_IF_ERROR(NotNull(program, fn, "program"));
    SLUICE_RETURN_IF_ERROR(NotNull(directory, fn, "directory"));
    SLUICE_ASSIGN_OR_RETURN(
        const framework::io::LoadReport report,
        framework::io::LoadPersistables(*executor->executor, program->program, &executor->scope,
                                        directory, {.allow_missing = true}));
    if (num_loaded != nullptr) *num_loaded = report.loaded.size();
    if (num_skipped != nullptr) *num_skipped = report.skipped.size();
    return absl::OkStatus();
  });
}

void sluice_run_result_release(SluiceRunResult* result) {
  Guard(__func__, [&, fn = __func__] {
    delete result;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_run_result_num_fetches(const SluiceRunResult* result, size_t* out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(result, fn, "result"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    *out = result->fetches.size();
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_run_result_fetch(const SluiceRunResult* result, size_t index,
                                      SluiceDataType* dtype, const int64_t** shape, size_t* rank,
                                      const void** data, size_t* byte_size) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(result, fn, "result"));
    if (index >= result->fetches.size()) {
      return absl::OutOfRangeError(
          absl::StrCat(fn, ": index ", index, " is past the ", result->fetches.size(), " fetches"));
    }
    if (index < result->device_tensors.size() && result->device_tensors[index].valid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          fn, ": fetch ", index, " stays on its device (sluice_run_result_device_fetch)"));
    }
    const framework::HostTensor& fetch = result->fetches[index];
    if (dtype != nullptr) *dtype = static_cast<SluiceDataType>(fetch.dtype);
    if (shape != nullptr) *shape = fetch.shape.dims().data();
    if (rank != nullptr) *rank = static_cast<size_t>(fetch.shape.rank());
    if (data != nullptr) *data = fetch.bytes.data();
    if (byte_size != nullptr) *byte_size = fetch.bytes.size();
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_run_result_device_fetch(const SluiceRunResult* result, size_t index,
                                             SluiceTensor** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(result, fn, "result"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    if (index >= result->fetches.size()) {
      return absl::OutOfRangeError(
          absl::StrCat(fn, ": index ", index, " is past the ", result->fetches.size(), " fetches"));
    }
    if (index >= result->device_tensors.size() || !result->device_tensors[index].valid()) {
      return absl::FailedPreconditionError(
          absl::StrCat(fn, ": fetch ", index, " came back to the host (sluice_run_result_fetch)"));
    }
    *out = sluice::capi::NewTensor(result->device_tensors[index]);
    return absl::OkStatus();
  });
}

}  // extern "C"
