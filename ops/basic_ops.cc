// Schemas of the basic family: constants, copies, casts, scaling, sums and random tensors.
//
//   fill_constant    -> Out        attrs shape (required), dtype="f32", value=0
//   fill_zeros_like  X -> Out      zeros of X's dtype and shape
//   assign           X -> Out      a copy              grad: assign
//   cast             X -> Out      attr dtype          grad: cast_grad(Out@GRAD, X)
//   cast_grad        OutGrad, X -> XGrad   OutGrad cast back to X's dtype
//   scale            X -> Out      Out = scale * X + bias (attrs scale=1, bias=0)
//                                  grad: scale(scale=scale, bias=0)
//   sum              X... -> Out   elementwise sum of same-shaped tensors (gradient
//                                  accumulation)       grad: assign to each input
//   memcpy_h2d       X -> Out      attr device: X on cpu, Out on `device`, runs on the
//                                  device's h2d stream
//   memcpy_d2h       X -> Out      X on a device, Out on cpu, runs on X's device's d2h
//                                  stream
//   uniform_random   -> Out        attrs shape, dtype="f32", min=-1, max=1, seed=0
//   gaussian_random  -> Out        attrs shape, dtype="f32", mean=0, std=1, seed=0
// The random ops are counter-based: element i of a tensor depends only on (seed, i), so a
// seed reproduces the same tensor on every device and any split of the work.
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;

absl::StatusOr<Metas> InferConstant(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(Shape shape, ShapeAttr(ctx));
  SLUICE_ASSIGN_OR_RETURN(DataType dtype, DtypeAttr(ctx));
  return Single({dtype, std::move(shape)});
}

absl::StatusOr<Metas> InferRandom(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(Shape shape, ShapeAttr(ctx));
  SLUICE_ASSIGN_OR_RETURN(DataType dtype, DtypeAttr(ctx));
  if (!IsFloating(dtype)) {
    return ctx.Error(absl::StrCat("dtype ", DataTypeName(dtype), " is not f32 or f64"));
  }
  return Single({dtype, std::move(shape)});
}

absl::StatusOr<Metas> InferSum(const InferContext& ctx) {
  const std::vector<TensorMeta>& xs = ctx.inputs(0);
  for (size_t i = 1; i < xs.size(); ++i) {
    if (!(xs[i] == xs[0])) {
      return ctx.Error(absl::StrCat("input X[", i, "] is ", DataTypeName(xs[i].dtype),
                                    xs[i].shape.ToString(), " but X[0] is ",
                                    DataTypeName(xs[0].dtype), xs[0].shape.ToString(),
                                    "; sum adds tensors of one dtype and shape"));
    }
  }
  return Single(xs[0]);
}

absl::StatusOr<Metas> InferScale(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, ctx.input(0), "input X"));
  return Single(ctx.input(0));
}

absl::StatusOr<Device> DeviceAttr(const vm::AttrMap& attrs, absl::string_view op) {
  SLUICE_ASSIGN_OR_RETURN(std::string text, attrs.GetString("device"));
  absl::StatusOr<Device> device = Device::Parse(text);
  if (!device.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("op '", op, "': attribute 'device': ", device.status().message()));
  }
  return device;
}

absl::StatusOr<Placement> PlaceH2D(absl::Span<const Device> inputs, const vm::AttrMap& attrs,
                                   Device) {
  SLUICE_ASSIGN_OR_RETURN(Device device, DeviceAttr(attrs, "memcpy_h2d"));
  if (inputs.size() != 1 || inputs[0].type() != DeviceType::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat("op 'memcpy_h2d': input X must be on cpu, it is on ",
                     inputs.empty() ? "nothing" : inputs[0].ToString()));
  }
  Placement placement;
  placement.stream.device = device;
  placement.stream.type = device.IsAsync() ? StreamType::kHost2Device : StreamType::kCompute;
  placement.output_device = device;
  return placement;
}

absl::StatusOr<Placement> PlaceD2H(absl::Span<const Device> inputs, const vm::AttrMap&, Device) {
  if (inputs.size() != 1) {
    return absl::InvalidArgumentError("op 'memcpy_d2h': takes one input");
  }
  Placement placement;
  placement.stream.device = inputs[0];
  placement.stream.type = inputs[0].IsAsync() ? StreamType::kDevice2Host : StreamType::kCompute;
  placement.output_device = Device(DeviceType::kCpu, 0);
  return placement;
}

std::vector<GradOpDesc> AssignGrad(const GradContext& g) {
  return {GradOp("assign", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}})};
}

// fill_constant, fill_zeros_like, assign, cast and cast_grad.
absl::Status RegisterFillAndCastOps(OpRegistry* registry) {
  const std::vector<int64_t> no_dims;
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("fill_constant")
                                   .Output("Out")
                                   .Attr("shape", AttrType::kInts, std::nullopt)
                                   .Attr("dtype", AttrType::kString, std::string("f32"))
                                   .Attr("value", AttrType::kFloat, 0.0)
                                   .Infer(InferConstant)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("fill_zeros_like")
                                                      .Input("X")
                                                      .Output("Out")
                                                      .Infer(SameAsInput())
                                                      .InPlace("X", "Out")
                                                      .Flags(kOpElementwise)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("assign")
                                                      .Input("X")
                                                      .Output("Out")
                                                      .Infer(SameAsInput())
                                                      .Grad(AssignGrad)
                                                      .InPlace("X", "Out")
                                                      .Flags(kOpElementwise)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema("cast")
          .Input("X")
          .Output("Out")
          .Attr("dtype", AttrType::kString, std::nullopt)
          .Infer([](const InferContext& ctx) -> absl::StatusOr<Metas> {
            SLUICE_ASSIGN_OR_RETURN(DataType dtype, DtypeAttr(ctx));
            return Single({dtype, ctx.input(0).shape});
          })
          .Grad([](const GradContext& g) {
            return std::vector<GradOpDesc>{
                GradOp("cast_grad", {{"OutGrad", g.OutputGrad("Out")}, {"X", g.Input("X")}},
                       {{"XGrad", g.InputGrad("X")}})};
          })
          // An alias is one variable, so of one dtype: only a cast to the same dtype, a copy.
          .InPlace("X", "Out")
          .Flags(kOpElementwise)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema("cast_grad")
          .Input("OutGrad")
          .Input("X")
          .Output("XGrad")
          .Infer([](const InferContext& ctx) -> absl::StatusOr<Metas> {
            if (!(ctx.input(0).shape == ctx.input(1).shape)) {
              return ctx.Error(absl::StrCat("OutGrad is ", ctx.input(0).shape.ToString(),
                                            " but X is ", ctx.input(1).shape.ToString()));
            }
            return Single({ctx.input(1).dtype, ctx.input(1).shape});
          })));
  return absl::OkStatus();
}

// scale, sum, the host-device copies and the random sources.
absl::Status RegisterScaleSumCopyAndRandomOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema("scale")
          .Input("X")
          .Output("Out")
          .Attr("scale", AttrType::kFloat, 1.0)
          .Attr("bias", AttrType::kFloat, 0.0)
          .Infer(InferScale)
          .Grad([](const GradContext& g) {
            vm::AttrMap attrs;
            attrs.Set("scale", g.attrs().GetFloat("scale").value_or(1.0)).Set("bias", 0.0);
            return std::vector<GradOpDesc>{
                GradOp("scale", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}}, attrs)};
          })
          .InPlace("X", "Out")
          .Flags(kOpElementwise)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema("sum")
          .Input("X", /*variadic=*/true)
          .Output("Out")
          .Infer(InferSum)
          .Grad([](const GradContext& g) {
            std::vector<GradOpDesc> ops;
            const std::vector<std::string> grads = g.InputGrad("X");
            for (const std::string& grad : grads) {
              ops.push_back(GradOp("assign", {{"X", g.OutputGrad("Out")}}, {{"Out", {grad}}}));
            }
            return ops;
          })
          .InPlace("X", "Out")  // the first X (pairs match positions)
          .Flags(kOpElementwise)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("memcpy_h2d")
                                   .Input("X")
                                   .Output("Out")
                                   .Attr("device", AttrType::kString, std::nullopt)
                                   .Infer(SameAsInput())
                                   .Place(PlaceH2D)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema("memcpy_d2h").Input("X").Output("Out").Infer(SameAsInput()).Place(PlaceD2H)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("uniform_random")
                                   .Output("Out")
                                   .Attr("shape", AttrType::kInts, std::nullopt)
                                   .Attr("dtype", AttrType::kString, std::string("f32"))
                                   .Attr("min", AttrType::kFloat, -1.0)
                                   .Attr("max", AttrType::kFloat, 1.0)
                                   .Attr("seed", AttrType::kInt, int64_t{0})
                                   .Infer(InferRandom)
                                   .Flags(kOpRandom)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("gaussian_random")
                                   .Output("Out")
                                   .Attr("shape", AttrType::kInts, std::nullopt)
                                   .Attr("dtype", AttrType::kString, std::string("f32"))
                                   .Attr("mean", AttrType::kFloat, 0.0)
                                   .Attr("std", AttrType::kFloat, 1.0)
                                   .Attr("seed", AttrType::kInt, int64_t{0})
                                   .Infer(InferRandom)
                                   .Flags(kOpRandom)));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterBasicOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(RegisterFillAndCastOps(registry));
  return RegisterScaleSumCopyAndRandomOps(registry);
}

}  // namespace sluice::ops::internal
