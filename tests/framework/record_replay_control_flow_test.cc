// A recorded run with control flow replays exactly: the recorder writes what each loop and
// cond ran as its op line's expansion (iterations unrolled, a cond in the loop flattened
// into it), and the replay runs those steps in the op's place — on cpu and sim with two
// streams, as recorded and on another sim device, under the sync checker, reproducing every
// checksum. A record whose expansion lost an iteration replays to other bytes (the
// checksums catch it), and one whose expansion is cut short is refused by the reader.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ep/runtime.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/framework/control_flow_programs.h"
#include "vm/record_reader.h"
#include "vm/replayer.h"
#include "vm/sync_checker.h"

namespace sluice::framework::record_replay_control_flow_test {
namespace {

using ::testing::HasSubstr;

HostTensor Scalar(float v) { return HostTensor::FromVector(std::vector<float>{v}, Shape()); }

// Records three runs of `build`'s program (n = 4, 0, 6 iterations) on `device` with two
// compute streams; returns the record's path.
template <typename Build>
std::string Record(Device device, const std::string& name, Build build) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  eager::ContextOptions options;
  options.runtime.num_sim_devices = 2;
  options.runtime.enable_cuda = false;
  options.vm.record_path = path;
  eager::Context context = eager::Context::Create(options).value();
  ops::OpRegistry registry;
  EXPECT_TRUE(ops::RegisterStandardOps(&registry).ok());
  Program main(&registry), startup(&registry);
  std::vector<std::string> fetches;
  {
    ProgramGuard guard(main, startup);
    fetches = build();
  }
  ExecutorOptions executor_options;
  executor_options.interpreter.device = device;
  executor_options.interpreter.compute_streams = 2;
  Executor executor(&context.registry(), context.vm(), executor_options);
  Scope scope;
  for (float n : {4.0f, 0.0f, 6.0f}) {
    absl::StatusOr<RunResult> result = executor.Run(
        main.desc(),
        {{"i", Scalar(0)},
         {"n", Scalar(n)},
         {"x", HostTensor::FromVector(std::vector<float>{0.5f, -1.0f, 2.0f}, Shape({3}))},
         {"w", HostTensor::FromVector(std::vector<float>{1.0f, 2.0f, -0.5f}, Shape({3}))}},
        fetches, &scope);
    EXPECT_TRUE(result.ok()) << result.status();
  }
  EXPECT_TRUE(context.vm()->Shutdown().ok());
  return path;
}

std::vector<std::string> LoopWithCond() {
  const Var i = Data("i", Shape()).value();
  const Var n = Data("n", Shape()).value();
  const Var x = Data("x", Shape({3})).value();
  const Var w = Data("w", Shape({3})).value();
  std::vector<Value> out = control_flow_programs::LoopWithCond(i, n, x, w).value();
  return {out[0].var().name(), out[1].var().name()};
}

std::vector<std::string> CountingLoop() {
  const Var i = Data("i", Shape()).value();
  const Var n = Data("n", Shape()).value();
  const Var x = Data("x", Shape({3})).value();
  Data("w", Shape({3})).value();
  std::vector<Value> out = control_flow_programs::CountingLoop(i, n, x).value();
  return {out[1].var().name()};
}

// while i < n { i += 1; x = x + tanh(w * i) } with two iterations in flight: on cpu with two
// streams the iterations overlap unless the VM records (one thread runs them all then, so
// that one expansion holds them), and each helper step records an empty expansion.
std::vector<std::string> OverlappedLoop() {
  const Var i = Data("i", Shape()).value();
  const Var n = Data("n", Shape()).value();
  const Var x = Data("x", Shape({3})).value();
  const Var w = Data("w", Shape({3})).value();
  fn::WhileOptions options;
  options.parallel_iterations = 2;
  std::vector<Value> out =
      fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                    [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                      SLUICE_ASSIGN_OR_RETURN(Value t, fn::Mul(w, vars[0]));
                      SLUICE_ASSIGN_OR_RETURN(t, fn::Tanh(t));
                      SLUICE_ASSIGN_OR_RETURN(Value next_x, fn::Add(vars[1], t));
                      return std::vector<Value>{next_i, next_x};
                    },
                    {i, x}, options)
          .value();
  return {out[1].var().name()};
}

absl::StatusOr<vm::ReplayResult> Replay(const vm::RecordedProgram& program, vm::DeviceMap map) {
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
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<vm::Replayer> replayer,
                          vm::Replayer::Create(
                              machine.get(), &program,
                              [&](absl::string_view op, const StreamKey& stream, DataType dtype) {
                                return registry.FindKernel(op, stream.device.type(), dtype);
                              },
                              options));
  SLUICE_ASSIGN_OR_RETURN(vm::ReplayResult result, replayer->Run(/*verify=*/true));
  EXPECT_EQ(machine->sync_checker()->violation_count(), 0);
  EXPECT_TRUE(machine->Shutdown().ok());
  return result;
}

TEST(RecordReplayControlFlowTest, LoopWithACondReplaysItsChecksums) {
  for (Device device : {Device(DeviceType::kCpu, 0), Device(DeviceType::kSim, 0)}) {
    const std::string path = Record(device, "sluice_control_flow.rec", LoopWithCond);
    const vm::RecordedProgram program = vm::ReadRecordFile(path).value();
    // One expansion per run of the loop (three runs).
    EXPECT_EQ(program.expansions.size(), 3u) << device.ToString();
    std::vector<vm::DeviceMap> maps = {{}};
    if (device.type() == DeviceType::kSim) maps.push_back({{"sim:0", "sim:1"}});
    for (const vm::DeviceMap& map : maps) {
      absl::StatusOr<vm::ReplayResult> result = Replay(program, map);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->expansions, 3);
      EXPECT_GT(result->checksums_compared, 5);
      EXPECT_TRUE(result->mismatches.empty()) << device.ToString();
      EXPECT_TRUE(result->op_error.ok()) << result->op_error;
    }
    std::filesystem::remove(path);
  }
}

TEST(RecordReplayControlFlowTest, AnOverlappedLoopReplaysItsChecksums) {
  const std::string path =
      Record(Device(DeviceType::kCpu, 0), "sluice_cf_overlapped.rec", OverlappedLoop);
  const vm::RecordedProgram program = vm::ReadRecordFile(path).value();
  // Per run: the loop's expansion and the helper's empty one.
  EXPECT_EQ(program.expansions.size(), 6u);
  absl::StatusOr<vm::ReplayResult> result = Replay(program, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->expansions, 6);
  EXPECT_GT(result->checksums_compared, 5);
  EXPECT_TRUE(result->mismatches.empty());
  EXPECT_TRUE(result->op_error.ok()) << result->op_error;
  std::filesystem::remove(path);
}

// The record as text, with the steps [first, first + count) of the expansion numbered
// `expansion` removed (and its count adjusted, unless `keep_count`).
std::string WithoutSteps(const std::string& path, int expansion, int first, int count,
                         bool keep_count) {
  std::ifstream file(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  int seen = -1;
  for (size_t l = 0; l < lines.size(); ++l) {
    if (lines[l].rfind("expand ", 0) != 0 || ++seen != expansion) continue;
    const size_t at = lines[l].find("steps=");
    const int steps = std::stoi(lines[l].substr(at + 6));
    if (!keep_count) lines[l] = lines[l].substr(0, at) + "steps=" + std::to_string(steps - count);
    lines.erase(lines.begin() + static_cast<long>(l + 1 + first),
                lines.begin() + static_cast<long>(l + 1 + first + count));
    break;
  }
  std::ostringstream text;
  for (const std::string& line : lines) text << line << "\n";
  return text.str();
}

// A loop skipped because its input failed (read_row past the end) ran no steps: its line
// gets an empty expansion, and the record replays (the failure replays with it).
TEST(RecordReplayControlFlowTest, ASkippedLoopReplays) {
  const std::string path = (std::filesystem::temp_directory_path() / "sluice_cf_skip.rec").string();
  {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.enable_cuda = false;
    options.vm.record_path = path;
    eager::Context context = eager::Context::Create(options).value();
    ops::OpRegistry registry;
    ASSERT_TRUE(ops::RegisterStandardOps(&registry).ok());
    Program main(&registry), startup(&registry);
    std::string fetch;
    {
      ProgramGuard guard(main, startup);
      const Var rows = Data("rows", Shape({2, 3})).value();
      const Var k = Data("k", Shape(), DataType::kI64).value();
      const Var i = Data("i", Shape()).value();
      const Var n = Data("n", Shape()).value();
      const Var x = AppendOp(main, "read_row", {{rows}, {k}}).value()[0][0];
      std::vector<Value> out = control_flow_programs::CountingLoop(i, n, x).value();
      fetch = out[1].var().name();
    }
    Executor executor(&context.registry(), context.vm(), ExecutorOptions());
    Scope scope;
    const absl::StatusOr<RunResult> result =
        executor.Run(main.desc(),
                     {{"rows", HostTensor::FromVector(std::vector<float>(6, 1.0f), Shape({2, 3}))},
                      {"k", HostTensor::FromVector(std::vector<int64_t>{5}, Shape())},
                      {"i", Scalar(0)},
                      {"n", Scalar(3)}},
                     {fetch}, &scope);
    ASSERT_FALSE(result.ok());
    EXPECT_TRUE(context.vm()->Shutdown().ok());
  }
  const vm::RecordedProgram program = vm::ReadRecordFile(path).value();
  ASSERT_EQ(program.expansions.size(), 1u);
  EXPECT_TRUE(program.expansions[0].steps.empty());
  absl::StatusOr<vm::ReplayResult> result = Replay(program, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->op_error.ok());  // read_row fails again
  EXPECT_TRUE(result->mismatches.empty());
  std::filesystem::remove(path);
}

TEST(RecordReplayControlFlowTest, AnExpansionThatLostAnIterationIsCaught) {
  const std::string path =
      Record(Device(DeviceType::kSim, 0), "sluice_cf_tamper.rec", CountingLoop);
  // The last run's loop (6 iterations): 2 entry copies, then 5 steps per iteration
  // (less_than; increment, scale and the two copies of the yields). Drop iteration 2.
  const std::string tampered = WithoutSteps(path, 2, 2 + 5 * 2, 5, /*keep_count=*/false);
  absl::StatusOr<vm::RecordedProgram> program = vm::ParseRecord(tampered, "tampered");
  ASSERT_TRUE(program.ok()) << program.status();
  absl::StatusOr<vm::ReplayResult> result = Replay(*program, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->mismatches.empty());
  // As recorded, it matches: the mismatch is the tampering's.
  absl::StatusOr<vm::ReplayResult> intact = Replay(vm::ReadRecordFile(path).value(), {});
  ASSERT_TRUE(intact.ok()) << intact.status();
  EXPECT_TRUE(intact->mismatches.empty());
  // Cut short (the count still says 6 iterations' worth): refused, naming the line.
  const absl::StatusOr<vm::RecordedProgram> cut =
      vm::ParseRecord(WithoutSteps(path, 2, 2 + 5 * 2, 5, /*keep_count=*/true), "cut");
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("cut:"));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sluice::framework::record_replay_control_flow_test
