// Schemas of the shape and optimizer family: ops that move elements without changing them
// (reshape, transpose, concat, split, their grad ops) and the in-place optimizer updates.
//
//   reshape      X -> Out        attr shape (required): -1 once at most (inferred from the
//                                element count), 0 copies X's dim at that index (Paddle);
//                                all dtypes        grad: reshape_grad(Out@GRAD, X)
//   reshape_grad OutGrad, X -> XGrad   OutGrad's elements in X's shape (X only for its shape)
//   transpose    X -> Out        attr perm (required): a permutation of 0..rank-1,
//                                Out.dim(i) = X.dim(perm[i]); all dtypes
//                                grad: transpose with the inverse perm
//   concat       X... -> Out     attr axis=0 (negative counts from the back): the inputs agree
//                                on dtype, rank and every other dim; all dtypes
//                                grad: concat_grad(Out@GRAD, X...)
//   concat_grad  OutGrad, X... -> XGrad...   attr axis=0: OutGrad cut into X's shapes along
//                                axis (X only for their shapes)
//   split        X -> Out...     attrs axis=0, num=0, sections=[] (exactly one of num and
//                                sections is set): num equal parts, or parts of the given
//                                sizes with one -1 at most (the rest); all dtypes
//                                grad: concat(Out@GRAD...) along axis. Every output must have a
//                                gradient: autodiff supplies zeros (fill_zeros_like) for an
//                                output nobody differentiates.
//   sgd          Param, Grad, LearningRate -> ParamOut       ParamOut = Param - lr * Grad;
//                                f32/f64; LearningRate is [1] or a scalar of Param's dtype.
//                                Side effects: callers pass the Param tensor as ParamOut
//                                (OpDispatcher::CallInto). No grad.
//   adam         Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow
//                  -> ParamOut, Moment1Out, Moment2Out, Beta1PowOut, Beta2PowOut
//                                attrs beta1=0.9, beta2=0.999, epsilon=1e-8; f32/f64. Paddle's
//                                update, with b1p/b2p the Beta1Pow/Beta2Pow inputs (beta^t for
//                                the step t being taken: start them at beta1 and beta2):
//                                  m1  = beta1 * m1 + (1 - beta1) * g
//                                  m2  = beta2 * m2 + (1 - beta2) * g * g
//                                  lr_t = lr * sqrt(1 - b2p) / (1 - b1p)
//                                  p   = p - lr_t * m1 / (sqrt(m2) + epsilon * sqrt(1 - b2p))
//                                  b1p = b1p * beta1,  b2p = b2p * beta2
//                                lr_t and epsilon * sqrt(1 - b2p) are computed in double, the
//                                rest in Param's dtype. Side effects, updated in place like
//                                sgd. No grad.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;

std::string ListText(const std::vector<int64_t>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

absl::StatusOr<std::vector<int64_t>> IntsAttr(const InferContext& ctx, absl::string_view name) {
  absl::StatusOr<std::vector<int64_t>> values = ctx.attrs().GetInts(name);
  if (!values.ok()) return ctx.Error(values.status().message());
  return values;
}

absl::StatusOr<int64_t> IntAttr(const InferContext& ctx, absl::string_view name) {
  absl::StatusOr<int64_t> value = ctx.attrs().GetInt(name);
  if (!value.ok()) return ctx.Error(value.status().message());
  return value;
}

absl::StatusOr<double> FloatAttr(const InferContext& ctx, absl::string_view name) {
  absl::StatusOr<double> value = ctx.attrs().GetFloat(name);
  if (!value.ok()) return ctx.Error(value.status().message());
  return value;
}

// The "axis" attribute normalized into [0, rank) for `x` (`what` names x in errors).
absl::StatusOr<int> AxisAttr(const InferContext& ctx, const TensorMeta& x, absl::string_view what) {
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, IntAttr(ctx, "axis"));
  const int rank = x.shape.rank();
  if (rank == 0) {
    return ctx.Error(absl::StrCat(what, " is ", MetaText(x), ", a scalar; it needs rank >= 1"));
  }
  if (axis < -rank || axis >= rank) {
    return ctx.Error(absl::StrCat("attribute axis ", axis, " is out of range for ", what, " ",
                                  MetaText(x), " (rank ", rank, ")"));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

absl::StatusOr<Metas> InferReshape(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> attr, IntsAttr(ctx, "shape"));
  const std::string where =
      absl::StrCat("attribute shape ", ListText(attr), " for X ", MetaText(x));
  std::vector<int64_t> dims(attr.size());
  int unknown = -1;
  for (size_t i = 0; i < attr.size(); ++i) {
    const int64_t v = attr[i];
    if (v == -1) {
      if (unknown >= 0) return ctx.Error(absl::StrCat(where, ": more than one -1"));
      unknown = static_cast<int>(i);
      dims[i] = 1;
    } else if (v == 0) {
      if (static_cast<int>(i) >= x.shape.rank()) {
        return ctx.Error(absl::StrCat(where, ": dim ", i, " is 0 (copy X's dim ", i,
                                      ") but X has rank ", x.shape.rank()));
      }
      dims[i] = x.shape.dim(static_cast<int>(i));
    } else if (v < -1) {
      return ctx.Error(absl::StrCat(where, ": dim ", i, " is ", v, "; dims are >= -1"));
    } else {
      dims[i] = v;
    }
  }
  absl::StatusOr<Shape> known = Shape::Make(dims);
  if (!known.ok()) return ctx.Error(absl::StrCat(where, ": ", known.status().message()));
  const int64_t count = x.shape.NumElements();
  if (unknown >= 0) {
    const int64_t rest = known->NumElements();
    if (rest == 0) {
      return ctx.Error(absl::StrCat(where, ": cannot infer the -1, the other dims multiply to 0"));
    }
    if (count % rest != 0) {
      return ctx.Error(absl::StrCat(where, ": X has ", count,
                                    " elements, not a multiple of the other dims' product ", rest));
    }
    dims[unknown] = count / rest;
  }
  Shape out(dims);
  if (out.NumElements() != count) {
    return ctx.Error(absl::StrCat("cannot reshape X ", MetaText(x), " (", count, " elements) to ",
                                  out.ToString(), " (", out.NumElements(),
                                  " elements; attribute shape ", ListText(attr), ")"));
  }
  return Single({x.dtype, std::move(out)});
}

absl::StatusOr<Metas> InferReshapeGrad(const InferContext& ctx) {
  const TensorMeta& dout = ctx.input(0);
  const TensorMeta& x = ctx.input(1);
  if (dout.shape.NumElements() != x.shape.NumElements()) {
    return ctx.Error(absl::StrCat("OutGrad ", MetaText(dout), " and X ", MetaText(x),
                                  " have different element counts"));
  }
  return Single({dout.dtype, x.shape});
}

// perm is a permutation of 0..rank-1 for `x`.
absl::StatusOr<std::vector<int64_t>> PermAttr(const InferContext& ctx, const TensorMeta& x) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> perm, IntsAttr(ctx, "perm"));
  const int rank = x.shape.rank();
  bool ok = static_cast<int>(perm.size()) == rank;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    return ctx.Error(absl::StrCat("attribute perm ", ListText(perm), " is not a permutation of 0..",
                                  rank - 1, " for X ", MetaText(x), " of rank ", rank));
  }
  return perm;
}

absl::StatusOr<Metas> InferTranspose(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, PermAttr(ctx, x));
  Shape::Dims dims;
  for (int64_t p : perm) dims.push_back(x.shape.dim(static_cast<int>(p)));
  return Single({x.dtype, Shape(dims)});
}

// The concat of `xs` along the "axis" attribute; `what` names the inputs in errors ("X").
absl::StatusOr<TensorMeta> ConcatMeta(const InferContext& ctx, const std::vector<TensorMeta>& xs,
                                      absl::string_view what) {
  SLUICE_ASSIGN_OR_RETURN(const int axis, AxisAttr(ctx, xs[0], absl::StrCat(what, "[0]")));
  Shape::Dims dims(xs[0].shape.dims().begin(), xs[0].shape.dims().end());
  for (size_t i = 1; i < xs.size(); ++i) {
    const TensorMeta& x = xs[i];
    bool ok = x.dtype == xs[0].dtype && x.shape.rank() == xs[0].shape.rank();
    for (int d = 0; ok && d < x.shape.rank(); ++d) {
      ok = d == axis || x.shape.dim(d) == xs[0].shape.dim(d);
    }
    if (!ok) {
      return ctx.Error(absl::StrCat(
          "input ", what, "[", i, "] is ", MetaText(x), " but ", what, "[0] is ", MetaText(xs[0]),
          "; concat inputs agree on dtype, rank and every dim but axis ", axis));
    }
    dims[axis] += x.shape.dim(axis);
  }
  return TensorMeta{xs[0].dtype, Shape(dims)};
}

absl::StatusOr<Metas> InferConcat(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(TensorMeta out, ConcatMeta(ctx, ctx.inputs(0), "X"));
  return Single(std::move(out));
}

absl::StatusOr<Metas> InferConcatGrad(const InferContext& ctx) {
  const TensorMeta& dout = ctx.input(0);
  const std::vector<TensorMeta>& xs = ctx.inputs(1);
  SLUICE_ASSIGN_OR_RETURN(const TensorMeta out, ConcatMeta(ctx, xs, "X"));
  if (dout.shape != out.shape) {
    return ctx.Error(
        absl::StrCat("OutGrad is ", MetaText(dout), " but the concat of X is ", MetaText(out)));
  }
  std::vector<TensorMeta> grads;
  for (const TensorMeta& x : xs) grads.push_back({dout.dtype, x.shape});
  return Metas{std::move(grads)};
}

absl::StatusOr<Metas> InferSplit(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  SLUICE_ASSIGN_OR_RETURN(const int axis, AxisAttr(ctx, x, "X"));
  SLUICE_ASSIGN_OR_RETURN(const int64_t num, IntAttr(ctx, "num"));
  SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> sections, IntsAttr(ctx, "sections"));
  if ((num != 0) == !sections.empty()) {
    return ctx.Error(
        absl::StrCat("exactly one of attributes num and sections must be set; got num ", num,
                     " and sections ", ListText(sections)));
  }
  const int64_t dim = x.shape.dim(axis);
  const std::string where =
      absl::StrCat("X ", MetaText(x), " along axis ", axis, " (size ", dim, ")");
  std::vector<int64_t> sizes;
  if (num != 0) {
    if (num < 0 || dim % num != 0) {
      return ctx.Error(absl::StrCat("cannot split ", where, " into num ", num, " equal parts"));
    }
    sizes.assign(num, dim / num);
  } else {
    int unknown = -1;
    int64_t total = 0;
    for (size_t i = 0; i < sections.size(); ++i) {
      const int64_t s = sections[i];
      if (s < -1 || (s == -1 && unknown >= 0)) {
        return ctx.Error(absl::StrCat("attribute sections ", ListText(sections),
                                      ": sizes are >= 0 with one -1 at most"));
      }
      if (s == -1) {
        unknown = static_cast<int>(i);
      } else {
        total += s;
      }
    }
    if ((unknown >= 0 && total > dim) || (unknown < 0 && total != dim)) {
      return ctx.Error(absl::StrCat("cannot split ", where, " into sections ", ListText(sections),
                                    " (they sum to ", total, ")"));
    }
    sizes = sections;
    if (unknown >= 0) sizes[unknown] = dim - total;
  }
  const int want = ctx.output_count(0);
  if (want >= 0 && want != static_cast<int>(sizes.size())) {
    return ctx.Error(absl::StrCat("splitting ", where, " gives ", sizes.size(),
                                  " outputs, the caller expects ", want));
  }
  std::vector<TensorMeta> outs;
  for (int64_t size : sizes) {
    Shape::Dims dims(x.shape.dims().begin(), x.shape.dims().end());
    dims[axis] = size;
    outs.push_back({x.dtype, Shape(dims)});
  }
  return Metas{std::move(outs)};
}

// `t` has the dtype and shape of `like`.
absl::Status RequireLike(const InferContext& ctx, const TensorMeta& t, absl::string_view what,
                         const TensorMeta& like, absl::string_view like_what) {
  if (t == like) return absl::OkStatus();
  return ctx.Error(absl::StrCat(what, " is ", MetaText(t), " but ", like_what, " is ",
                                MetaText(like), "; they must match"));
}

// `t` is a one-element tensor ([1] or a scalar) of `dtype`.
absl::Status RequireScalarOf(const InferContext& ctx, const TensorMeta& t, absl::string_view what,
                             DataType dtype) {
  const bool shape_ok = t.shape.rank() == 0 || (t.shape.rank() == 1 && t.shape.dim(0) == 1);
  if (shape_ok && t.dtype == dtype) return absl::OkStatus();
  return ctx.Error(absl::StrCat(what, " is ", MetaText(t), "; it must be ", DataTypeName(dtype),
                                "[1] or a ", DataTypeName(dtype), " scalar, like Param"));
}

absl::StatusOr<Metas> InferSgd(const InferContext& ctx) {
  const TensorMeta& param = ctx.input(0);
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, param, "Param"));
  SLUICE_RETURN_IF_ERROR(RequireLike(ctx, ctx.input(1), "Grad", param, "Param"));
  SLUICE_RETURN_IF_ERROR(RequireScalarOf(ctx, ctx.input(2), "LearningRate", param.dtype));
  return Single(param);
}

absl::StatusOr<Metas> InferAdam(const InferContext& ctx) {
  const TensorMeta& param = ctx.input(0);
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, param, "Param"));
  SLUICE_RETURN_IF_ERROR(RequireLike(ctx, ctx.input(1), "Grad", param, "Param"));
  SLUICE_RETURN_IF_ERROR(RequireScalarOf(ctx, ctx.input(2), "LearningRate", param.dtype));
  SLUICE_RETURN_IF_ERROR(RequireLike(ctx, ctx.input(3), "Moment1", param, "Param"));
  SLUICE_RETURN_IF_ERROR(RequireLike(ctx, ctx.input(4), "Moment2", param, "Param"));
  SLUICE_RETURN_IF_ERROR(RequireScalarOf(ctx, ctx.input(5), "Beta1Pow", param.dtype));
  SLUICE_RETURN_IF_ERROR(RequireScalarOf(ctx, ctx.input(6), "Beta2Pow", param.dtype));
  for (const char* name : {"beta1", "beta2"}) {
    SLUICE_ASSIGN_OR_RETURN(const double beta, FloatAttr(ctx, name));
    if (!(beta >= 0 && beta < 1)) {
      return ctx.Error(absl::StrCat("attribute ", name, " is ", beta, "; it must be in [0, 1)"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, FloatAttr(ctx, "epsilon"));
  if (!(epsilon >= 0)) {
    return ctx.Error(absl::StrCat("attribute epsilon is ", epsilon, "; it must be >= 0"));
  }
  return Metas{{param}, {ctx.input(3)}, {ctx.input(4)}, {ctx.input(5)}, {ctx.input(6)}};
}

std::vector<GradOpDesc> ReshapeGrad(const GradContext& g) {
  return {GradOp("reshape_grad", {{"OutGrad", g.OutputGrad("Out")}, {"X", g.Input("X")}},
                 {{"XGrad", g.InputGrad("X")}})};
}

std::vector<GradOpDesc> TransposeGrad(const GradContext& g) {
  const std::vector<int64_t> perm = g.attrs().GetInts("perm").value_or(std::vector<int64_t>{});
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    // The forward op was checked; an out-of-range entry here leaves an invalid perm that
    // the grad op's inference rejects.
    if (perm[i] >= 0 && perm[i] < static_cast<int64_t>(perm.size())) {
      inverse[perm[i]] = static_cast<int64_t>(i);
    }
  }
  return {GradOp("transpose", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}},
                 vm::AttrMap().Set("perm", inverse))};
}

std::vector<GradOpDesc> ConcatGrad(const GradContext& g) {
  return {GradOp("concat_grad", {{"OutGrad", g.OutputGrad("Out")}, {"X", g.Input("X")}},
                 {{"XGrad", g.InputGrad("X")}},
                 vm::AttrMap().Set("axis", g.attrs().GetInt("axis").value_or(0)))};
}

std::vector<GradOpDesc> SplitGrad(const GradContext& g) {
  return {GradOp("concat", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}},
                 vm::AttrMap().Set("axis", g.attrs().GetInt("axis").value_or(0)))};
}

}  // namespace

absl::Status RegisterShapeAndOptimizerOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("reshape")
                                                      .Input("X")
                                                      .Output("Out")
                                                      .Attr("shape", AttrType::kInts, std::nullopt)
                                                      .Infer(InferReshape)
                                                      .Grad(ReshapeGrad)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("reshape_grad")
                                                      .Input("OutGrad")
                                                      .Input("X")
                                                      .Output("XGrad")
                                                      .Infer(InferReshapeGrad)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("transpose")
                                                      .Input("X")
                                                      .Output("Out")
                                                      .Attr("perm", AttrType::kInts, std::nullopt)
                                                      .Infer(InferTranspose)
                                                      .Grad(TransposeGrad)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("concat")
                                                      .Input("X", /*variadic=*/true)
                                                      .Output("Out")
                                                      .Attr("axis", AttrType::kInt, int64_t{0})
                                                      .Infer(InferConcat)
                                                      .Grad(ConcatGrad)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("concat_grad")
                                                      .Input("OutGrad")
                                                      .Input("X", /*variadic=*/true)
                                                      .Output("XGrad", /*variadic=*/true)
                                                      .Attr("axis", AttrType::kInt, int64_t{0})
                                                      .Infer(InferConcatGrad)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("split")
                                   .Input("X")
                                   .Output("Out", /*variadic=*/true)
                                   .Attr("axis", AttrType::kInt, int64_t{0})
                                   .Attr("num", AttrType::kInt, int64_t{0})
                                   .Attr("sections", AttrType::kInts, std::vector<int64_t>{})
                                   .Infer(InferSplit)
                                   .Grad(SplitGrad)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("sgd")
                                                      .Input("Param")
                                                      .Input("Grad")
                                                      .Input("LearningRate")
                                                      .Output("ParamOut")
                                                      .Infer(InferSgd)
                                                      .InPlace("Param", "ParamOut")
                                                      .Flags(kOpSideEffects)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("adam")
                                                      .Input("Param")
                                                      .Input("Grad")
                                                      .Input("LearningRate")
                                                      .Input("Moment1")
                                                      .Input("Moment2")
                                                      .Input("Beta1Pow")
                                                      .Input("Beta2Pow")
                                                      .Output("ParamOut")
                                                      .Output("Moment1Out")
                                                      .Output("Moment2Out")
                                                      .Output("Beta1PowOut")
                                                      .Output("Beta2PowOut")
                                                      .Attr("beta1", AttrType::kFloat, 0.9)
                                                      .Attr("beta2", AttrType::kFloat, 0.999)
                                                      .Attr("epsilon", AttrType::kFloat, 1e-8)
                                                      .Infer(InferAdam)
                                                      .InPlace("Param", "ParamOut")
                                                      .InPlace("Moment1", "Moment1Out")
                                                      .InPlace("Moment2", "Moment2Out")
                                                      .InPlace("Beta1Pow", "Beta1PowOut")
                                                      .InPlace("Beta2Pow", "Beta2PowOut")
                                                      .Flags(kOpSideEffects)));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
