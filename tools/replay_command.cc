#include "tools/replay_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "ops/host_kernels.h"
#include "ops/kernel_registry.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "vm/record_reader.h"
#include "vm/replayer.h"
#include "vm/sync_checker.h"
#include "vm/virtual_machine.h"

namespace sluice::tools {
namespace {

struct Options {
  std::string path;
  vm::DeviceMap device_map;
  bool caller_thread = false;
  bool check_sync = false;
  bool verify = true;
  int repeat = 1;
  bool standard_ops = false;
};

void PrintHelp(FILE* out) {
  std::fprintf(
      out,
      "usage: sluice replay FILE [--device-map FROM=TO[,FROM=TO...]] [--check-sync]\n"
      "                          [--scheduling dedicated|caller] [--repeat N] [--no-verify]\n"
      "                          [--ops stress|standard]\n"
      "\n"
      "Re-executes an instruction record (written with VmOptions::record_path, e.g. by\n"
      "`sluice stress --record FILE`; format in docs/instruction_record_format.md): the same\n"
      "instructions in file order, eager ones with their dependences derived again, batches\n"
      "with their recorded edges, barriers as host syncs. Then compares every blob that has\n"
      "a stored checksum with the replayed contents. Ends with one JSON line:\n"
      "  {\"instructions\":..,\"checksums\":..,\"mismatches\":..,\"skipped\":..,\n"
      "   \"sync_errors\":..,\"seconds\":..,\"instructions_per_s\":..}\n"
      "\n"
      "  --device-map M    run the instructions of device FROM on device TO, e.g.\n"
      "                    cuda:0=sim:0 (repeatable; comma-separated pairs)\n"
      "  --check-sync      run with the sync checker on; unordered accesses are errors\n"
      "  --scheduling X    dedicated (a scheduler thread, default) or caller\n"
      "  --repeat N        replay N times (default 1); every run is verified\n"
      "  --no-verify       do not compare checksums\n"
      "  --ops SET         the kernels op names refer to: stress (the test kernels of\n"
      "                    `sluice stress`, default) or standard (the op library, for\n"
      "                    records of `sluice run/demo --record`)\n"
      "\n"
      "Exit status: 0 when every checksum matched and no op or sync error occurred, 1\n"
      "otherwise, 2 for bad options or a file that cannot be read or parsed (the error\n"
      "names the line).\n");
}

absl::Status ParseOptions(int argc, char** argv, Options* options, bool* help) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return absl::OkStatus();
    }
    if (arg == "--check-sync") {
      options->check_sync = true;
      continue;
    }
    if (arg == "--no-verify") {
      options->verify = false;
      continue;
    }
    if (!absl::StartsWith(arg, "--")) {
      if (!options->path.empty()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("one FILE only ('%s' and '%s')", options->path, arg));
      }
      options->path = std::string(arg);
      continue;
    }
    if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrFormat("%s needs a value", arg));
    const absl::string_view text = argv[++i];
    if (arg == "--device-map") {
      SLUICE_RETURN_IF_ERROR(vm::AddDeviceMapping(text, &options->device_map));
    } else if (arg == "--scheduling") {
      if (text != "dedicated" && text != "caller") {
        return absl::InvalidArgumentError(
            absl::StrFormat("--scheduling: '%s' is not 'dedicated' or 'caller'", text));
      }
      options->caller_thread = text == "caller";
    } else if (arg == "--ops") {
      if (text != "stress" && text != "standard") {
        return absl::InvalidArgumentError(
            absl::StrFormat("--ops: '%s' is not 'stress' or 'standard'", text));
      }
      options->standard_ops = text == "standard";
    } else if (arg == "--repeat") {
      if (!absl::SimpleAtoi(text, &options->repeat) || options->repeat < 1) {
        return absl::InvalidArgumentError(
            absl::StrFormat("--repeat: '%s' is not a positive integer", text));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrFormat("unknown option '%s'", arg));
    }
  }
  if (options->path.empty() && !*help) return absl::InvalidArgumentError("no FILE given");
  return absl::OkStatus();
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

int Fail(absl::string_view what, const absl::Status& status, int code) {
  std::fprintf(stderr, "sluice replay: %s%s\n", std::string(what).c_str(),
               std::string(status.message()).c_str());
  return code;
}

}  // namespace

int ReplayMain(int argc, char** argv) {
  Options options;
  bool help = false;
  if (absl::Status parsed = ParseOptions(argc, argv, &options, &help); !parsed.ok()) {
    std::fprintf(stderr, "sluice replay: %s\n\n", std::string(parsed.message()).c_str());
    PrintHelp(stderr);
    return 2;
  }
  if (help) {
    PrintHelp(stdout);
    return 0;
  }
  absl::StatusOr<vm::RecordedProgram> program = vm::ReadRecordFile(options.path);
  if (!program.ok()) return Fail("", program.status(), 2);
  std::fprintf(stderr, "sluice replay: %s: %zu instructions, %zu blobs, %zu checksums\n",
               options.path.c_str(), program->instructions.size(), program->blobs.size(),
               program->checksums.size());

  absl::StatusOr<std::unique_ptr<ep::Runtime>> runtime =
      ep::Runtime::Create(RuntimeFor(*program, options.device_map));
  if (!runtime.ok()) return Fail("", runtime.status(), 2);
  vm::VmOptions vm_options;
  vm_options.check_sync = options.check_sync;
  vm_options.scheduling = options.caller_thread ? vm::VmOptions::Scheduling::kCallerThread
                                                : vm::VmOptions::Scheduling::kDedicatedThread;
  absl::StatusOr<std::unique_ptr<vm::VirtualMachine>> machine =
      vm::VirtualMachine::Create(runtime->get(), vm_options);
  if (!machine.ok()) return Fail("", machine.status(), 2);
  ops::KernelRegistry kernels;
  if (absl::Status registered = ops::RegisterHostKernels(&kernels); !registered.ok()) {
    return Fail("", registered, 2);
  }
  ops::OpRegistry standard;  // filled only for --ops standard
  if (options.standard_ops) {
    if (absl::Status registered = ops::RegisterStandardOps(&standard); !registered.ok()) {
      return Fail("", registered, 2);
    }
  }
  vm::KernelLookup lookup = [&](absl::string_view op, const StreamKey& stream,
                                DataType dtype) -> absl::StatusOr<const vm::OpKernel*> {
    if (options.standard_ops) return standard.FindKernel(op, stream.device.type(), dtype);
    return kernels.Find(op);
  };
  vm::ReplayOptions replay_options;
  replay_options.device_map = options.device_map;
  absl::StatusOr<std::unique_ptr<vm::Replayer>> replayer =
      vm::Replayer::Create(machine->get(), &*program, lookup, replay_options);
  if (!replayer.ok()) return Fail("", replayer.status(), 2);

  int64_t instructions = 0, compared = 0, skipped = 0, mismatches = 0;
  absl::Status op_error;
  const auto start = std::chrono::steady_clock::now();
  for (int run = 0; run < options.repeat; ++run) {
    absl::StatusOr<vm::ReplayResult> result = (*replayer)->Run(options.verify);
    if (!result.ok()) return Fail("", result.status(), 1);
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
  return mismatches == 0 && sync_errors == 0 && op_error.ok() && shutdown.ok() ? 0 : 1;
}

}  // namespace sluice::tools
