#include "framework/global/global_tensor.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/global/boxing.h"
#include "framework/global/sbp_signature.h"
#include "ops/op_schema.h"

namespace sluice::global {

namespace {

std::optional<int> MyParallelId(const eager::Context& ctx, const Placement& placement) {
  return placement.ParallelId(ctx.runtime()->world().rank());
}

absl::Status CheckPlacementInWorld(const eager::Context& ctx, const Placement& placement) {
  const int size = ctx.runtime()->world().size();
  for (int rank : placement.ranks()) {
    if (rank >= size) {
      return absl::InvalidArgumentError(absl::StrCat("placement ", placement.ToString(),
                                                     " names rank ", rank,
                                                     ", outside the world of ", size));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GlobalTensor> GlobalTensor::FromLocal(eager::Context& ctx,
                                                     const eager::Tensor& local,
                                                     const Placement& placement, const NdSbp& sbp,
                                                     std::optional<Shape> logical,
                                                     std::optional<DataType> dtype) {
  SLUICE_RETURN_IF_ERROR(CheckPlacementInWorld(ctx, placement));
  const std::optional<int> id = MyParallelId(ctx, placement);
  if (!id.has_value()) {
    if (!logical.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("FromLocal on a rank outside placement ",
                                                     placement.ToString(),
                                                     " needs the logical shape"));
    }
    SLUICE_RETURN_IF_ERROR(LocalShape(*logical, placement, sbp).status());
    if (!dtype.has_value() && !local.valid()) {
      return absl::InvalidArgumentError(absl::StrCat("FromLocal on a rank outside placement ",
                                                     placement.ToString(),
                                                     " with no part needs the logical dtype too"));
    }
    return GlobalTensor(ctx, placement, sbp, *logical, dtype.has_value() ? *dtype : local.dtype(),
                        std::nullopt, eager::Tensor());
  }
  if (!local.valid()) return absl::InvalidArgumentError("FromLocal: the local part is empty");
  if (local.device() != placement.device()) {
    return absl::InvalidArgumentError(
        absl::StrCat("FromLocal: the local part is on ", local.device().ToString(), "; placement ",
                     placement.ToString(), " keeps parts on ", placement.device().ToString()));
  }
  if (static_cast<int>(sbp.size()) != placement.ndim()) {
    return absl::InvalidArgumentError(absl::StrCat("sbp ", NdSbpToString(sbp), " has ", sbp.size(),
                                                   " entries; placement ", placement.ToString(),
                                                   " has ", placement.ndim(), " mesh axes"));
  }
  std::vector<int64_t> dims(local.shape().dims().begin(), local.shape().dims().end());
  for (int d = 0; d < placement.ndim(); ++d) {
    if (!sbp[d].is_split()) continue;
    if (sbp[d].axis < 0 || sbp[d].axis >= static_cast<int>(dims.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sbp ", sbp[d].ToString(), " splits a part of shape ", local.shape().ToString()));
    }
    dims[sbp[d].axis] *= placement.hierarchy()[d];
  }
  Shape shape(dims);
  if (dtype.has_value() && *dtype != local.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FromLocal: the part is ", DataTypeName(local.dtype()), ", not ", DataTypeName(*dtype)));
  }
  if (logical.has_value() && *logical != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FromLocal: parts of shape ", local.shape().ToString(), " under ", NdSbpToString(sbp),
        " make ", shape.ToString(), ", not ", logical->ToString()));
  }
  return GlobalTensor(ctx, placement, sbp, std::move(shape), local.dtype(), id, local);
}

absl::StatusOr<GlobalTensor> GlobalTensor::FromWhole(eager::Context& ctx,
                                                     const eager::Tensor& whole,
                                                     const Placement& placement, const NdSbp& sbp) {
  SLUICE_RETURN_IF_ERROR(CheckPlacementInWorld(ctx, placement));
  if (!whole.valid()) return absl::InvalidArgumentError("FromWhole: the tensor is empty");
  SLUICE_RETURN_IF_ERROR(LocalShape(whole.shape(), placement, sbp).status());
  const std::optional<int> id = MyParallelId(ctx, placement);
  if (!id.has_value()) {
    return GlobalTensor(ctx, placement, sbp, whole.shape(), whole.dtype(), std::nullopt,
                        eager::Tensor());
  }
  eager::Tensor on_device = whole;
  if (whole.device() != placement.device()) {
    SLUICE_ASSIGN_OR_RETURN(on_device, whole.To(placement.device()));
  }
  // From broadcast, boxing only slices and zeros: nothing moves between ranks.
  SLUICE_ASSIGN_OR_RETURN(eager::Tensor local, Box(on_device, placement, *id, whole.shape(),
                                                   AllBroadcast(placement.ndim()), sbp));
  return GlobalTensor(ctx, placement, sbp, whole.shape(), whole.dtype(), id, std::move(local));
}

absl::StatusOr<GlobalTensor> GlobalTensor::ToSbp(const NdSbp& sbp) const {
  SLUICE_RETURN_IF_ERROR(LocalShape(shape_, placement_, sbp).status());
  if (!parallel_id_.has_value()) {
    return GlobalTensor(ctx_, placement_, sbp, shape_, dtype_, std::nullopt, eager::Tensor());
  }
  SLUICE_ASSIGN_OR_RETURN(eager::Tensor local,
                          Box(local_, placement_, *parallel_id_, shape_, sbp_, sbp));
  return GlobalTensor(ctx_, placement_, sbp, shape_, dtype_, parallel_id_, std::move(local));
}

absl::StatusOr<eager::Tensor> GlobalTensor::Whole() const {
  if (!parallel_id_.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("this rank is outside placement ",
                                                      placement_.ToString(), ": it holds no part"));
  }
  SLUICE_ASSIGN_OR_RETURN(GlobalTensor whole, ToSbp(AllBroadcast(placement_.ndim())));
  return whole.local();
}

absl::StatusOr<std::vector<GlobalTensor>> Call(absl::string_view op,
                                               const std::vector<GlobalTensor>& inputs,
                                               const vm::AttrMap& attrs) {
  if (inputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("global op '", op, "' needs an input (its placement comes from them)"));
  }
  const GlobalTensor& first = inputs[0];
  eager::Context ctx = first.ctx_;
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].placement() != first.placement()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "global op '", op, "': input ", i, " is on ", inputs[i].placement().ToString(),
          ", input 0 on ", first.placement().ToString(), "; move one first"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(const ops::OpSchema* schema, ctx.registry().FindSchema(op));
  SLUICE_ASSIGN_OR_RETURN(vm::AttrMap normalized, schema->NormalizeAttrs(attrs));
  std::vector<std::vector<ops::TensorMeta>> metas;
  std::vector<NdSbp> sbps;
  std::vector<Shape> shapes;
  for (const GlobalTensor& t : inputs) {
    metas.push_back({ops::TensorMeta{t.dtype(), t.shape()}});
    sbps.push_back(t.sbp());
    shapes.push_back(t.shape());
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<ops::TensorMeta>> out_metas,
                          schema->InferOutputs(metas, normalized));
  const SbpSignature signature =
      InferSbpSignature(op, sbps, shapes, normalized, first.placement().ndim());
  const Placement& placement = first.placement();
  std::vector<GlobalTensor> outputs;
  const std::optional<int> id = first.parallel_id();
  if (!id.has_value()) {
    // Outside the placement: the results' metadata, and no work.
    for (const auto& slot : out_metas) {
      for (const ops::TensorMeta& m : slot) {
        outputs.push_back(GlobalTensor(ctx, placement, signature.output, m.shape, m.dtype,
                                       std::nullopt, eager::Tensor()));
      }
    }
    return outputs;
  }
  std::vector<std::vector<eager::Tensor>> locals;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(GlobalTensor boxed, inputs[i].ToSbp(signature.inputs[i]));
    locals.push_back({boxed.local()});
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<eager::Tensor> results, ctx.Call(op, locals, attrs));
  size_t k = 0;
  for (const auto& slot : out_metas) {
    for (const ops::TensorMeta& m : slot) {
      if (k >= results.size()) return absl::InternalError("an output went missing");
      SLUICE_ASSIGN_OR_RETURN(Shape expected, LocalShape(m.shape, placement, signature.output));
      if (results[k].shape() != expected) {
        return absl::InternalError(
            absl::StrCat("global op '", op, "': the local result has shape ",
                         results[k].shape().ToString(), " where ", NdSbpToString(signature.output),
                         " of ", m.shape.ToString(), " needs ", expected.ToString()));
      }
      outputs.push_back(
          GlobalTensor(ctx, placement, signature.output, m.shape, m.dtype, id, results[k]));
      ++k;
    }
  }
  return outputs;
}

namespace {

absl::StatusOr<GlobalTensor> Single(absl::string_view op, const std::vector<GlobalTensor>& in,
                                    const vm::AttrMap& attrs = {}) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<GlobalTensor> out, Call(op, in, attrs));
  return out.at(0);
}

}  // namespace

absl::StatusOr<GlobalTensor> Add(const GlobalTensor& x, const GlobalTensor& y) {
  return Single("add", {x, y});
}
absl::StatusOr<GlobalTensor> Mul(const GlobalTensor& x, const GlobalTensor& y) {
  return Single("mul", {x, y});
}
absl::StatusOr<GlobalTensor> Matmul(const GlobalTensor& x, const GlobalTensor& y) {
  return Single("matmul", {x, y});
}
absl::StatusOr<GlobalTensor> Relu(const GlobalTensor& x) { return Single("relu", {x}); }
absl::StatusOr<GlobalTensor> ReduceSum(const GlobalTensor& x, std::vector<int64_t> axes,
                                       bool keepdim) {
  vm::AttrMap attrs;
  attrs.Set("axes", std::move(axes));
  attrs.Set("keepdim", int64_t{keepdim ? 1 : 0});
  return Single("reduce_sum", {x}, attrs);
}

}  // namespace sluice::global
