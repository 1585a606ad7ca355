// ProgramTransform: a whole-program rewrite an Executor is handed (ExecutorOptions::transform)
// and applies to every program it builds, with the matching change to each run's host feeds.
// Data parallelism is one (framework/distributed/data_parallel.h: the replica program with
// its gradient all-reduces, and this rank's rows of each feed); the executor knows nothing
// of what a transform does. Implementations are immutable once made, and the executor calls
// them from any thread: every method is const and thread-safe.
#ifndef SLUICE_FRAMEWORK_EXECUTOR_PROGRAM_TRANSFORM_H_
#define SLUICE_FRAMEWORK_EXECUTOR_PROGRAM_TRANSFORM_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/interpreter.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework {

class ProgramTransform {
 public:
  virtual ~ProgramTransform() = default;

  // The program to build and run instead of `program`, which is fed `host_feeds` as host
  // tensors (and the rest of its feeds as device blobs). Called once per program and feed
  // set the executor builds (its interpreter cache keeps the result). An error fails the
  // run before anything is built, and names the transform.
  virtual absl::StatusOr<ir::ProgramDesc> Rewrite(
      const ir::ProgramDesc& program, absl::Span<const std::string> host_feeds) const = 0;

  // The host feeds one run stages, from the caller's `feeds` (already checked against the
  // caller's program); `device_feeds` are the run's device-resident feeds.
  virtual absl::StatusOr<Feeds> MapFeeds(const Feeds& feeds,
                                         const BlobFeeds& device_feeds) const = 0;
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_EXECUTOR_PROGRAM_TRANSFORM_H_
