// `sluice selfcheck`: creates every provider's devices, streams work through each of them
// (host-to-device copy, a device-side wait, a kernel-like host task, device-to-host copy),
// checks the numbers and prints a summary.
#ifndef SLUICE_TOOLS_SELFCHECK_H_
#define SLUICE_TOOLS_SELFCHECK_H_

namespace sluice::tools {

// argv[0] is "selfcheck". Returns the process exit code (tools/options.h): 0 when every
// device passed, 1 otherwise, 2 for a usage error.
int SelfCheckMain(int argc, char** argv);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_SELFCHECK_H_
