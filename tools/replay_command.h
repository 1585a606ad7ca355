// `sluice replay FILE`: re-executes a recorded instruction stream (vm/recorder.h) and
// compares the final blobs with the checksums stored in the file.
#ifndef SLUICE_TOOLS_REPLAY_COMMAND_H_
#define SLUICE_TOOLS_REPLAY_COMMAND_H_

namespace sluice::tools {

// argv[0] is "replay". Returns the process exit code (tools/options.h): 0 when every
// checksum matched and no op or sync error occurred, 1 otherwise or when the record cannot
// be read, 2 for a usage error.
int ReplayMain(int argc, char** argv);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_REPLAY_COMMAND_H_
