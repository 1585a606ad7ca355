// Schemas of the collective family: data moved between the ranks of the Runtime's world
// (ep/ccl/world.h), on the ccl stream of the operands' device.
//
//   all_reduce      X... -> Out...   every rank gets the reduction ('reduce': sum, mean,
//                                    max, min) of every rank's X; several tensors of one
//                                    dtype go as one call (a bucket of gradients)
//   all_gather      X -> Out         Out [nranks * d0, d...]: the ranks' X in rank order,
//                                    times 'scale' (floats; 1 by default: the gradient of
//                                    a mean reduce_scatter scales)
//   reduce_scatter  X -> Out         X [nranks * k, d...]; Out [k, d...]: part `rank` of
//                                    the reduction
//   broadcast       X -> Out         every rank gets rank 'root's X
//   reduce          X -> Out         rank 'root' gets the reduction, the others zeros
//   send            X ->             X goes to rank 'peer'
//   recv            -> Out           Out ('dtype', 'shape') comes from rank 'peer'
//
// 'nranks' is the world's size: inference needs it and knows no world, so front ends fill
// it in and the kernel checks it. Every dtype works, and empty tensors; on bool, sum and
// max are a logical or, min a logical and, and mean is refused. Gradients: all_reduce (sum,
// mean) -> all_reduce of the same; all_gather -> reduce_scatter(sum); reduce_scatter ->
// all_gather (with 'scale' 1/nranks for mean); broadcast -> reduce(sum) to the root; reduce(sum) ->
// broadcast from the root. max and min reductions, send and recv have none.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/status.h"
#include "ep/ccl/collective.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;

absl::Status CheckReduce(const InferContext& ctx, bool allow_bool_mean = false) {
  SLUICE_ASSIGN_OR_RETURN(std::string name, ctx.attrs().GetString("reduce"));
  absl::StatusOr<ep::ccl::ReduceOp> op = ep::ccl::ParseReduceOp(name);
  if (!op.ok()) return ctx.Error(op.status().message());
  for (int slot = 0; slot < ctx.num_input_slots(); ++slot) {
    for (const TensorMeta& m : ctx.inputs(slot)) {
      if (*op == ep::ccl::ReduceOp::kMean && m.dtype == DataType::kBool && !allow_bool_mean) {
        return ctx.Error("the mean of bool values is not defined");
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Ranks(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(int64_t nranks, ctx.attrs().GetInt("nranks"));
  if (nranks < 1) {
    return ctx.Error(absl::StrCat("attribute 'nranks' is ", nranks, "; expected >= 1"));
  }
  return nranks;
}

absl::StatusOr<Metas> InferAllReduce(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(CheckReduce(ctx));
  const std::vector<TensorMeta>& xs = ctx.inputs(0);
  for (size_t i = 1; i < xs.size(); ++i) {
    if (xs[i].dtype != xs[0].dtype) {
      return ctx.Error(absl::StrCat("every X must have one dtype (one call moves them): X 0 is ",
                                    DataTypeName(xs[0].dtype), ", X ", i, " is ",
                                    DataTypeName(xs[i].dtype)));
    }
  }
  return Metas{xs};
}

absl::StatusOr<Metas> InferAllGather(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(int64_t nranks, Ranks(ctx));
  TensorMeta out = ctx.input(0);
  SLUICE_ASSIGN_OR_RETURN(double scale, ctx.attrs().GetFloat("scale"));
  if (scale != 1.0) SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, out, "X with a 'scale'"));
  if (out.shape.rank() < 1) return ctx.Error("X must have at least one dimension to gather along");
  std::vector<int64_t> dims(out.shape.dims().begin(), out.shape.dims().end());
  dims[0] *= nranks;
  out.shape = Shape(dims);
  return Single(out);
}

absl::StatusOr<Metas> InferReduceScatter(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(CheckReduce(ctx));
  SLUICE_ASSIGN_OR_RETURN(int64_t nranks, Ranks(ctx));
  TensorMeta out = ctx.input(0);
  if (out.shape.rank() < 1 || out.shape.dim(0) % nranks != 0) {
    return ctx.Error(absl::StrCat("X ", out.shape.ToString(),
                                  " must have a first dimension divisible by nranks ", nranks));
  }
  std::vector<int64_t> dims(out.shape.dims().begin(), out.shape.dims().end());
  dims[0] /= nranks;
  out.shape = Shape(dims);
  return Single(out);
}

absl::StatusOr<Metas> InferRooted(const InferContext& ctx, absl::string_view attr) {
  SLUICE_ASSIGN_OR_RETURN(int64_t root, ctx.attrs().GetInt(attr));
  if (root < 0)
    return ctx.Error(absl::StrCat("attribute '", attr, "' is ", root, "; expected >= 0"));
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferSend(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(InferRooted(ctx, "peer").status());
  return Metas{};
}

absl::StatusOr<Metas> InferRecv(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(int64_t peer, ctx.attrs().GetInt("peer"));
  if (peer < 0) return ctx.Error(absl::StrCat("attribute 'peer' is ", peer, "; expected >= 0"));
  SLUICE_ASSIGN_OR_RETURN(Shape shape, ShapeAttr(ctx));
  SLUICE_ASSIGN_OR_RETURN(DataType dtype, DtypeAttr(ctx));
  return Single(TensorMeta{dtype, shape});
}

// On the ccl stream of the operands' device (of the caller's device for recv).
absl::StatusOr<Placement> PlaceOnCcl(absl::Span<const Device> inputs, const vm::AttrMap&,
                                     Device default_device) {
  const Device device = inputs.empty() ? default_device : inputs[0];
  for (const Device& d : inputs) {
    if (d != device) {
      return absl::InvalidArgumentError(
          absl::StrCat("every operand must be on one device; they are on ", device.ToString(),
                       " and ", d.ToString()));
    }
  }
  Placement placement;
  placement.stream = StreamKey{device, StreamType::kCcl, 0};
  placement.output_device = device;
  return placement;
}

// The forward op's group ('ranks') carried over to a gradient op's attributes.
vm::AttrMap InGroup(const GradContext& g, vm::AttrMap attrs) {
  attrs.Set("ranks", g.attrs().GetInts("ranks").value_or(std::vector<int64_t>{}));
  return attrs;
}

std::string Reduction(const GradContext& g) {
  absl::StatusOr<std::string> reduce = g.attrs().GetString("reduce");
  return reduce.ok() ? *reduce : "sum";
}

std::vector<GradOpDesc> AllReduceGrad(const GradContext& g) {
  const std::string reduce = Reduction(g);
  if (reduce != "sum" && reduce != "mean") return {};
  vm::AttrMap attrs;
  attrs.Set("reduce", reduce);
  return {GradOp("all_reduce", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}},
                 InGroup(g, attrs))};
}

std::vector<GradOpDesc> AllGatherGrad(const GradContext& g) {
  vm::AttrMap attrs;
  attrs.Set("reduce", std::string("sum"));
  attrs.Set("nranks", g.attrs().GetInt("nranks").value_or(1));
  return {GradOp("reduce_scatter", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}},
                 InGroup(g, attrs))};
}

std::vector<GradOpDesc> ReduceScatterGrad(const GradContext& g) {
  const std::string reduce = Reduction(g);
  if (reduce != "sum" && reduce != "mean") return {};
  const int64_t nranks = g.attrs().GetInt("nranks").value_or(1);
  vm::AttrMap attrs;
  attrs.Set("nranks", nranks);
  if (reduce == "sum") {
    return {GradOp("all_gather", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}},
                   InGroup(g, attrs))};
  }
  // One op (eager autograd takes a gradient op's outputs to be input gradients).
  attrs.Set("scale", 1.0 / static_cast<double>(nranks));
  return {GradOp("all_gather", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}},
                 InGroup(g, attrs))};
}

std::vector<GradOpDesc> BroadcastGrad(const GradContext& g) {
  vm::AttrMap attrs;
  attrs.Set("reduce", std::string("sum"));
  attrs.Set("root", g.attrs().GetInt("root").value_or(0));
  return {GradOp("reduce", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}},
                 InGroup(g, attrs))};
}

std::vector<GradOpDesc> ReduceGrad(const GradContext& g) {
  if (Reduction(g) != "sum") return {};
  vm::AttrMap attrs;
  attrs.Set("root", g.attrs().GetInt("root").value_or(0));
  return {GradOp("broadcast", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}},
                 InGroup(g, attrs))};
}

}  // namespace

absl::Status RegisterCollectiveOps(OpRegistry* registry) {
  const std::string sum("sum");
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("all_reduce")
                                   .Input("X", /*variadic=*/true)
                                   .Output("Out", /*variadic=*/true)
                                   .Attr("reduce", AttrType::kString, sum)
                                   .Infer(InferAllReduce)
                                   .Attr("ranks", AttrType::kInts, std::vector<int64_t>{})
                                   .Place(PlaceOnCcl)
                                   .Grad(AllReduceGrad)
                                   // Data parallelism reduces gradients in place.
                                   .InPlace("X", "Out")
                                   .Flags(kOpOrdered)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("all_gather")
                                   .Input("X")
                                   .Output("Out")
                                   .Attr("nranks", AttrType::kInt, std::nullopt)
                                   .Attr("scale", AttrType::kFloat, 1.0)
                                   .Infer(InferAllGather)
                                   .Attr("ranks", AttrType::kInts, std::vector<int64_t>{})
                                   .Place(PlaceOnCcl)
                                   .Grad(AllGatherGrad)
                                   .Flags(kOpOrdered)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("reduce_scatter")
                                   .Input("X")
                                   .Output("Out")
                                   .Attr("reduce", AttrType::kString, sum)
                                   .Attr("nranks", AttrType::kInt, std::nullopt)
                                   .Infer(InferReduceScatter)
                                   .Attr("ranks", AttrType::kInts, std::vector<int64_t>{})
                                   .Place(PlaceOnCcl)
                                   .Grad(ReduceScatterGrad)
                                   .Flags(kOpOrdered)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema("broadcast")
          .Input("X")
          .Output("Out")
          .Attr("root", AttrType::kInt, int64_t{0})
          .Infer([](const InferContext& ctx) { return InferRooted(ctx, "root"); })
          .Attr("ranks", AttrType::kInts, std::vector<int64_t>{})
          .Place(PlaceOnCcl)
          .Grad(BroadcastGrad)
          .InPlace("X", "Out")  // the communicators take send == recv
          .Flags(kOpOrdered)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("reduce")
                                   .Input("X")
                                   .Output("Out")
                                   .Attr("reduce", AttrType::kString, sum)
                                   .Attr("root", AttrType::kInt, int64_t{0})
                                   .Infer([](const InferContext& ctx) -> absl::StatusOr<Metas> {
                                     SLUICE_RETURN_IF_ERROR(CheckReduce(ctx));
                                     return InferRooted(ctx, "root");
                                   })
                                   .Attr("ranks", AttrType::kInts, std::vector<int64_t>{})
                                   .Place(PlaceOnCcl)
                                   .Grad(ReduceGrad)
                                   .InPlace("X", "Out")
                                   .Flags(kOpOrdered)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("send")
                                   .Input("X")
                                   .Attr("peer", AttrType::kInt, std::nullopt)
                                   .Infer(InferSend)
                                   .Attr("ranks", AttrType::kInts, std::vector<int64_t>{})
                                   .Place(PlaceOnCcl)
                                   .Flags(kOpSideEffects | kOpOrdered)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("recv")
                                   .Output("Out")
                                   .Attr("peer", AttrType::kInt, std::nullopt)
                                   .Attr("shape", AttrType::kInts, std::nullopt)
                                   .Attr("dtype", AttrType::kString, std::string("f32"))
                                   .Infer(InferRecv)
                                   .Attr("ranks", AttrType::kInts, std::vector<int64_t>{})
                                   .Place(PlaceOnCcl)
                                   .Flags(kOpSideEffects | kOpOrdered)));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
