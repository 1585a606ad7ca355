#include "tools/replay_command.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "framework/compiler/compiled_kernel.h"
#include "ops/kernel_registry.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "ops/stress_kernels.h"
#include "tools/options.h"
#include "vm/record_reader.h"
#include "vm/replayer.h"
#include "vm/sync_checker.h"
#include "vm/virtual_machine.h"

namespace sluice::tools {
namespace {

struct Options {
  std::string path;
  vm::DeviceMap device_map;
  std::string scheduling = "dedicated";
  bool check_sync = false;
  bool no_verify = false;
  int repeat = 1;
  std::string ops = "stress";
};

void DeclareOptions(OptionParser& parser, Options* options) {
  parser.AddPositional("FILE", "the instruction record to replay", &options->path);
  parser.AddRepeated("--device-map", "FROM=TO[,FROM=TO...]",
                     "run the instructions of device FROM on device TO, e.g. cuda:0=sim:0",
                     [options](absl::string_view text) {
                       return vm::AddDeviceMapping(text, &options->device_map);
                     });
  parser.AddFlag("--check-sync", "run with the sync checker on; unordered accesses are errors",
                 &options->check_sync);
  parser.AddChoice("--scheduling", "X", "dedicated (a scheduler thread) or caller",
                   {"dedicated", "caller"}, &options->scheduling);
  parser.AddInteger("--repeat", "N", "replay N times; every run is verified", 1, INT_MAX,
                    &options->repeat);
  parser.AddFlag("--no-verify", "do not compare checksums", &options->no_verify);
  parser.AddChoice("--ops", "SET",
                   "the kernels op names refer to: stress (the test kernels of `sluice stress`) "
                   "or standard (the op library, for records of `sluice run/demo --record`)",
                   {"stress", "standard"}, &options->ops);
}

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
      device = Device::Parse(it->second).value();
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

int ReplayMain(int argc, char** argv) {
  auto fail = [](const absl::Status& status) { return ReportFailure("replay", status); };
  Options options;
  OptionParser parser(
      "replay",
      "Re-executes an instruction record (written with VmOptions::record_path, e.g. by\n"
      "`sluice stress --record FILE`; format in docs/instruction_record_format.md): the same\n"
      "instructions in file order, eager ones with their dependences derived again, batches\n"
      "with their recorded edges, barriers as host syncs. Then compares every blob that has\n"
      "a stored checksum with the replayed contents. Ends with one JSON line:\n"
      "  {\"instructions\":..,\"checksums\":..,\"mismatches\":..,\"skipped\":..,\n"
      "   \"sync_errors\":..,\"seconds\":..,\"instructions_per_s\":..}\n",
      "Exit status: 0 when every checksum matched and no op or sync error occurred, 1\n"
      "otherwise or when the file cannot be read or parsed (the error names the line), 2\n"
      "for bad options.\n");
  DeclareOptions(parser, &options);
  if (std::optional<int> exit = ParseCommandLine(parser, argc, argv)) return *exit;
  const bool standard_ops = options.ops == "standard";
  const bool verify = !options.no_verify;

  absl::StatusOr<vm::RecordedProgram> program = vm::ReadRecordFile(options.path);
  if (!program.ok()) return fail(program.status());
  std::fprintf(stderr, "sluice replay: %s: %zu instructions, %zu blobs, %zu checksums\n",
               options.path.c_str(), program->instructions.size(), program->blobs.size(),
               program->checksums.size());

  absl::StatusOr<std::unique_ptr<ep::Runtime>> runtime =
      ep::Runtime::Create(RuntimeFor(*program, options.device_map));
  if (!runtime.ok()) return fail(runtime.status());
  vm::VmOptions vm_options;
  vm_options.check_sync = options.check_sync;
  vm_options.scheduling = options.scheduling == "caller"
                              ? vm::VmOptions::Scheduling::kCallerThread
                              : vm::VmOptions::Scheduling::kDedicatedThread;
  absl::StatusOr<std::unique_ptr<vm::VirtualMachine>> machine =
      vm::VirtualMachine::Create(runtime->get(), vm_options);
  if (!machine.ok()) return fail(machine.status());
  ops::KernelRegistry kernels;
  if (absl::Status registered = ops::RegisterStressKernels(&kernels); !registered.ok()) {
    return fail(registered);
  }
  ops::OpRegistry standard;  // filled only for --ops standard
  if (standard_ops) {
    if (absl::Status registered = ops::RegisterStandardOps(&standard); !registered.ok()) {
      return fail(registered);
    }
  }
  // Compiled subgraphs ("fused[...]" ops, with their subgraph in an attribute) are
  // compiled again from the record.
  const framework::compiler::ReplayKernels compiled;
  vm::KernelLookup lookup =
      compiled.Wrap([&](absl::string_view op, const StreamKey& stream,
                        DataType dtype) -> absl::StatusOr<const vm::OpKernel*> {
        if (standard_ops) return standard.FindKernel(op, stream.device.type(), dtype);
        return kernels.Find(op);
      });
  vm::ReplayOptions replay_options;
  replay_options.device_map = options.device_map;
  absl::StatusOr<std::unique_ptr<vm::Replayer>> replayer =
      vm::Replayer::Create(machine->get(), &*program, lookup, replay_options);
  if (!replayer.ok()) return fail(replayer.status());

  int64_t instructions = 0, compared = 0, skipped = 0, mismatches = 0;
  absl::Status op_error;
  const auto start = std::chrono::steady_clock::now();
  for (int run = 0; run < options.repeat; ++run) {
    absl::StatusOr<vm::ReplayResult> result = (*replayer)->Run(verify);
    if (!result.ok()) return fail(result.status());
    instructions += result->instructions;
    compared += result->checksums_compared;
    skipped += result->checksums_skipped;
    mismatches += static_cast<int64_t>(result->mismatches.size());
    for (const vm::ChecksumMismatch& m : result->mismatches) {
      if (m.released) {
        std::fprintf(stderr, "%s:%d: %s: storage was released in the replay\n",
                     options.path.c_str(), m.line, m.blob.c_str());
      } else {
        std::fprintf(stderr, "%s:%d: %s: checksum %016llx, recorded %016llx\n",
                     options.path.c_str(), m.line, m.blob.c_str(),
                     static_cast<unsigned long long>(m.actual),
                     static_cast<unsigned long long>(m.expected));
      }
    }
    if (op_error.ok() && !result->op_error.ok()) op_error = result->op_error;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t sync_errors =
      options.check_sync ? (*machine)->sync_checker()->violation_count() : 0;
  if (sync_errors > 0) {
    std::fprintf(stderr, "first sync error: %s\n",
                 (*machine)->sync_checker()->violations().front().ToString().c_str());
  }
  replayer->reset();
  const absl::Status shutdown = (*machine)->Shutdown();
  if (!op_error.ok()) std::fprintf(stderr, "op error: %s\n", op_error.ToString().c_str());
  if (!shutdown.ok()) std::fprintf(stderr, "shutdown: %s\n", shutdown.ToString().c_str());
  std::printf(
      "{\"instructions\":%lld,\"checksums\":%lld,\"mismatches\":%lld,\"skipped\":%lld,"
      "\"sync_errors\":%lld,\"seconds\":%.3f,\"instructions_per_s\":%.0f}\n",
      static_cast<long long>(instructions), static_cast<long long>(compared),
      static_cast<long long>(mismatches), static_cast<long long>(skipped),
      static_cast<long long>(sync_errors), seconds,
      seconds > 0 ? static_cast<double>(instructions) / seconds : 0.0);
  return mismatches == 0 && sync_errors == 0 && op_error.ok() && shutdown.ok() ? kExitOk
                                                                               : kExitFailure;
}

}  // namespace sluice::tools
