// Data-parallel training as a program transform: every rank runs the same program on its
// share of the batch, and the transform makes the ranks agree.
//  - Feeds split along their first dimension: each rank is fed rows
//    [rank * B / size, (rank + 1) * B / size). The transformed program declares the
//    per-rank shapes, inferred forward through the block.
//  - Gradients of parameters (P@GRAD for each is_parameter P) are averaged across ranks
//    by all_reduce(mean) ops on the ccl stream, in buckets: gradients in the order their
//    last writer runs (the backward order), each bucket closed at `bucket_bytes` or when the
//    next gradient is read before it is produced; a bucket's all_reduce goes right after
//    the op that produces its last gradient, so it overlaps the rest of the backward pass.
//  - Persistables the program initializes (writes before anything reads them: a startup
//    program) are broadcast from rank 0 afterwards, so every replica starts equal.
//  - `averaged` variables (a loss to report) are averaged at the end of the block.
// With equal shares, the mean of the ranks' mean gradients is the gradient of the whole
// batch's mean loss: the replicas take the single-process steps.
#ifndef SLUICE_FRAMEWORK_DISTRIBUTED_DATA_PARALLEL_H_
#define SLUICE_FRAMEWORK_DISTRIBUTED_DATA_PARALLEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/executor/program_transform.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"

namespace sluice::framework {

struct DataParallelOptions {
  // Gradients per all_reduce, by bytes: a bucket closes once it holds at least this much.
  int64_t bucket_bytes = int64_t{1} << 20;
  // Variables averaged across ranks at the end of the block, in programs that write them
  // (fetch them to report a global value, such as the loss).
  std::vector<std::string> averaged;
  // Feeds every rank gets whole (not split).
  std::vector<std::string> replicated_feeds;
};

struct DataParallelStats {
  int64_t buckets = 0;
  int64_t gradients = 0;
  int64_t gradient_bytes = 0;
  int64_t broadcasts = 0;
};

// The program `rank` of `size` runs. `split_feeds`: the feeds split across ranks. Errors:
// InvalidArgument naming the feed whose first dimension `size` does not divide, the op
// whose shape inference refuses the per-rank shapes; Unimplemented for split feeds in a program
// with sub-blocks (their shapes are not re-inferred).
absl::StatusOr<ir::ProgramDesc> MakeDataParallel(const ir::ProgramDesc& program,
                                                 const ops::OpRegistry& registry,
                                                 absl::Span<const std::string> split_feeds,
                                                 int size, const DataParallelOptions& options,
                                                 DataParallelStats* stats = nullptr);

// This rank's rows of `feed` (its first dimension split in `size` equal parts).
// InvalidArgument naming `name` for a scalar or a first dimension `size` does not divide.
absl::StatusOr<HostTensor> ShardFeed(const std::string& name, const HostTensor& feed, int rank,
                                     int size);

// Data-parallel training as the program transform an Executor is handed
// (ExecutorOptions::transform): every program runs as MakeDataParallel makes it for `size`
// ranks, its host feeds split along their first dimension with this rank (`rank`) taking
// its rows (ShardFeed), except options.replicated_feeds; device-resident feeds are refused
// (Unimplemented). Every rank must run the same programs in the same order. `registry`
// must outlive the transform. InvalidArgument for a rank outside [0, size).
absl::StatusOr<std::shared_ptr<const ProgramTransform>> MakeDataParallelTransform(
    const ops::OpRegistry* registry, int rank, int size, DataParallelOptions options);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_DISTRIBUTED_DATA_PARALLEL_H_
