// `sluice stress`: random eager programs over cpu and sim streams, run through the VM with
// the sync checker on and compared with a sequential reference; with --control-flow, random
// static programs with cond and while run through the executor instead
// (stress/stress_control_flow_runner.h); the run loops
// are the sluice_stress library (stress/eager_stress.h).
#ifndef SLUICE_TOOLS_STRESS_COMMAND_H_
#define SLUICE_TOOLS_STRESS_COMMAND_H_

namespace sluice::tools {

// argv[0] is "stress". Returns the process exit code (tools/options.h): 0 when no problem
// was found (with --expect-errors: when one was), 1 otherwise, 2 for a usage error.
int StressMain(int argc, char** argv);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_STRESS_COMMAND_H_
