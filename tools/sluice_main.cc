// The `sluice` tool: one binary, one subcommand per job.
#include <cstdio>

#include "absl/strings/string_view.h"
#include "tools/onnx_command.h"
#include "tools/options.h"
#include "tools/program_commands.h"
#include "tools/replay_command.h"
#include "tools/selfcheck.h"
#include "tools/stress_command.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "usage: sluice <command> [options]\n"
               "\n"
               "commands:\n"
               "  demo        build the demo model (Linear + MSELoss + Adam) and train it,\n"
               "              printing the loss as it falls\n"
               "  run         run a program file (or an ONNX model) with .npy feeds, fetches\n"
               "              and parameters\n"
               "  import      turn an ONNX model into a program file and .npy parameters\n"
               "  selfcheck   create every execution provider (cpu, sim, cuda when present),\n"
               "              stream work through each device and print a summary\n"
               "  stress      run random multi-stream programs through the VM with the sync\n"
               "              checker on and compare them with a sequential reference\n"
               "  replay      re-execute a recorded instruction file and verify its checksums\n"
               "  help        show this message\n"
               "\n"
               "Run 'sluice <command> --help' for a command's options.\n"
               "Exit status: 0 on success, 1 when the command failed, 2 for a usage error.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "sluice: missing command\n\n");
    PrintUsage(stderr);
    return sluice::tools::kExitUsage;
  }
  const absl::string_view command = argv[1];
  if (command == "help" || command == "--help" || command == "-h") {
    PrintUsage(stdout);
    return sluice::tools::kExitOk;
  }
  if (command == "demo") return sluice::tools::DemoMain(argc - 1, argv + 1);
  if (command == "import") return sluice::tools::ImportMain(argc - 1, argv + 1);
  if (command == "run") return sluice::tools::RunMain(argc - 1, argv + 1);
  if (command == "selfcheck") return sluice::tools::SelfCheckMain(argc - 1, argv + 1);
  if (command == "stress") return sluice::tools::StressMain(argc - 1, argv + 1);
  if (command == "replay") return sluice::tools::ReplayMain(argc - 1, argv + 1);
  std::fprintf(stderr, "sluice: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return sluice::tools::kExitUsage;
}
