// Collectives on eager tensors (ops/collective_ops.cc): each runs on the ccl stream of its
// tensor's device, across the ranks of the context's world (ContextOptions::runtime.world;
// alone, a world of one rank, where each is a copy). Like every eager op they return at
// once; the VM orders them after the work that produces their inputs (soft sync) and keeps
// them in call order on the ccl stream. Every rank must call the same collectives in the
// same order: a rank that calls another kind, dtype or shape gets InvalidArgument naming
// every rank's call, when the op runs.
#ifndef SLUICE_FRAMEWORK_EAGER_COLLECTIVES_H_
#define SLUICE_FRAMEWORK_EAGER_COLLECTIVES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "ep/ccl/collective.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"

namespace sluice::eager {

using ReduceOp = ep::ccl::ReduceOp;

// This process's rank and the world's size.
int WorldRank(const Context& ctx);
int WorldSize(const Context& ctx);

absl::StatusOr<Tensor> AllReduce(const Tensor& x, ReduceOp op = ReduceOp::kSum);
// Several tensors of one dtype and device reduced in one call (a bucket).
absl::StatusOr<std::vector<Tensor>> AllReduce(const std::vector<Tensor>& xs,
                                              ReduceOp op = ReduceOp::kSum);
// [size * d0, d...]: every rank's x along the first dimension, in rank order.
absl::StatusOr<Tensor> AllGather(const Tensor& x);
// x [size * k, d...] -> [k, d...]: this rank's part of the reduction.
absl::StatusOr<Tensor> ReduceScatter(const Tensor& x, ReduceOp op = ReduceOp::kSum);
absl::StatusOr<Tensor> Broadcast(const Tensor& x, int root);
// The reduction on `root`, zeros elsewhere.
absl::StatusOr<Tensor> Reduce(const Tensor& x, int root, ReduceOp op = ReduceOp::kSum);
absl::Status Send(const Tensor& x, int peer);
absl::StatusOr<Tensor> Recv(Context& ctx, DataType dtype, const Shape& shape, int peer,
                            Device device);

}  // namespace sluice::eager

#endif  // SLUICE_FRAMEWORK_EAGER_COLLECTIVES_H_
