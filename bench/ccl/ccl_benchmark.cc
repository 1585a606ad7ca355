// Collectives under mpirun: Sluice's all_reduce (an eager op on the cpu ccl stream, with the
// default options: the ranks agree on every call first) beside raw MPI_Allreduce of the same
// buffers, in one run.
//
//   mpirun -np 2 --oversubscribe build/bench/ccl_benchmarks --benchmark_repetitions=5 \
//     --benchmark_report_aggregates_only=true
//
// Every rank runs the same benchmarks with the same fixed iteration counts (an adaptive count
// would differ between ranks and leave one waiting); only rank 0 reports.
//   BM_Mpi_Allreduce/B           MPI_Allreduce of B bytes of f32 (out of place), per call
//   BM_Mpi_Iallreduce/B          MPI_Iallreduce then MPI_Wait: the call Sluice makes
//   BM_Ccl_AllReduce/B           eager AllReduce then Context::Sync, per call
//   BM_Ccl_AllReduceStream/B     64 eager AllReduce calls back to back, one wait (items:
//                                calls)
//   BM_DataParallel_GatedMlpStep/dp  a training step, one process (dp 0) or data parallel
// With --no-check-calls first, the Sluice runs skip the ranks' agreement on each call (a
// variant, not the default).
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/status.h"
#include "ep/ccl/world.h"
#include "framework/distributed/data_parallel.h"
#include "framework/eager/collectives.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/models/gated_mlp.h"

namespace sluice::ccl_benchmark {
namespace {

// --no-check-calls (before the benchmark flags): the world skips the agreement check, a
// labelled variant beside the default.
bool check_calls = true;

std::shared_ptr<ep::ccl::World> TheWorld() {
  static std::shared_ptr<ep::ccl::World> world = [] {
    ep::ccl::WorldOptions options;
    options.check_calls = check_calls;
    absl::StatusOr<std::shared_ptr<ep::ccl::World>> w = ep::ccl::World::FromEnvironment(options);
    SLUICE_CHECK(w.ok());
    return *w;
  }();
  return world;
}

eager::Context& TheContext() {
  static eager::Context* ctx = [] {
    eager::ContextOptions options;
    options.runtime.world = TheWorld();
    absl::StatusOr<eager::Context> created = eager::Context::Create(options);
    SLUICE_CHECK(created.ok());
    return new eager::Context(*std::move(created));
  }();
  return *ctx;
}

int64_t Iterations(int64_t bytes) {
  return std::clamp<int64_t>((int64_t{1} << 27) / std::max<int64_t>(bytes, 4096), 10, 4000);
}

void BM_Mpi_Allreduce(benchmark::State& state) {
  const int64_t n = std::max<int64_t>(state.range(0) / 4, 1);
  std::vector<float> in(n, 1.0f), out(n);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  for (auto _ : state) {
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm);
    benchmark::DoNotOptimize(out.data());
  }
  MPI_Comm_free(&comm);
  state.SetBytesProcessed(state.iterations() * n * 4);
}

// The call Sluice makes (nonblocking, then polled), for comparison: Open MPI may pick
// another algorithm for it than for the blocking call.
void BM_Mpi_Iallreduce(benchmark::State& state) {
  const int64_t n = std::max<int64_t>(state.range(0) / 4, 1);
  std::vector<float> in(n, 1.0f), out(n);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  for (auto _ : state) {
    MPI_Request request;
    MPI_Iallreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    benchmark::DoNotOptimize(out.data());
  }
  MPI_Comm_free(&comm);
  state.SetBytesProcessed(state.iterations() * n * 4);
}

void RunSluice(benchmark::State& state, int per_wait) {
  const int64_t n = std::max<int64_t>(state.range(0) / 4, 1);
  eager::Context& ctx = TheContext();
  absl::StatusOr<eager::Tensor> x =
      ctx.FromVector<float>(std::vector<float>(n, 1.0f), Shape({n}), Device());
  SLUICE_CHECK(x.ok());
  SLUICE_CHECK(ctx.Sync().ok());
  for (auto _ : state) {
    absl::StatusOr<eager::Tensor> out;
    for (int i = 0; i < per_wait; ++i) out = eager::AllReduce(*x);
    SLUICE_CHECK(out.ok());
    SLUICE_CHECK(ctx.Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * per_wait);
  state.SetBytesProcessed(state.iterations() * per_wait * n * 4);
}

void BM_Ccl_AllReduce(benchmark::State& state) { RunSluice(state, 1); }
void BM_Ccl_AllReduceStream(benchmark::State& state) { RunSluice(state, 64); }

// One training step of a gated MLP (framework/models/gated_mlp.h: batch 128, 128 features,
// 4 hidden layers of 512, about 0.85 M parameters) on cpu through a PreparedRun: dp = 0 one
// process on the whole batch (run it with -np 1), dp = 1 data parallel over the world's
// ranks, each on its share, gradients averaged in 1 MiB buckets (the default). With
// --trace-step=PATH, each rank then writes one more step's trace to PATH.rankR.json.
std::string trace_step;

void BM_DataParallel_GatedMlpStep(benchmark::State& state) {
  const bool data_parallel = state.range(0) != 0;
  eager::Context& ctx = TheContext();
  framework::GatedMlpOptions model_options;
  model_options.batch = 128;
  model_options.features = 128;
  model_options.hidden = 512;
  model_options.hidden_layers = 4;
  absl::StatusOr<framework::GatedMlp> model =
      framework::BuildGatedMlp(&ctx.registry(), model_options);
  SLUICE_CHECK(model.ok());
  framework::ExecutorOptions options;
  if (data_parallel) {
    const ep::ccl::World& world = ctx.runtime()->world();
    auto transform =
        framework::MakeDataParallelTransform(&ctx.registry(), world.rank(), world.size(), {});
    SLUICE_CHECK(transform.ok());
    options.transform = *std::move(transform);
  }
  framework::Executor executor(&ctx.registry(), ctx.vm(), options);
  framework::Scope scope;
  SLUICE_CHECK(executor.Run(model->startup->desc(), {}, {}, &scope).ok());
  const framework::Feeds feeds = {{model->x, framework::GatedMlpInput(model_options)},
                                  {model->y, framework::GatedMlpTarget(model_options)}};
  absl::StatusOr<framework::PreparedRun> step =
      executor.Prepare(model->main->desc(), {model->x, model->y}, {model->loss}, &scope);
  SLUICE_CHECK(step.ok());
  for (auto _ : state) SLUICE_CHECK(executor.Run(*step, feeds).ok());
  state.counters["ops"] = static_cast<double>(step->lowering().ops);
  state.SetItemsProcessed(state.iterations());
  if (!trace_step.empty() && data_parallel) {
    framework::RunOptions run_options;
    const std::string base = trace_step.substr(0, trace_step.rfind('.'));
    run_options.trace_path = base + ".rank" + std::to_string(TheWorld()->rank()) + ".json";
    SLUICE_CHECK(executor.Run(*step, feeds, run_options).ok());
  }
}

// The other ranks run every benchmark too, and report nothing.
class QuietReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace
}  // namespace sluice::ccl_benchmark

int main(int argc, char** argv) {
  using namespace sluice::ccl_benchmark;  // NOLINT
  if (argc > 1 && std::string(argv[1]) == "--no-check-calls") {
    check_calls = false;
    argv[1] = argv[0];
    --argc;
    ++argv;
  }
  const int rank = TheWorld()->rank();
  for (int64_t bytes :
       {int64_t{4}, int64_t{64}, int64_t{1} << 10, int64_t{4} << 10, int64_t{64} << 10,
        int64_t{1} << 20, int64_t{16} << 20, int64_t{64} << 20}) {
    const int64_t iterations = Iterations(bytes);
    benchmark::RegisterBenchmark("BM_Mpi_Allreduce", BM_Mpi_Allreduce)
        ->Arg(bytes)
        ->Iterations(iterations)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_Mpi_Iallreduce", BM_Mpi_Iallreduce)
        ->Arg(bytes)
        ->Iterations(iterations)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_Ccl_AllReduce", BM_Ccl_AllReduce)
        ->Arg(bytes)
        ->Iterations(iterations)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_Ccl_AllReduceStream", BM_Ccl_AllReduceStream)
        ->Arg(bytes)
        ->Iterations(std::max<int64_t>(iterations / 64, 10))
        ->UseRealTime();
  }
  for (int64_t dp : {0, 1}) {
    benchmark::RegisterBenchmark("BM_DataParallel_GatedMlpStep", BM_DataParallel_GatedMlpStep)
        ->Arg(dp)
        ->Iterations(20)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--trace-step=", 0) == 0) {
      trace_step = arg.substr(std::string("--trace-step=").size());
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    QuietReporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  return 0;
}
