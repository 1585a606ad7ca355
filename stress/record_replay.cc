#include "stress/record_replay.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "framework/compiler/replay_kernels.h"
#include "ops/kernel_registry.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "ops/stress_kernels.h"
#include "vm/record_reader.h"
#include "vm/sync_checker.h"

namespace sluice::stress {
namespace {

// The runtime the program needs after mapping: enough sim devices, cuda only when used.
ep::RuntimeOptions RuntimeFor(const vm::RecordedProgram& program, const vm::DeviceMap& map) {
  ep::RuntimeOptions options;
  options.num_sim_devices = 1;
  options.enable_cuda = false;
  auto note = [&](absl::string_view text) {
    absl::StatusOr<StreamKey> key = StreamKey::Parse(text);
    if (!key.ok()) return;  // the replayer reports it with its line
    Device device = key->device;
    if (auto it = map.find(device.ToString()); it != map.end()) {
      absl::StatusOr<Device> mapped = Device::Parse(it->second);
      if (!mapped.ok()) return;  // likewise
      device = *mapped;
    }
    if (device.type() == DeviceType::kSim) {
      options.num_sim_devices =
          std::clamp(device.index() + 1, options.num_sim_devices, ep::Runtime::kMaxSimDevices);
    }
    if (device.type() == DeviceType::kCuda) options.enable_cuda = true;
  };
  for (const vm::RecordedBlob& blob : program.blobs) note(blob.stream);
  for (const vm::RecordedInstruction& instruction : program.instructions) {
    if (!instruction.stream.empty()) note(instruction.stream);
  }
  return options;
}

}  // namespace

std::string RecordReplayTotals::ToJson() const {
  return absl::StrFormat(
      "{\"instructions\":%d,\"checksums\":%d,\"mismatches\":%d,\"skipped\":%d,"
      "\"sync_errors\":%d,\"seconds\":%.3f,\"instructions_per_s\":%.0f}",
      instructions, checksums, mismatches.size(), skipped, sync_errors, seconds,
      seconds > 0 ? static_cast<double>(instructions) / seconds : 0.0);
}

absl::StatusOr<RecordReplayTotals> ReplayRecordFile(const RecordReplayOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(const vm::RecordedProgram program, vm::ReadRecordFile(options.path));
  return ReplayRecord(program, options);
}

absl::StatusOr<RecordReplayTotals> ReplayRecord(const vm::RecordedProgram& program,
                                                const RecordReplayOptions& options) {
  RecordReplayTotals totals;
  totals.recorded_instructions = static_cast<int64_t>(program.instructions.size());
  totals.recorded_blobs = static_cast<int64_t>(program.blobs.size());
  totals.recorded_checksums = static_cast<int64_t>(program.checksums.size());

  // Declared before the VM: it may run their kernels until it shuts down.
  ops::KernelRegistry kernels;
  SLUICE_RETURN_IF_ERROR(ops::RegisterStressKernels(&kernels));
  ops::OpRegistry standard;  // filled only for standard_ops
  if (options.standard_ops) SLUICE_RETURN_IF_ERROR(ops::RegisterStandardOps(&standard));
  // Compiled subgraphs ("fused[...]" ops, with their subgraph in an attribute) are
  // compiled again from the record.
  const framework::compiler::ReplayKernels compiled;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ep::Runtime> runtime,
                          ep::Runtime::Create(RuntimeFor(program, options.device_map)));
  vm::VmOptions vm_options;
  vm_options.check_sync = options.check_sync;
  vm_options.scheduling = options.scheduling;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<vm::VirtualMachine> machine,
                          vm::VirtualMachine::Create(runtime.get(), vm_options));
  vm::KernelLookup lookup =
      compiled.Wrap([&](absl::string_view op, const StreamKey& stream,
                        DataType dtype) -> absl::StatusOr<const vm::OpKernel*> {
        if (options.standard_ops) return standard.FindKernel(op, stream.device.type(), dtype);
        return kernels.Find(op);
      });
  vm::ReplayOptions replay_options;
  replay_options.device_map = options.device_map;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<vm::Replayer> replayer,
                          vm::Replayer::Create(machine.get(), &program, lookup, replay_options));

  const auto start = std::chrono::steady_clock::now();
  for (int run = 0; run < options.repeat; ++run) {
    SLUICE_ASSIGN_OR_RETURN(vm::ReplayResult result, replayer->Run(options.verify));
    totals.instructions += result.instructions;
    totals.checksums += result.checksums_compared;
    totals.skipped += result.checksums_skipped;
    for (vm::ChecksumMismatch& m : result.mismatches) totals.mismatches.push_back(std::move(m));
    if (totals.op_error.empty() && !result.op_error.ok()) {
      totals.op_error = result.op_error.ToString();
    }
  }
  totals.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.check_sync) {
    totals.sync_errors = machine->sync_checker()->violation_count();
    if (totals.sync_errors > 0) {
      totals.first_sync_error = machine->sync_checker()->violations().front().ToString();
    }
  }
  replayer.reset();
  if (const absl::Status shutdown = machine->Shutdown(); !shutdown.ok()) {
    totals.shutdown_error = shutdown.ToString();
  }
  return totals;
}

}  // namespace sluice::stress
