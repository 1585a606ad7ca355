// `sluice run` (execute a program file with .npy feeds, fetches and parameters) and
// `sluice demo` (build and train the demo model, printing the loss as it falls).
#ifndef SLUICE_TOOLS_PROGRAM_COMMANDS_H_
#define SLUICE_TOOLS_PROGRAM_COMMANDS_H_

namespace sluice::tools {

int RunMain(int argc, char** argv);
int DemoMain(int argc, char** argv);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_PROGRAM_COMMANDS_H_
