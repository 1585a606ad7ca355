// A recorded static-graph run replays exactly: the demo trained for three steps on two sim
// streams with the recorder on (StepSequences are written as their steps, feeds as data
// lines, lazy temporaries as blobs released and written again), replayed as recorded and
// on another device with the sync checker on, reproduces every checksum.
#include <filesystem>

#include "ep/runtime.h"
#include "gtest/gtest.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/framework/demo_test_util.h"
#include "vm/record_reader.h"
#include "vm/replayer.h"

namespace sluice::framework {
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

vm::ReplayResult Replay(const std::string& path, vm::DeviceMap map) {
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
  auto replayer = vm::Replayer::Create(
                      machine.get(), &program,
                      [&](absl::string_view op, const StreamKey& stream, DataType dtype) {
                        return registry.FindKernel(op, stream.device.type(), dtype);
                      },
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

}  // namespace
}  // namespace sluice::framework
