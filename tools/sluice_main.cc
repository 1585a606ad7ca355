// The `sluice` tool: one binary, one subcommand per job.
#include <cstdio>
#include <cstring>

#include "absl/strings/string_view.h"
#include "tools/selfcheck.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "usage: sluice <command> [options]\n"
               "\n"
               "commands:\n"
               "  selfcheck   create every execution provider (cpu, sim, cuda when present),\n"
               "              stream work through each device and print a summary\n"
               "  help        show this message\n"
               "\n"
               "Run 'sluice <command> --help' for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  const absl::string_view command = argv[1];
  if (command == "help" || command == "--help" || command == "-h") {
    PrintUsage(stdout);
    return 0;
  }
  if (command == "selfcheck") return sluice::tools::SelfCheckMain(argc - 1, argv + 1);
  std::fprintf(stderr, "sluice: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
