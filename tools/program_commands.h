// `sluice run` (execute a program file with .npy feeds, fetches and parameters) and
// `sluice demo` (build and train the demo model, printing the loss as it falls).
#ifndef SLUICE_TOOLS_PROGRAM_COMMANDS_H_
#define SLUICE_TOOLS_PROGRAM_COMMANDS_H_

namespace sluice::tools {

// argv[0] is "run" / "demo". Return the process exit code (tools/options.h): 0 on success,
// 1 when the run failed (demo: also when the loss did not fall every step; run: also when
// --sync-check found a violation), 2 for a usage error.
int RunMain(int argc, char** argv);
int DemoMain(int argc, char** argv);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_PROGRAM_COMMANDS_H_
