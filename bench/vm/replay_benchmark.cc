// Replay throughput: recorded instructions re-executed per second.
//
//   BM_Replay_Noop           a recording of 2 fills and 4096 eager no-op OpCalls on the cpu stream
//                            (each reads x, writes y) is parsed once; every iteration
//                            replays it (Replayer::Run: submit in chains, final sync,
//                            checksum compare). items = recorded instructions.
//   BM_Replay_Noop_Parse     parsing that recording (ParseRecord) alone, items = lines.
// Argument: 0 dedicated scheduler thread, 1 scheduling on the calling threads.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "benchmark/benchmark.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "ops/kernel_registry.h"
#include "ops/stress_kernels.h"
#include "vm/instructions_builder.h"
#include "vm/record_reader.h"
#include "vm/replayer.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::replay_benchmark {
namespace {

constexpr int kRecordedOps = 4096;

std::unique_ptr<ep::Runtime> NewRuntime() {
  ep::RuntimeOptions options;
  options.num_sim_devices = 1;
  options.enable_cuda = false;
  return ep::Runtime::Create(options).value();
}

// Records kRecordedOps no-op calls and returns the file's text.
std::string RecordNoops() {
  const std::string path = "/tmp/sluice_bench_replay_noop.rec";
  {
    std::unique_ptr<ep::Runtime> runtime = NewRuntime();
    VmOptions options;
    options.record_path = path;
    std::unique_ptr<VirtualMachine> vm = VirtualMachine::Create(runtime.get(), options).value();
    ops::KernelRegistry kernels;
    SLUICE_CHECK(ops::RegisterStressKernels(&kernels).ok());
    InstructionsBuilder builder(vm.get());
    Stream* cpu = vm->GetStream("cpu").value();
    BlobRef x = vm->NewBlob(cpu, DataType::kF32, Shape({1})).value();
    BlobRef y = vm->NewBlob(cpu, DataType::kF32, Shape({1})).value();
    const OpKernel* noop = kernels.Find("noop").value();
    // Defined contents, so that the final checksums are worth comparing.
    const OpKernel* fill = kernels.Find("fill").value();
    SLUICE_CHECK(builder.Call(*fill, {}, {x}, AttrMap().Set("value", 1.0), cpu).ok());
    SLUICE_CHECK(builder.Call(*fill, {}, {y}, AttrMap().Set("value", 2.0), cpu).ok());
    for (int i = 0; i < kRecordedOps; ++i) {
      SLUICE_CHECK(builder.Call(*noop, {x}, {y}, nullptr, cpu).ok());
    }
    SLUICE_CHECK(vm->Shutdown().ok());
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return text.str();
}

const std::string& NoopRecording() {
  static const std::string* text = new std::string(RecordNoops());
  return *text;
}

void BM_Replay_Noop(benchmark::State& state) {
  const RecordedProgram program = ParseRecord(NoopRecording(), "noop.rec").value();
  std::unique_ptr<ep::Runtime> runtime = NewRuntime();
  VmOptions options;
  options.scheduling = state.range(0) == 0 ? VmOptions::Scheduling::kDedicatedThread
                                           : VmOptions::Scheduling::kCallerThread;
  std::unique_ptr<VirtualMachine> vm = VirtualMachine::Create(runtime.get(), options).value();
  ops::KernelRegistry kernels;
  SLUICE_CHECK(ops::RegisterStressKernels(&kernels).ok());
  std::unique_ptr<Replayer> replayer =
      Replayer::Create(
          vm.get(), &program,
          [&kernels](absl::string_view op, const StreamKey&, DataType) { return kernels.Find(op); })
          .value();
  int64_t instructions = 0;
  for (auto _ : state) {
    const ReplayResult result = replayer->Run().value();
    SLUICE_CHECK(result.mismatches.empty() && result.op_error.ok());
    instructions += result.instructions;
  }
  state.SetItemsProcessed(instructions);
  state.SetLabel(state.range(0) == 0 ? "dedicated" : "caller");
  replayer.reset();
  SLUICE_CHECK(vm->Shutdown().ok());
}
BENCHMARK(BM_Replay_Noop)->Arg(0)->Arg(1)->UseRealTime();

void BM_Replay_Noop_Parse(benchmark::State& state) {
  const std::string& text = NoopRecording();
  int64_t lines = 0;
  for (auto _ : state) {
    const RecordedProgram program = ParseRecord(text).value();
    lines += static_cast<int64_t>(program.instructions.size() + program.blobs.size());
    benchmark::DoNotOptimize(program.instructions.data());
  }
  state.SetItemsProcessed(lines);
}
BENCHMARK(BM_Replay_Noop_Parse);

}  // namespace
}  // namespace sluice::vm::replay_benchmark
