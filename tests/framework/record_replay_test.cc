// A recorded static-graph run replays exactly: the demo trained for three steps on two sim
// streams with the recorder on (StepSequences are written as their steps, feeds as data
// lines, lazy temporaries as blobs released and written again), replayed as recorded and
// on another device with the sync checker on, reproduces every checksum. A graph on two cpu
// streams whose temporary is released by a drop on each (a shared release) replays with
// its drops, lanes rebuilt or not, and a replay moving them off the host is refused.
#include <filesystem>

#include "ep/runtime.h"
#include "framework/compiler/replay_kernels.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/framework/demo_test_util.h"
#include "tests/framework/program_test_util.h"
#include "vm/record_reader.h"
#include "vm/replayer.h"
#include "vm/sync_checker.h"

namespace sluice::framework::record_replay_test {
namespace {

std::string RecordDemo(Device device, int streams, const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 2;
  context_options.vm.record_path = path;
  DemoSetup demo(context_options, device, streams);
  EXPECT_TRUE(demo.executor.Run(demo.model.startup->desc(), {}, {}, &demo.scope).ok());
  for (int step = 0; step < 3; ++step) {
    EXPECT_TRUE(
        demo.executor.Run(demo.model.main->desc(), demo.feeds(), {demo.model.loss}, &demo.scope)
            .ok());
  }
  // While the scope still holds the parameters: the record ends with their checksums.
  EXPECT_TRUE(demo.context.vm()->Shutdown().ok());
  return path;
}

vm::ReplayResult Replay(const std::string& path, vm::DeviceMap map, bool rebuild_lanes = true) {
  vm::RecordedProgram program = vm::ReadRecordFile(path).value();
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 2;
  runtime_options.enable_cuda = false;
  auto runtime = ep::Runtime::Create(runtime_options).value();
  vm::VmOptions vm_options;
  vm_options.check_sync = true;
  auto machine = vm::VirtualMachine::Create(runtime.get(), vm_options).value();
  ops::OpRegistry registry;
  EXPECT_TRUE(ops::RegisterStandardOps(&registry).ok());
  vm::ReplayOptions options;
  options.device_map = std::move(map);
  options.rebuild_lanes = rebuild_lanes;
  // Records of compiled subgraphs replay through the subgraph compiler.
  const framework::compiler::ReplayKernels compiled;
  auto replayer =
      vm::Replayer::Create(
          machine.get(), &program,
          compiled.Wrap([&](absl::string_view op, const StreamKey& stream, DataType dtype) {
            return registry.FindKernel(op, stream.device.type(), dtype);
          }),
          options)
          .value();
  vm::ReplayResult result = replayer->Run(/*verify=*/true).value();
  EXPECT_EQ(machine->sync_checker()->violation_count(), 0);
  EXPECT_TRUE(machine->Shutdown().ok());
  return result;
}

TEST(RecordReplayTest, DemoOnTwoSimStreamsReplaysItsChecksums) {
  const std::string path = RecordDemo(Device(DeviceType::kSim, 0), 2, "sluice_demo_sim.rec");
  for (const vm::DeviceMap& map : {vm::DeviceMap{}, vm::DeviceMap{{"sim:0", "sim:1"}}}) {
    const vm::ReplayResult result = Replay(path, map);
    EXPECT_GT(result.checksums_compared, 10);
    EXPECT_TRUE(result.mismatches.empty());
    EXPECT_TRUE(result.op_error.ok()) << result.op_error;
  }
  std::filesystem::remove(path);
}

TEST(RecordReplayTest, DemoOnCpuReplaysOnSim) {
  const std::string path = RecordDemo(Device(DeviceType::kCpu, 0), 1, "sluice_demo_cpu.rec");
  const vm::ReplayResult result = Replay(path, {{"cpu", "sim:1"}});
  EXPECT_GT(result.checksums_compared, 10);
  EXPECT_TRUE(result.mismatches.empty());
  std::filesystem::remove(path);
}

// a = 1 on cpu; b = relu(a) on compute:1 and c = exp(a) on compute:0, unordered; d = b + c.
// a's last touches (b's and c's ops) are on two streams with no order: a shared release.
std::string RecordSharedRelease(const std::string& name) {
  using program_test::AddVar;
  using program_test::Fill;
  using program_test::OnStream;
  using program_test::Op;
  using program_test::Var;
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 1;
  context_options.runtime.enable_cuda = false;
  context_options.vm.record_path = path;
  absl::StatusOr<eager::Context> context = eager::Context::Create(context_options);
  EXPECT_TRUE(context.ok()) << context.status();
  if (!context.ok()) return path;
  const Shape shape({4, 4});
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* v : {"a", "b", "c", "d"}) AddVar(b, Var(v, shape));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"a"}}}, OnStream("compute:0", Fill(shape, 0.5))));
  b.AppendOp(Op("relu", {{"X", {"a"}}}, {{"Out", {"b"}}}, OnStream("compute:1")));
  b.AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"c"}}}, OnStream("compute:0")));
  b.AppendOp(Op("add", {{"X", {"b"}}, {"Y", {"c"}}}, {{"Out", {"d"}}}, OnStream("compute:0")));
  ExecutorOptions executor_options;
  executor_options.interpreter.compile_subgraphs = false;  // the shared release is between ops
  Executor executor(&context->registry(), context->vm(), executor_options);
  Scope scope;
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<RunResult> result = executor.Run(p, {}, {"d"}, &scope);
    EXPECT_TRUE(result.ok()) << result.status();
  }
  EXPECT_EQ(executor.LastLowering()->shared_releases, 2);
  EXPECT_TRUE(context->vm()->Shutdown().ok());
  return path;
}

TEST(RecordReplayTest, SharedReleaseReplaysWithItsDrops) {
  const std::string path = RecordSharedRelease("sluice_shared_release.rec");
  vm::RecordedProgram program = vm::ReadRecordFile(path).value();
  int drops = 0;
  for (const vm::RecordedInstruction& r : program.instructions) drops += r.drops == 2;
  EXPECT_EQ(drops, 2 * 3);  // two per run
  for (bool rebuild_lanes : {true, false}) {
    const vm::ReplayResult result = Replay(path, {}, rebuild_lanes);
    EXPECT_GE(result.checksums_compared, 1);
    EXPECT_TRUE(result.mismatches.empty());
    EXPECT_TRUE(result.op_error.ok()) << result.op_error;
  }
  // Off the host, a drop could free storage the device still reads: refused.
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 1;
  runtime_options.enable_cuda = false;
  auto runtime = ep::Runtime::Create(runtime_options).value();
  auto machine = vm::VirtualMachine::Create(runtime.get(), vm::VmOptions{}).value();
  ops::OpRegistry registry;
  ASSERT_TRUE(ops::RegisterStandardOps(&registry).ok());
  vm::ReplayOptions options;
  options.device_map = {{"cpu", "sim:0"}};
  absl::StatusOr<std::unique_ptr<vm::Replayer>> refused = vm::Replayer::Create(
      machine.get(), &program,
      [&](absl::string_view op, const StreamKey& stream, DataType dtype) {
        return registry.FindKernel(op, stream.device.type(), dtype);
      },
      options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("shared release"));
  EXPECT_TRUE(machine->Shutdown().ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sluice::framework::record_replay_test
