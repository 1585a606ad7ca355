// What `sluice run` and `sluice demo` do for --data-parallel: join the launcher's world
// (mpirun starts one process per rank), turn SIGTERM and SIGINT into a stop request that
// ends any collective waiting for a peer (a launcher that saw a rank die terminates the
// others: they then exit at once with a message naming the dead peer), and keep stdout to
// rank 0, so that the output reads as one run's.
#ifndef SLUICE_TOOLS_DATA_PARALLEL_SETUP_H_
#define SLUICE_TOOLS_DATA_PARALLEL_SETUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ep/ccl/world.h"

namespace sluice::tools {

// The launcher's world with `timeout_s` as the collective timeout; prints "data parallel:
// rank R of N (pid P, backend B)" on every rank, then sends the stdout of every rank but
// rank 0 to /dev/null. Installs the signal handlers. Call once, before anything else
// prints.
absl::StatusOr<std::shared_ptr<ep::ccl::World>> JoinWorld(absl::string_view command,
                                                          double timeout_s);

// `path` with ".rankR" before its extension ("trace.json" -> "trace.rank1.json"), so that
// each rank writes its own file.
std::string PerRankPath(const std::string& path, int rank);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_DATA_PARALLEL_SETUP_H_
