#include "tools/program_commands.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/io/npy.h"
#include "framework/ir/program_desc.h"
#include "framework/models/linear_regression.h"

namespace sluice::tools {
namespace {

using framework::HostTensor;
namespace io = framework::io;

struct CommonOptions {
  Device device{DeviceType::kCpu, 0};
  int steps = 1;
  int streams = 1;
  bool check_sync = false;
  std::string trace;
  std::string record;
};

HostTensor FromNpy(io::NpyArray array) { return HostTensor{array.dtype, array.shape, array.bytes}; }
io::NpyArray ToNpy(const HostTensor& t) { return io::NpyArray{t.dtype, t.shape, t.bytes}; }

std::string Preview(const HostTensor& t) {
  std::vector<std::string> items;
  const size_t n = std::min<size_t>(t.bytes.size() / SizeOf(t.dtype), 8);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DataType::kF32:
        items.push_back(absl::StrFormat("%.6g", t.ToVector<float>()[i]));
        break;
      case DataType::kF64:
        items.push_back(absl::StrFormat("%.6g", t.ToVector<double>()[i]));
        break;
      case DataType::kI32:
        items.push_back(absl::StrCat(t.ToVector<int32_t>()[i]));
        break;
      case DataType::kI64:
        items.push_back(absl::StrCat(t.ToVector<int64_t>()[i]));
        break;
      case DataType::kBool:
        items.push_back(t.bytes[i] ? "true" : "false");
        break;
    }
  }
  const bool more = static_cast<size_t>(t.shape.NumElements()) > n;
  return absl::StrCat(DataTypeName(t.dtype), t.shape.ToString(), " [", absl::StrJoin(items, ", "),
                      more ? ", ..." : "", "]");
}

absl::StatusOr<eager::Context> NewContext(const CommonOptions& options) {
  eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 2;
  context_options.runtime.enable_cuda = options.device.type() == DeviceType::kCuda;
  context_options.vm.check_sync = options.check_sync;
  context_options.vm.record_path = options.record;
  return eager::Context::Create(context_options);
}

// Parses the flags both commands share; returns true when `arg` was one of them.
absl::StatusOr<bool> ParseCommon(absl::string_view arg, const char* value, CommonOptions* o) {
  if (arg == "--sync-check") {
    o->check_sync = true;
    return true;
  }
  if (arg != "--device" && arg != "--steps" && arg != "--trace" && arg != "--streams" &&
      arg != "--record") {
    return false;
  }
  if (value == nullptr) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
  if (arg == "--device") {
    SLUICE_ASSIGN_OR_RETURN(o->device, Device::Parse(value));
  } else if (arg == "--trace") {
    o->trace = value;
  } else if (arg == "--record") {
    o->record = value;
  } else {
    int n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(arg, ": '", value, "' is not a positive integer"));
    }
    (arg == "--steps" ? o->steps : o->streams) = n;
  }
  return true;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "sluice: %s\n", status.ToString().c_str());
  return 1;
}

// A command's own flags: takes `arg` (and `value`, setting *took_value, when it uses it);
// NotFound for an option it does not know, another error for a bad value.
using OwnFlags =
    std::function<absl::Status(absl::string_view arg, const char* value, bool* took_value)>;

// Walks argv for `run` and `demo`: --help, the shared flags, then the command's own. Returns
// the exit code when the command must stop now (0 after --help, 1 for a bad option).
std::optional<int> ParseArgs(int argc, char** argv, CommonOptions* common, void (*usage)(FILE*),
                             const OwnFlags& own) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    }
    absl::StatusOr<bool> common_flag = ParseCommon(arg, value, common);
    if (!common_flag.ok()) return Fail(common_flag.status());
    if (*common_flag) {
      if (arg != "--sync-check") ++i;
      continue;
    }
    bool took_value = false;
    const absl::Status taken = own(arg, value, &took_value);
    if (absl::IsNotFound(taken)) {
      usage(stderr);
      return Fail(absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'")));
    }
    if (!taken.ok()) return Fail(taken);
    if (took_value) ++i;
  }
  return std::nullopt;
}

// --- sluice run ---

void PrintRunUsage(FILE* out) {
  std::fprintf(out,
               "usage: sluice run PROGRAM [--startup FILE] [--feed NAME=FILE.npy ...]\n"
               "                  [--fetch NAME ...] [--steps N] [--device cpu|sim:0|cuda:0]\n"
               "                  [--streams N] [--load DIR] [--save DIR] [--trace FILE]\n"
               "                  [--sync-check]\n"
               "\n"
               "Runs a program file (docs/program-format.md) N times and prints each step's\n"
               "fetched values and a summary.\n"
               "  --startup FILE    run this program once first (parameter initializers)\n"
               "  --feed NAME=FILE  feed variable NAME from a NumPy .npy file (repeatable)\n"
               "  --fetch NAME      print variable NAME after every step (repeatable)\n"
               "  --steps N         run the program N times (default 1)\n"
               "  --device D        where ops run (default cpu)\n"
               "  --streams N       spread ops over N compute streams (default 1; on cpu\n"
               "                    each stream has a worker thread of its own)\n"
               "  --load DIR        before running, read DIR/NAME.npy into each persistable\n"
               "                    variable NAME of the program (startup runs first)\n"
               "  --save DIR        after the last step, write every persistable variable as\n"
               "                    DIR/NAME.npy\n"
               "  --trace FILE      write the last step's Chrome trace JSON (Perfetto)\n"
               "  --sync-check      check every access against happens-before\n"
               "  --record FILE     write every VM instruction to FILE (replay it with\n"
               "                    `sluice replay FILE --ops standard`)\n");
}

}  // namespace

int RunMain(int argc, char** argv) {
  CommonOptions common;
  std::string program_path, startup_path, load_dir, save_dir;
  std::vector<std::pair<std::string, std::string>> feed_files;
  std::vector<std::string> fetches;
  const std::optional<int> stop =
      ParseArgs(argc, argv, &common, PrintRunUsage,
                [&](absl::string_view arg, const char* value, bool* took_value) -> absl::Status {
                  if (!absl::StartsWith(arg, "--")) {
                    if (!program_path.empty())
                      return absl::InvalidArgumentError("more than one PROGRAM");
                    program_path = std::string(arg);
                    return absl::OkStatus();
                  }
                  if (arg != "--startup" && arg != "--feed" && arg != "--fetch" &&
                      arg != "--load" && arg != "--save") {
                    return absl::NotFoundError(arg);
                  }
                  if (value == nullptr) {
                    return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
                  }
                  *took_value = true;
                  if (arg == "--startup") {
                    startup_path = value;
                  } else if (arg == "--feed") {
                    const absl::string_view text = value;
                    const size_t eq = text.find('=');
                    if (eq == absl::string_view::npos || eq == 0) {
                      return absl::InvalidArgumentError(
                          absl::StrCat("--feed '", text, "': expected NAME=FILE.npy"));
                    }
                    feed_files.emplace_back(std::string(text.substr(0, eq)),
                                            std::string(text.substr(eq + 1)));
                  } else if (arg == "--fetch") {
                    fetches.push_back(value);
                  } else if (arg == "--load") {
                    load_dir = value;
                  } else {
                    save_dir = value;
                  }
                  return absl::OkStatus();
                });
  if (stop.has_value()) return *stop;
  if (program_path.empty()) {
    PrintRunUsage(stderr);
    return 2;
  }
  absl::StatusOr<framework::ir::ProgramDesc> program =
      framework::ir::ProgramDesc::Load(program_path);
  if (!program.ok()) return Fail(program.status());
  framework::Feeds feeds;
  for (const auto& [name, path] : feed_files) {
    absl::StatusOr<io::NpyArray> array = io::ReadNpy(path);
    if (!array.ok()) return Fail(array.status());
    feeds.emplace_back(name, FromNpy(*std::move(array)));
  }
  absl::StatusOr<eager::Context> context = NewContext(common);
  if (!context.ok()) return Fail(context.status());
  framework::ExecutorOptions options;
  options.interpreter.device = common.device;
  options.interpreter.compute_streams = common.streams;
  framework::Executor executor(&context->registry(), context->vm(), options);
  framework::Scope scope;
  if (!startup_path.empty()) {
    absl::StatusOr<framework::ir::ProgramDesc> startup =
        framework::ir::ProgramDesc::Load(startup_path);
    if (!startup.ok()) return Fail(startup.status());
    absl::StatusOr<framework::RunResult> init = executor.Run(*startup, {}, {}, &scope);
    if (!init.ok()) return Fail(init.status());
  }
  std::vector<std::string> persistables;
  for (const auto& var : program->global_block().vars()) {
    if (var.persistable) persistables.push_back(var.name);
  }
  if (!load_dir.empty()) {
    // A loader program: assign from fed host values into each persistable.
    framework::ir::ProgramDesc loader;
    framework::Feeds values;
    for (const std::string& name : persistables) {
      absl::StatusOr<io::NpyArray> array =
          io::ReadNpy((std::filesystem::path(load_dir) / (name + ".npy")).string());
      if (!array.ok()) return Fail(array.status());
      const auto* var = program->global_block().FindVar(name);
      framework::ir::VarDesc in = *var;
      in.name = name + "@load";
      in.persistable = false;
      (void)loader.mutable_global_block().AddVar(in);
      (void)loader.mutable_global_block().AddVar(*var);
      loader.mutable_global_block().AppendOp({"assign", {{"X", {in.name}}}, {{"Out", {name}}}, {}});
      values.emplace_back(in.name, FromNpy(*std::move(array)));
    }
    absl::StatusOr<framework::RunResult> loaded = executor.Run(loader, values, {}, &scope);
    if (!loaded.ok()) return Fail(loaded.status());
  }
  framework::StepStats last;
  for (int step = 1; step <= common.steps; ++step) {
    framework::RunOptions run_options;
    if (step == common.steps) run_options.trace_path = common.trace;
    absl::StatusOr<framework::RunResult> result =
        executor.Run(*program, feeds, fetches, &scope, run_options);
    if (!result.ok()) return Fail(result.status());
    std::printf("step %d", step);
    for (size_t f = 0; f < fetches.size(); ++f) {
      std::printf("  %s=%s", fetches[f].c_str(), Preview(result->fetches[f]).c_str());
    }
    std::printf("\n");
    last = result->stats;
  }
  if (!save_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(save_dir, ec);
    if (ec) return Fail(absl::PermissionDeniedError(absl::StrCat(save_dir, ": ", ec.message())));
    // A program of the persistable variables alone: fetching them runs no op.
    framework::ir::ProgramDesc reader;
    for (const std::string& name : persistables) {
      (void)reader.mutable_global_block().AddVar(*program->global_block().FindVar(name));
    }
    absl::StatusOr<framework::RunResult> values = executor.Run(reader, {}, persistables, &scope);
    if (!values.ok()) return Fail(values.status());
    for (size_t p = 0; p < persistables.size(); ++p) {
      const std::string path =
          (std::filesystem::path(save_dir) / (persistables[p] + ".npy")).string();
      if (absl::Status written = io::WriteNpy(path, ToNpy(values->fetches[p])); !written.ok()) {
        return Fail(written);
      }
    }
    std::printf("saved %zu persistable variables to %s\n", persistables.size(), save_dir.c_str());
  }
  // Shut the VM down while the scope and the lowered graphs still hold their blobs, so a
  // recording ends with the checksums of every live tensor.
  if (absl::Status shut = context->vm()->Shutdown(); !shut.ok()) return Fail(shut);
  std::printf("summary: %d steps on %s; last %s\n", common.steps, common.device.ToString().c_str(),
              last.ToString().c_str());
  if (!common.trace.empty()) std::printf("trace: %s\n", common.trace.c_str());
  if (common.check_sync) {
    const int64_t violations = context->vm()->sync_checker()->violation_count();
    std::printf("sync check: %lld violations\n", static_cast<long long>(violations));
    if (violations > 0) return 1;
  }
  return 0;
}

// --- sluice demo ---

namespace {
void PrintDemoUsage(FILE* out) {
  std::fprintf(out,
               "usage: sluice demo [--steps N] [--device cpu|sim:0|cuda:0] [--streams N]\n"
               "                   [--trace FILE] [--sync-check] [--record FILE]\n"
               "                   [--write-programs DIR]\n"
               "\n"
               "Builds the demo model (Linear(16->1) + MSELoss, trained with Adam on a fixed\n"
               "16x16 batch), trains it for N steps (default 100) and prints the loss.\n"
               "  --write-programs DIR  also write main.program, startup.program, x.npy and\n"
               "                        y.npy there, for `sluice run`\n"
               "The other options mean what they mean for `sluice run` (sluice run --help).\n");
}
}  // namespace

int DemoMain(int argc, char** argv) {
  CommonOptions common;
  common.steps = 100;
  std::string write_dir;
  const std::optional<int> stop =
      ParseArgs(argc, argv, &common, PrintDemoUsage,
                [&](absl::string_view arg, const char* value, bool* took_value) -> absl::Status {
                  if (arg != "--write-programs" || value == nullptr)
                    return absl::NotFoundError(arg);
                  write_dir = value;
                  *took_value = true;
                  return absl::OkStatus();
                });
  if (stop.has_value()) return *stop;
  absl::StatusOr<eager::Context> context = NewContext(common);
  if (!context.ok()) return Fail(context.status());
  absl::StatusOr<framework::LinearRegression> model =
      framework::BuildLinearRegression(&context->registry());
  if (!model.ok()) return Fail(model.status());
  if (!write_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(write_dir, ec);
    const std::filesystem::path dir(write_dir);
    absl::Status status = model->main->desc().Save((dir / "main.program").string());
    if (status.ok()) status = model->startup->desc().Save((dir / "startup.program").string());
    if (status.ok())
      status = io::WriteNpy((dir / "x.npy").string(), ToNpy(framework::LinearRegressionInput()));
    if (status.ok())
      status = io::WriteNpy((dir / "y.npy").string(), ToNpy(framework::LinearRegressionTarget()));
    if (!status.ok()) return Fail(status);
    std::printf("wrote %s/{main.program,startup.program,x.npy,y.npy}; loss variable: %s\n",
                write_dir.c_str(), model->loss.c_str());
  }
  framework::ExecutorOptions options;
  options.interpreter.device = common.device;
  options.interpreter.compute_streams = common.streams;
  framework::Executor executor(&context->registry(), context->vm(), options);
  framework::Scope scope;
  absl::StatusOr<framework::RunResult> init = executor.Run(model->startup->desc(), {}, {}, &scope);
  if (!init.ok()) return Fail(init.status());
  const framework::Feeds feeds = {{model->x, framework::LinearRegressionInput()},
                                  {model->y, framework::LinearRegressionTarget()}};
  std::printf("demo: Linear(16->1) + MSELoss, Adam(lr=0.01), 16x16 batch, %d steps on %s\n",
              common.steps, common.device.ToString().c_str());
  float first = 0, previous = 0, loss = 0;
  bool falling = true;
  framework::StepStats last;
  for (int step = 1; step <= common.steps; ++step) {
    framework::RunOptions run_options;
    if (step == common.steps) run_options.trace_path = common.trace;
    absl::StatusOr<framework::RunResult> result =
        executor.Run(model->main->desc(), feeds, {model->loss}, &scope, run_options);
    if (!result.ok()) return Fail(result.status());
    loss = result->fetches[0].ToVector<float>()[0];
    if (step == 1) first = loss;
    if (step > 1 && loss >= previous) falling = false;
    previous = loss;
    if (step <= 5 || step % 10 == 0 || step == common.steps) {
      std::printf("step %3d  loss %.6f\n", step, loss);
    }
    last = result->stats;
  }
  if (absl::Status shut = context->vm()->Shutdown(); !shut.ok()) return Fail(shut);
  std::printf("loss %.6f -> %.6f (%s); last %s\n", first, loss,
              falling ? "fell every step" : "did NOT fall every step", last.ToString().c_str());
  if (common.check_sync) {
    std::printf("sync check: %lld violations\n",
                static_cast<long long>(context->vm()->sync_checker()->violation_count()));
  }
  return falling ? 0 : 1;
}

}  // namespace sluice::tools
