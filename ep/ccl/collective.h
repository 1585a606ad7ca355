// Collective calls: what a communicator is asked to do (ep/ccl/communicator.h). A call is
// plain data: the kind, the reduction, the element type, the buffers and their counts, and
// the shape and label that errors name.
#ifndef SLUICE_EP_CCL_COLLECTIVE_H_
#define SLUICE_EP_CCL_COLLECTIVE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"

namespace sluice::ep::ccl {

enum class CollectiveKind : uint8_t {
  kAllReduce,      // every rank gets the reduction of every rank's buffer
  kAllGather,      // every rank gets the ranks' buffers concatenated in rank order
  kReduceScatter,  // rank r gets part r of the reduction (the buffer split in `size` parts)
  kBroadcast,      // every rank gets the root's buffer
  kReduce,         // the root gets the reduction; every other rank gets zeros
  kSend,           // this rank's buffer goes to `peer`
  kRecv,           // this rank's buffer comes from `peer`
};
absl::string_view CollectiveKindName(CollectiveKind kind);  // "all_reduce", ...

// Reductions. On bool, sum and max are logical or, min is logical and, and mean is refused.
// On integers, mean is the sum divided by the number of ranks, rounded toward zero.
enum class ReduceOp : uint8_t { kSum, kMean, kMax, kMin };
absl::string_view ReduceOpName(ReduceOp op);  // "sum", "mean", "max", "min"
// InvalidArgument naming `name` and the accepted ones.
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

// One collective call. Buffers are the caller's (host memory for host communicators,
// device memory of the stream's device for device communicators) and stay valid until the
// call completes on its stream.
//   all_reduce, broadcast, reduce: `send` and `recv` hold `count` elements (they may alias).
//   all_gather: `send` holds `count`, `recv` holds count x size.
//   reduce_scatter: `send` holds count x size, `recv` holds `count`.
//   send: `send` holds `count`; recv: `recv` holds `count`.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  ReduceOp reduce = ReduceOp::kSum;
  DataType dtype = DataType::kF32;
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t count = 0;
  int peer = 0;             // the root (broadcast, reduce) or the other rank (send, recv)
  Shape shape;              // this rank's input shape, compared across ranks and named in errors
  absl::string_view label;  // what errors name: the op and its variable
};

// "all_reduce(sum) of f32[4, 3] 'w@GRAD'": how errors describe a call.
std::string DescribeCall(const CollectiveCall& call);

}  // namespace sluice::ep::ccl

#endif  // SLUICE_EP_CCL_COLLECTIVE_H_
