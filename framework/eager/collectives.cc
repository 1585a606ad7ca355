#include "framework/eager/collectives.h"

#include <string>

#include "core/status.h"

namespace sluice::eager {

namespace {

vm::AttrMap ReduceAttrs(ReduceOp op) {
  vm::AttrMap attrs;
  attrs.Set("reduce", std::string(ep::ccl::ReduceOpName(op)));
  return attrs;
}

absl::Status CheckValid(const Tensor& x, absl::string_view op) {
  if (x.valid()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("op '", op, "': the input tensor is empty"));
}

}  // namespace

int WorldRank(const Context& ctx) { return ctx.runtime()->world().rank(); }
int WorldSize(const Context& ctx) { return ctx.runtime()->world().size(); }

absl::StatusOr<Tensor> AllReduce(const Tensor& x, ReduceOp op) {
  SLUICE_RETURN_IF_ERROR(CheckValid(x, "all_reduce"));
  return x.context().CallSingle("all_reduce", {x}, ReduceAttrs(op));
}

absl::StatusOr<std::vector<Tensor>> AllReduce(const std::vector<Tensor>& xs, ReduceOp op) {
  if (xs.empty()) return std::vector<Tensor>();
  for (const Tensor& x : xs) SLUICE_RETURN_IF_ERROR(CheckValid(x, "all_reduce"));
  return xs[0].context().Call("all_reduce", {xs}, ReduceAttrs(op));
}

absl::StatusOr<Tensor> AllGather(const Tensor& x) {
  SLUICE_RETURN_IF_ERROR(CheckValid(x, "all_gather"));
  Context ctx = x.context();
  vm::AttrMap attrs;
  attrs.Set("nranks", int64_t{WorldSize(ctx)});
  return ctx.CallSingle("all_gather", {x}, attrs);
}

absl::StatusOr<Tensor> ReduceScatter(const Tensor& x, ReduceOp op) {
  SLUICE_RETURN_IF_ERROR(CheckValid(x, "reduce_scatter"));
  Context ctx = x.context();
  vm::AttrMap attrs = ReduceAttrs(op);
  attrs.Set("nranks", int64_t{WorldSize(ctx)});
  return ctx.CallSingle("reduce_scatter", {x}, attrs);
}

absl::StatusOr<Tensor> Broadcast(const Tensor& x, int root) {
  SLUICE_RETURN_IF_ERROR(CheckValid(x, "broadcast"));
  vm::AttrMap attrs;
  attrs.Set("root", int64_t{root});
  return x.context().CallSingle("broadcast", {x}, attrs);
}

absl::StatusOr<Tensor> Reduce(const Tensor& x, int root, ReduceOp op) {
  SLUICE_RETURN_IF_ERROR(CheckValid(x, "reduce"));
  vm::AttrMap attrs = ReduceAttrs(op);
  attrs.Set("root", int64_t{root});
  return x.context().CallSingle("reduce", {x}, attrs);
}

absl::Status Send(const Tensor& x, int peer) {
  SLUICE_RETURN_IF_ERROR(CheckValid(x, "send"));
  vm::AttrMap attrs;
  attrs.Set("peer", int64_t{peer});
  return x.context().Call("send", {{x}}, attrs).status();
}

absl::StatusOr<Tensor> Recv(Context& ctx, DataType dtype, const Shape& shape, int peer,
                            Device device) {
  vm::AttrMap attrs;
  attrs.Set("peer", int64_t{peer});
  attrs.Set("dtype", std::string(DataTypeName(dtype)));
  attrs.Set("shape", std::vector<int64_t>(shape.dims().begin(), shape.dims().end()));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> out, ctx.Call("recv", {}, attrs, device));
  return out.at(0);
}

}  // namespace sluice::eager
