#include "tools/program_commands.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/builder/losses.h"
#include "framework/compiler/compiler.h"
#include "framework/distributed/data_parallel.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/graph/graph.h"
#include "framework/io/npy.h"
#include "framework/io/persistables.h"
#include "framework/io/scope_variables.h"
#include "framework/ir/program_desc.h"
#include "framework/models/linear_regression.h"
#include "framework/models/linear_regression_graph.h"
#include "framework/training/eager_layers.h"
#include "framework/training/eager_optimizers.h"
#include "tools/data_parallel_setup.h"
#include "tools/interrupt_watcher.h"
#include "tools/onnx_command.h"
#include "tools/options.h"
#include "vm/sync_checker.h"
#include "vm/virtual_machine.h"

namespace sluice::tools {
namespace {

using framework::HostTensor;
namespace io = framework::io;

struct CommonOptions {
  Device device{DeviceType::kCpu, 0};
  int steps = 1;
  int streams = 1;
  int intra_op_threads = 0;  // ep::CpuOptions::intra_op_threads
  bool check_sync = false;
  bool no_compile = false;
  bool no_inplace = false;
  bool addto = false;
  bool no_addto = false;
  std::string trace;
  std::string record;
  bool data_parallel = false;
  double ccl_timeout_s = 60;
  int64_t bucket_bytes = int64_t{1} << 20;
  // Set by NewContext under --data-parallel.
  int rank = 0;
  int ranks = 1;
};

// What the subgraph compiler did: the program's groups (`lowering`, its build), the
// compiler's cache, then one line per kernel compiled (the startup program's included).
void PrintCompilation(const framework::Executor& executor,
                      const absl::StatusOr<framework::LoweringStats>& lowering) {
  const framework::compiler::CompilerStats stats = executor.compiler().stats();
  std::vector<std::shared_ptr<const framework::compiler::CompiledSubgraph>> compiled =
      executor.compiler().Compiled();
  std::printf(
      "compiled: %lld subgraphs fusing %lld ops (%lld failed to compile); cache %lld hits, "
      "%lld misses, %zu kernels; compile time %.3f ms\n",
      static_cast<long long>(lowering.ok() ? lowering->compiled_subgraphs : 0),
      static_cast<long long>(lowering.ok() ? lowering->fused_ops : 0),
      static_cast<long long>(lowering.ok() ? lowering->compile_fallbacks : 0),
      static_cast<long long>(stats.hits), static_cast<long long>(stats.misses), compiled.size(),
      static_cast<double>(stats.compile_ns) / 1e6);
  std::sort(compiled.begin(), compiled.end(), [](const auto& a, const auto& b) {
    return a->graph().KernelName() < b->graph().KernelName();
  });
  for (const auto& c : compiled) {
    std::printf("  %s  %s %s, %zu inputs, %zu outputs, key %016llx, %.1f us\n",
                c->graph().KernelName().c_str(), DeviceTypeName(c->device_type()).data(),
                c->graph().domain.ToString().c_str(), c->graph().inputs.size(),
                c->graph().outputs.size(), static_cast<unsigned long long>(c->content_hash()),
                static_cast<double>(c->compile_ns()) / 1e3);
  }
}

HostTensor FromNpy(io::NpyArray array) { return HostTensor{array.dtype, array.shape, array.bytes}; }
io::NpyArray ToNpy(const HostTensor& t) { return io::NpyArray{t.dtype, t.shape, t.bytes}; }

// Up to 8 values; floats with the digits that round-trip (9 for f32, 17 for f64), so a
// printed loss can be compared with another run's exactly.
std::string Preview(const HostTensor& t) {
  std::vector<std::string> items;
  const size_t n = std::min<size_t>(t.bytes.size() / SizeOf(t.dtype), 8);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DataType::kF32:
        items.push_back(absl::StrFormat("%.9g", t.ToVector<float>()[i]));
        break;
      case DataType::kF64:
        items.push_back(absl::StrFormat("%.17g", t.ToVector<double>()[i]));
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

// Under --data-parallel, joins the launcher's world first (tools/data_parallel_setup.h) and
// notes this process's rank in `options`.
absl::StatusOr<eager::Context> NewContext(absl::string_view command, CommonOptions& options) {
  eager::ContextOptions context_options;
  if (options.data_parallel) {
    SLUICE_ASSIGN_OR_RETURN(context_options.runtime.world,
                            JoinWorld(command, options.ccl_timeout_s));
    options.rank = context_options.runtime.world->rank();
    options.ranks = context_options.runtime.world->size();
    if (!options.trace.empty()) options.trace = PerRankPath(options.trace, options.rank);
  }
  context_options.runtime.num_sim_devices = 2;
  context_options.runtime.enable_cuda = options.device.type() == DeviceType::kCuda;
  context_options.runtime.cpu.intra_op_threads = options.intra_op_threads;
  context_options.vm.check_sync = options.check_sync;
  context_options.vm.record_path = options.record;
  return eager::Context::Create(context_options);
}

// The options `run` and `demo` share.
void AddCommonOptions(OptionParser& parser, const char* steps_help, CommonOptions* o) {
  parser.AddInteger("--steps", "N", steps_help, 1, INT_MAX, &o->steps);
  parser.AddValue("--device", "D", "where ops run: cpu, sim:N or cuda:N", "cpu",
                  [o](absl::string_view text) -> absl::Status {
                    SLUICE_ASSIGN_OR_RETURN(o->device, Device::Parse(text));
                    return absl::OkStatus();
                  });
  parser.AddInteger("--streams", "N",
                    "spread ops over N compute streams (on cpu each stream has a worker thread "
                    "of its own)",
                    1, INT_MAX, &o->streams);
  parser.AddInteger("--intra-op-threads", "N",
                    "threads that may split one large cpu kernel (matmul, big elementwise loops, "
                    "compiled subgraphs), its worker included; 0 = the host's hardware threads, "
                    "1 = none",
                    0, 4096, &o->intra_op_threads);
  parser.AddString("--trace", "FILE", "write the last step's Chrome trace JSON (Perfetto)",
                   &o->trace);
  parser.AddFlag("--sync-check", "check every access against happens-before", &o->check_sync);
  parser.AddFlag("--no-compile",
                 "run every op as its own kernel (no subgraph compilation: groups of elementwise "
                 "ops are otherwise fused into one compiled kernel each)",
                 &o->no_compile);
  parser.AddFlag("--no-inplace",
                 "give every op output storage of its own (no in-place pass: an output otherwise "
                 "takes the storage of an input that dies at its op, where the op allows it)",
                 &o->no_inplace);
  parser.AddFlag("--addto",
                 "accumulate a gradient that several ops contribute to in one buffer (the add-to "
                 "pass: the later contributors add into it and its sum op goes; off by default, "
                 "as Paddle's enable_addto)",
                 &o->addto);
  parser.AddFlag("--no-addto", "leave every gradient sum as it is (the default)", &o->no_addto);
  parser.AddString("--record", "FILE",
                   "write every VM instruction to FILE (replay it with `sluice replay FILE "
                   "--ops standard`)",
                   &o->record);
  parser.AddFlag("--data-parallel",
                 "train on the ranks an MPI launcher started (mpirun -np N sluice ...): each "
                 "rank takes its share of every feed's first dimension, gradients are averaged "
                 "across ranks in buckets on the ccl stream, fetched values are averaged, and "
                 "only rank 0 prints; --trace writes one file per rank (NAME.rankR.json)",
                 &o->data_parallel);
  parser.AddDouble("--ccl-timeout", "SECONDS",
                   "with --data-parallel: how long a collective waits for its peers before the "
                   "run fails (a dead peer on this host is noticed at once)",
                   0.001, 86400, &o->ccl_timeout_s);
  parser.AddInteger("--bucket-bytes", "N",
                    "with --data-parallel: gradients per all_reduce call, by bytes", int64_t{1},
                    std::numeric_limits<int64_t>::max(), &o->bucket_bytes);
}

// The executor options both commands use, for executors of `context`.
absl::StatusOr<framework::ExecutorOptions> MakeExecutorOptions(const CommonOptions& common,
                                                               std::vector<std::string> averaged,
                                                               eager::Context& context) {
  framework::ExecutorOptions options;
  options.interpreter.device = common.device;
  options.interpreter.compute_streams = common.streams;
  options.interpreter.compile_subgraphs = !common.no_compile;
  options.interpreter.inplace = !common.no_inplace;
  options.interpreter.addto = common.addto && !common.no_addto;
  if (common.data_parallel) {
    framework::DataParallelOptions data_parallel;
    data_parallel.bucket_bytes = common.bucket_bytes;
    data_parallel.averaged = std::move(averaged);
    const ep::ccl::World& world = context.runtime()->world();
    SLUICE_ASSIGN_OR_RETURN(options.transform,
                            framework::MakeDataParallelTransform(&context.registry(), world.rank(),
                                                                 world.size(), data_parallel));
  }
  return options;
}

}  // namespace

// --- sluice run ---

// What `sluice run` reads from its command line besides the common options.
struct RunArgs {
  std::string program_path, startup_path, load_dir, save_dir;
  std::vector<std::pair<std::string, std::string>> feed_files;
  std::vector<std::string> fetches;
  bool load_partial = false;
  framework::onnx::OnnxImportOptions onnx_options;
};

// The program `sluice run` runs: a program file, or an ONNX model imported (tools/
// onnx_command.h), which renames `feeds` to their variables, sets `fetch_vars` and gives the
// values of its persistables.
struct LoadedRunProgram {
  framework::ir::ProgramDesc program;
  std::vector<std::string> fetch_vars;
  std::vector<std::pair<std::string, HostTensor>> persistables;
};

absl::StatusOr<LoadedRunProgram> LoadRunProgram(RunArgs& args, const ops::OpRegistry* registry,
                                                framework::Feeds* feeds) {
  LoadedRunProgram loaded;
  if (!IsOnnxPath(args.program_path)) {
    SLUICE_ASSIGN_OR_RETURN(loaded.program, framework::ir::ProgramDesc::Load(args.program_path));
    loaded.fetch_vars = args.fetches;
    return loaded;
  }
  SLUICE_ASSIGN_OR_RETURN(
      OnnxRunProgram run,
      ImportForRun(args.program_path, registry, args.onnx_options, feeds, &args.fetches));
  PrintOnnxImport(run.imported);
  loaded.program = std::move(run.imported.program);
  loaded.fetch_vars = std::move(run.fetch_vars);
  loaded.persistables = std::move(run.imported.persistables);
  return loaded;
}

void AddRunOptions(OptionParser& parser, RunArgs* args, CommonOptions* common) {
  parser.AddPositional("PROGRAM",
                       "the program file to run, or an ONNX model (MODEL.onnx: feeds and "
                       "fetches by ONNX name; every graph output is fetched when none is named)",
                       &args->program_path);
  parser.AddString("--startup", "FILE", "run this program once first (parameter initializers)",
                   &args->startup_path);
  parser.AddRepeated(
      "--feed", "NAME=FILE", "feed variable NAME from a NumPy .npy file",
      [args](absl::string_view text) -> absl::Status {
        const size_t eq = text.find('=');
        if (eq == absl::string_view::npos || eq == 0) {
          return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not NAME=FILE.npy"));
        }
        args->feed_files.emplace_back(std::string(text.substr(0, eq)),
                                      std::string(text.substr(eq + 1)));
        return absl::OkStatus();
      });
  parser.AddRepeated("--fetch", "NAME", "print variable NAME after every step",
                     [args](absl::string_view text) {
                       args->fetches.emplace_back(text);
                       return absl::OkStatus();
                     });
  AddCommonOptions(parser, "run the program N times", common);
  parser.AddString("--load", "DIR",
                   "before running, read DIR/NAME.npy into each persistable variable NAME of the "
                   "program (after --startup runs); every file must be there (the error lists "
                   "the missing ones)",
                   &args->load_dir);
  parser.AddFlag("--load-partial",
                 "with --load: read the files DIR holds and leave every other persistable "
                 "variable as --startup made it (listed as left as initialized)",
                 &args->load_partial);
  parser.AddString("--save", "DIR",
                   "after the last step, write every persistable variable as DIR/NAME.npy, "
                   "replacing the whole set at once (written beside DIR, then swapped in: a "
                   "killed save leaves the old set); other files in DIR are kept",
                   &args->save_dir);
  AddOnnxShapeOptions(parser, &args->onnx_options);
}

// --startup, then --load, into `scope`.
absl::Status RunStartupAndLoad(framework::Executor& executor,
                               const framework::ir::ProgramDesc& program, const RunArgs& args,
                               framework::Scope* scope) {
  if (!args.startup_path.empty()) {
    absl::StatusOr<framework::ir::ProgramDesc> startup =
        framework::ir::ProgramDesc::Load(args.startup_path);
    if (!startup.ok()) return startup.status();
    absl::StatusOr<framework::RunResult> init = executor.Run(*startup, {}, {}, scope);
    if (!init.ok()) return init.status();
  }
  if (!args.load_dir.empty()) {
    absl::StatusOr<io::LoadReport> loaded =
        io::LoadPersistables(executor, program, scope, args.load_dir,
                             io::LoadOptions{.allow_missing = args.load_partial});
    if (!loaded.ok()) return loaded.status();
    if (args.load_partial) {
      std::printf("loaded %zu persistable variables from %s; %zu left as initialized%s%s\n",
                  loaded->loaded.size(), args.load_dir.c_str(), loaded->skipped.size(),
                  loaded->skipped.empty() ? "" : ": ",
                  absl::StrJoin(loaded->skipped, ", ").c_str());
    }
  }
  return absl::OkStatus();
}

// The summary after the steps; kExitFailure when the sync check found a violation.
int PrintRunSummary(const CommonOptions& common, eager::Context& context,
                    framework::Executor& executor,
                    const absl::StatusOr<framework::LoweringStats>& lowering,
                    const framework::StepStats& last) {
  std::printf("summary: %d steps on %s; last %s\n", common.steps, common.device.ToString().c_str(),
              last.ToString().c_str());
  if (!common.no_compile) PrintCompilation(executor, lowering);
  if (lowering.ok()) {
    std::printf(
        "memory: peak temporary bytes %lld (the plan's bound), %lld in-place reuses, "
        "%lld storage hand-offs, %lld gradient sums added in place\n",
        static_cast<long long>(lowering->peak_temporary_bytes),
        static_cast<long long>(lowering->inplace_reuses),
        static_cast<long long>(lowering->storage_handoffs),
        static_cast<long long>(lowering->addto_sums));
  }
  const vm::VmStats vm_stats = context.vm()->stats();
  if (vm_stats.parallel_regions > 0) {
    std::printf("intra-op: %lld kernel regions split into %lld chunks (%lld on helper threads)\n",
                static_cast<long long>(vm_stats.parallel_regions),
                static_cast<long long>(vm_stats.parallel_chunks),
                static_cast<long long>(vm_stats.parallel_helped_chunks));
  }
  if (!common.trace.empty()) std::printf("trace: %s\n", common.trace.c_str());
  if (common.check_sync) {
    const int64_t violations = context.vm()->sync_checker()->violation_count();
    std::printf("sync check: %lld violations\n", static_cast<long long>(violations));
    if (violations > 0) {
      // Names the first: an unordered access, or an undeclared alias (op and operands).
      std::printf("%s\n", context.vm()->sync_checker()->status().ToString().c_str());
      return kExitFailure;
    }
  }
  return kExitOk;
}

int RunMain(int argc, char** argv) {
  CommonOptions common;
  RunArgs args;
  OptionParser parser(
      "run",
      "Runs a program file (docs/program-format.md) N times and prints each step's\n"
      "fetched values and a summary.\n",
      "Exit status: 0 on success, 1 when the run failed (a file could not be read, a step\n"
      "failed, or --sync-check found a violation), 2 for bad options.\n");
  AddRunOptions(parser, &args, &common);
  if (std::optional<int> exit = ParseCommandLine(parser, argc, argv)) return *exit;
  if (args.load_partial && args.load_dir.empty()) {
    std::fprintf(stderr, "sluice run: --load-partial needs --load DIR\n");
    return kExitUsage;
  }

  framework::Feeds feeds;
  for (const auto& [name, path] : args.feed_files) {
    absl::StatusOr<io::NpyArray> array = io::ReadNpy(path);
    if (!array.ok()) return ReportFailure("run", array.status());
    feeds.emplace_back(name, FromNpy(*std::move(array)));
  }
  absl::StatusOr<eager::Context> context = NewContext("run", common);
  if (!context.ok()) return ReportFailure("run", context.status());
  absl::StatusOr<LoadedRunProgram> loaded = LoadRunProgram(args, &context->registry(), &feeds);
  if (!loaded.ok()) return ReportFailure("run", loaded.status());
  const framework::ir::ProgramDesc* program = &loaded->program;
  // SIGINT/SIGTERM cancel the work in flight and end the run with a message (a data-parallel
  // run has the world's own handling: data_parallel_setup.h). Declared after the context,
  // so it is gone before the VM its action cancels.
  std::unique_ptr<InterruptWatcher> watcher;
  if (!common.data_parallel) {
    absl::StatusOr<std::unique_ptr<InterruptWatcher>> installed = InterruptWatcher::Install();
    if (!installed.ok()) return ReportFailure("run", installed.status());
    watcher = *std::move(installed);
    vm::VirtualMachine* machine = context->vm();
    watcher->SetAction([machine] { (void)machine->Shutdown(vm::ShutdownMode::kCancel); });
  }
  // A failure caused by the interrupt is reported as the interrupt.
  const auto fail = [&](const absl::Status& status) {
    if (watcher != nullptr && watcher->signal() != 0) {
      std::fprintf(stderr, "sluice run: %s\n", watcher->Message().c_str());
      return 128 + watcher->signal();
    }
    return ReportFailure("run", status);
  };
  absl::StatusOr<framework::ExecutorOptions> executor_options =
      MakeExecutorOptions(common, loaded->fetch_vars, *context);
  if (!executor_options.ok()) return fail(executor_options.status());
  framework::Executor executor(&context->registry(), context->vm(), *executor_options);
  framework::Scope scope;
  if (absl::Status ready = RunStartupAndLoad(executor, *program, args, &scope); !ready.ok()) {
    return fail(ready);
  }
  for (const auto& [name, value] : loaded->persistables) {  // an ONNX model's initializers
    if (absl::Status set = io::WriteVariable(executor, &scope, name, value); !set.ok()) {
      return fail(set);
    }
  }
  framework::StepStats last;
  absl::StatusOr<framework::LoweringStats> lowering = absl::NotFoundError("no step ran");
  for (int step = 1; step <= common.steps; ++step) {
    framework::RunOptions run_options;
    if (step == common.steps) run_options.trace_path = common.trace;
    absl::StatusOr<framework::RunResult> result =
        executor.Run(*program, feeds, loaded->fetch_vars, &scope, run_options);
    if (!result.ok()) return fail(result.status());
    std::printf("step %d", step);
    for (size_t f = 0; f < args.fetches.size(); ++f) {
      std::printf("  %s=%s", args.fetches[f].c_str(), Preview(result->fetches[f]).c_str());
    }
    std::printf("\n");
    last = result->stats;
    lowering = executor.LastLowering();  // the program's build (--save builds another)
  }
  if (!args.save_dir.empty() && common.rank == 0) {  // the replicas hold equal parameters
    if (absl::Status saved = io::SavePersistables(executor, *program, &scope, args.save_dir);
        !saved.ok()) {
      return fail(saved);
    }
    std::printf("saved %zu persistable variables to %s\n", io::PersistableVars(*program).size(),
                args.save_dir.c_str());
  }
  // Shut the VM down while the scope and the lowered graphs still hold their blobs, so a
  // recording ends with the checksums of every live tensor.
  if (absl::Status shut = context->vm()->Shutdown(); !shut.ok()) return fail(shut);
  return PrintRunSummary(common, *context, executor, lowering, last);
}

// --- sluice demo ---

namespace {

// The demo's parameters and batch as eager tensors on `device`.
struct DemoTensors {
  eager::Tensor w, b, x, y;
};
absl::StatusOr<DemoTensors> UploadDemo(eager::Context& ctx, Device device,
                                       const framework::HostTensor& weight,
                                       const framework::HostTensor& bias) {
  auto upload = [&](const framework::HostTensor& h) {
    return ctx.FromBytes(h.dtype, h.shape, h.bytes, device);
  };
  DemoTensors t;
  SLUICE_ASSIGN_OR_RETURN(t.w, upload(weight));
  SLUICE_ASSIGN_OR_RETURN(t.b, upload(bias));
  SLUICE_ASSIGN_OR_RETURN(t.x, upload(framework::LinearRegressionInput()));
  SLUICE_ASSIGN_OR_RETURN(t.y, upload(framework::LinearRegressionTarget()));
  return t;
}

// The demo model trained eagerly for `steps` steps from `demo`'s parameters (the static
// startup program's values): eager::nn::Linear, nn::MseLoss through the fn:: front end,
// autograd::Backward, eager::Adam(0.01). The loss of each step.
absl::StatusOr<std::vector<float>> TrainDemoEagerly(const DemoTensors& demo, int steps) {
  SLUICE_ASSIGN_OR_RETURN(eager::nn::Linear linear,
                          eager::nn::Linear::FromParameters(demo.w, demo.b));
  eager::AdamOptions adam_options;
  adam_options.learning_rate = 0.01;
  SLUICE_ASSIGN_OR_RETURN(eager::Adam adam, eager::Adam::Create(linear.parameters(), adam_options));
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    SLUICE_ASSIGN_OR_RETURN(eager::Tensor prediction, linear(demo.x));
    SLUICE_ASSIGN_OR_RETURN(framework::Value loss,
                            nn::MseLoss(framework::Value(prediction), framework::Value(demo.y)));
    SLUICE_RETURN_IF_ERROR(autograd::Backward(loss.tensor()));
    SLUICE_RETURN_IF_ERROR(adam.Step());
    adam.ZeroGrad();
    SLUICE_ASSIGN_OR_RETURN(std::vector<float> value, loss.tensor().ToVector<float>());
    losses.push_back(value[0]);
  }
  return losses;
}

// The demo model's step as a graph called from eager (framework/models/
// linear_regression_graph.h) for `steps` steps from `demo`'s parameters: one call per
// step, the losses read once at the end. The loss of each step.
absl::StatusOr<std::vector<float>> TrainDemoAsGraph(eager::Context& ctx, const DemoTensors& demo,
                                                    int steps) {
  SLUICE_ASSIGN_OR_RETURN(
      framework::graph::Graph step,
      framework::graph::Graph::Create(ctx, framework::LinearRegressionStep(demo.w, demo.b, 0.01),
                                      {.name = "step"}));
  std::vector<eager::Tensor> loss_tensors;
  for (int i = 0; i < steps; ++i) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<eager::Tensor> out, step({demo.x, demo.y}));
    loss_tensors.push_back(out[0]);
  }
  std::vector<float> losses;
  for (const eager::Tensor& t : loss_tensors) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<float> value, t.ToVector<float>());
    losses.push_back(value[0]);
  }
  return losses;
}

}  // namespace

// --write-programs: the demo's programs and data, for `sluice run`.
absl::Status WriteDemoPrograms(const framework::LinearRegression& model,
                               const std::string& write_dir) {
  std::error_code ec;
  std::filesystem::create_directories(write_dir, ec);
  const std::filesystem::path dir(write_dir);
  absl::Status status = model.main->desc().Save((dir / "main.program").string());
  if (status.ok()) status = model.startup->desc().Save((dir / "startup.program").string());
  if (status.ok())
    status = io::WriteNpy((dir / "x.npy").string(), ToNpy(framework::LinearRegressionInput()));
  if (status.ok())
    status = io::WriteNpy((dir / "y.npy").string(), ToNpy(framework::LinearRegressionTarget()));
  if (!status.ok()) return status;
  std::printf("wrote %s/{main.program,startup.program,x.npy,y.npy}; loss variable: %s\n",
              write_dir.c_str(), model.loss.c_str());
  return absl::OkStatus();
}

// Each step's loss: printed for the first five, every tenth and the last step; whether it
// fell every step.
struct DemoLosses {
  float first = 0, previous = 0, loss = 0;
  bool falling = true;
  void Add(int step, int steps, float value) {
    loss = value;
    if (step == 1) first = loss;
    if (step > 1 && loss >= previous) falling = false;
    previous = loss;
    if (step <= 5 || step % 10 == 0 || step == steps)
      std::printf("step %3d  loss %.6f\n", step, loss);
  }
};

// What `sluice demo` reads from its command line besides the common options.
struct DemoArgs {
  std::string write_dir;
  bool eager_mode = false;
  bool graph_mode = false;
};

// Parses and checks demo's options; an exit status when the command ends here (--help,
// bad options).
std::optional<int> ParseDemoOptions(int argc, char** argv, DemoArgs* args, CommonOptions* common) {
  OptionParser parser(
      "demo",
      "Builds the demo model (Linear(16->1) + MSELoss, trained with Adam on a fixed\n"
      "16x16 batch), trains it for N steps and prints the loss.\n",
      "Exit status: 0 when the loss fell every step, 1 when it did not or the run failed,\n"
      "2 for bad options.\n");
  AddCommonOptions(parser, "training steps", common);
  parser.AddString("--write-programs", "DIR",
                   "also write main.program, startup.program, x.npy and y.npy there, for "
                   "`sluice run`",
                   &args->write_dir);
  parser.AddFlag("--eager",
                 "train eagerly instead (autograd::Backward and eager::Adam from the static "
                 "program's initial values: the same losses, bit for bit on one device)",
                 &args->eager_mode);
  parser.AddFlag("--graph",
                 "train with the step as a graph called from eager code (one instruction per "
                 "step on the launcher stream; eager parameters updated in place) from the "
                 "static program's initial values: the same losses",
                 &args->graph_mode);
  if (std::optional<int> exit = ParseCommandLine(parser, argc, argv)) return *exit;
  if (args->eager_mode && args->graph_mode) {
    std::fprintf(stderr, "sluice demo: --eager and --graph exclude each other\n");
    return kExitUsage;
  }
  const char* const mode_flag = args->eager_mode ? "--eager" : "--graph";
  if ((args->eager_mode || args->graph_mode) && (common->streams != 1 || !common->trace.empty())) {
    std::fprintf(stderr,
                 "sluice demo: --streams and --trace apply to the static program, not to %s\n",
                 mode_flag);
    return kExitUsage;
  }
  if ((args->eager_mode || args->graph_mode) && common->data_parallel) {
    std::fprintf(stderr, "sluice demo: --data-parallel applies to the static program, not to %s\n",
                 mode_flag);
    return kExitUsage;
  }
  return std::nullopt;
}

int DemoMain(int argc, char** argv) {
  CommonOptions common;
  common.steps = 100;
  DemoArgs args;
  if (std::optional<int> exit = ParseDemoOptions(argc, argv, &args, &common)) return *exit;
  const std::string& write_dir = args.write_dir;
  const bool eager_mode = args.eager_mode;
  const bool graph_mode = args.graph_mode;
  const bool from_eager = eager_mode || graph_mode;
  absl::StatusOr<eager::Context> context = NewContext("demo", common);
  if (!context.ok()) return ReportFailure("demo", context.status());
  absl::StatusOr<framework::LinearRegression> model =
      framework::BuildLinearRegression(&context->registry());
  if (!model.ok()) return ReportFailure("demo", model.status());
  if (!write_dir.empty()) {
    if (absl::Status written = WriteDemoPrograms(*model, write_dir); !written.ok()) {
      return ReportFailure("demo", written);
    }
  }
  absl::StatusOr<framework::ExecutorOptions> executor_options =
      MakeExecutorOptions(common, {model->loss}, *context);
  if (!executor_options.ok()) return ReportFailure("demo", executor_options.status());
  framework::Executor executor(&context->registry(), context->vm(), *executor_options);
  framework::Scope scope;
  absl::StatusOr<framework::RunResult> init = executor.Run(model->startup->desc(), {}, {}, &scope);
  if (!init.ok()) return ReportFailure("demo", init.status());
  const framework::Feeds feeds = {{model->x, framework::LinearRegressionInput()},
                                  {model->y, framework::LinearRegressionTarget()}};
  std::printf("demo: Linear(16->1) + MSELoss, Adam(lr=0.01), 16x16 batch, %d steps on %s%s%s\n",
              common.steps, common.device.ToString().c_str(),
              eager_mode ? ", eager" : (graph_mode ? ", as a graph called from eager" : ""),
              common.data_parallel
                  ? absl::StrCat(", data parallel across ", common.ranks, " ranks").c_str()
                  : "");
  DemoLosses losses;
  framework::StepStats last;
  // The loss of each eager step (empty when static).
  absl::StatusOr<std::vector<float>> eager_losses = std::vector<float>();
  if (from_eager) {
    absl::StatusOr<framework::RunResult> params =
        executor.Run(model->startup->desc(), {}, {model->weight, model->bias}, &scope);
    if (!params.ok()) return ReportFailure("demo", params.status());
    absl::StatusOr<DemoTensors> demo =
        UploadDemo(*context, common.device, params->fetches[0], params->fetches[1]);
    if (!demo.ok()) return ReportFailure("demo", demo.status());
    eager_losses = eager_mode ? TrainDemoEagerly(*demo, common.steps)
                              : TrainDemoAsGraph(*context, *demo, common.steps);
    if (!eager_losses.ok()) return ReportFailure("demo", eager_losses.status());
  }
  for (int step = 1; step <= common.steps; ++step) {
    if (from_eager) {
      losses.Add(step, common.steps, (*eager_losses)[static_cast<size_t>(step - 1)]);
      continue;
    }
    framework::RunOptions run_options;
    if (step == common.steps) run_options.trace_path = common.trace;
    absl::StatusOr<framework::RunResult> result =
        executor.Run(model->main->desc(), feeds, {model->loss}, &scope, run_options);
    if (!result.ok()) return ReportFailure("demo", result.status());
    losses.Add(step, common.steps, result->fetches[0].ToVector<float>()[0]);
    last = result->stats;
  }
  if (absl::Status shut = context->vm()->Shutdown(); !shut.ok()) return ReportFailure("demo", shut);
  std::printf("loss %.6f -> %.6f (%s)%s%s\n", losses.first, losses.loss,
              losses.falling ? "fell every step" : "did NOT fall every step",
              from_eager ? "" : "; last ", from_eager ? "" : last.ToString().c_str());
  if (common.check_sync) {
    std::printf("sync check: %lld violations\n",
                static_cast<long long>(context->vm()->sync_checker()->violation_count()));
  }
  return losses.falling ? 0 : 1;
}

}  // namespace sluice::tools
