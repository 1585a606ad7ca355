#include "tools/replay_command.h"

#include <climits>
#include <cstdio>
#include <optional>
#include <string>

#include "stress/record_replay.h"
#include "tools/options.h"
#include "vm/replayer.h"
#include "vm/virtual_machine.h"

namespace sluice::tools {
namespace {

struct ReplayOptions {
  std::string path;
  vm::DeviceMap device_map;
  std::string scheduling = "dedicated";
  bool check_sync = false;
  bool no_verify = false;
  int repeat = 1;
  std::string ops = "stress";
};

void DeclareOptions(OptionParser& parser, ReplayOptions* options) {
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

}  // namespace

int ReplayMain(int argc, char** argv) {
  ReplayOptions options;
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
  stress::RecordReplayOptions replay;
  replay.path = options.path;
  replay.device_map = options.device_map;
  replay.check_sync = options.check_sync;
  replay.verify = !options.no_verify;
  replay.repeat = options.repeat;
  replay.standard_ops = options.ops == "standard";
  replay.scheduling = options.scheduling == "caller" ? vm::VmOptions::Scheduling::kCallerThread
                                                     : vm::VmOptions::Scheduling::kDedicatedThread;
  absl::StatusOr<stress::RecordReplayTotals> totals = stress::ReplayRecordFile(replay);
  if (!totals.ok()) return ReportFailure("replay", totals.status());
  std::fprintf(stderr, "sluice replay: %s: %lld instructions, %lld blobs, %lld checksums\n",
               options.path.c_str(), static_cast<long long>(totals->recorded_instructions),
               static_cast<long long>(totals->recorded_blobs),
               static_cast<long long>(totals->recorded_checksums));
  for (const vm::ChecksumMismatch& m : totals->mismatches) {
    if (m.released) {
      std::fprintf(stderr, "%s:%d: %s: storage was released in the replay\n", options.path.c_str(),
                   m.line, m.blob.c_str());
    } else {
      std::fprintf(stderr, "%s:%d: %s: checksum %016llx, recorded %016llx\n", options.path.c_str(),
                   m.line, m.blob.c_str(), static_cast<unsigned long long>(m.actual),
                   static_cast<unsigned long long>(m.expected));
    }
  }
  if (!totals->first_sync_error.empty()) {
    std::fprintf(stderr, "first sync error: %s\n", totals->first_sync_error.c_str());
  }
  if (!totals->op_error.empty()) std::fprintf(stderr, "op error: %s\n", totals->op_error.c_str());
  if (!totals->shutdown_error.empty()) {
    std::fprintf(stderr, "shutdown: %s\n", totals->shutdown_error.c_str());
  }
  std::printf("%s\n", totals->ToJson().c_str());
  return totals->ok() ? kExitOk : kExitFailure;
}

}  // namespace sluice::tools
