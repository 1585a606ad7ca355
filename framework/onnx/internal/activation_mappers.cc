// Mappers for ONNX's activation functions that Sluice has no op of its own for, each as a
// composition of the builder's elementwise ops (node_table.h). Each composition is chosen to
// give ONNX's values for infinities and NaN too, with the exceptions its table row states.
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
namespace {

constexpr double kSqrtTwoOverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kSqrtTwo = 1.41421356237309504880;

// A rank-0 constant `value` of x's dtype (a fill_constant op), for the binary ops to
// broadcast. Unlike Scale(x, 0), it stays finite where x is infinite or NaN.
absl::StatusOr<Value> ScalarLike(const NodeContext& ctx, const Value& x, double value) {
  return Built(ctx, fn::FillConstant(Shape(), value, x.var().dtype()));
}

// min(exp(x), 1) - 1: exp(x) - 1 where x <= 0, 0 where x > 0 (+inf too); NaN stays NaN.
absl::StatusOr<Value> ExpM1NonPositive(const NodeContext& ctx, const Value& x) {
  SLUICE_ASSIGN_OR_RETURN(Value e, Built(ctx, fn::Exp(x)));
  SLUICE_ASSIGN_OR_RETURN(Value one, ScalarLike(ctx, x, 1.0));
  SLUICE_ASSIGN_OR_RETURN(Value capped, Built(ctx, fn::Minimum(e, one)));
  return Built(ctx, fn::Scale(capped, 1.0, -1.0));
}

}  // namespace

absl::StatusOr<Value> StableSoftplus(const NodeContext& ctx, const Value& x) {
  SLUICE_ASSIGN_OR_RETURN(Value abs, Built(ctx, fn::Abs(x)));
  SLUICE_ASSIGN_OR_RETURN(Value neg_abs, Built(ctx, fn::Neg(abs)));
  SLUICE_ASSIGN_OR_RETURN(Value e, Built(ctx, fn::Exp(neg_abs)));
  SLUICE_ASSIGN_OR_RETURN(Value one_plus_e, Built(ctx, fn::Scale(e, 1.0, 1.0)));
  SLUICE_ASSIGN_OR_RETURN(Value log, Built(ctx, fn::Log(one_plus_e)));
  SLUICE_ASSIGN_OR_RETURN(Value relu, Built(ctx, fn::Relu(x)));
  return Built(ctx, fn::Add(relu, log));
}

// alpha in (0, 1]: max(x, alpha x); otherwise relu(x) + alpha * -relu(-x), which keeps
// alpha x exact for x < 0 (0 * -inf is NaN, as in ONNX) and x itself for x >= 0.
absl::Status MapLeakyRelu(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"alpha"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(double alpha, ctx.FloatAttr("alpha", 0.01f));
  Value out = x;
  if (alpha > 0.0 && alpha <= 1.0) {
    SLUICE_ASSIGN_OR_RETURN(Value scaled, Built(ctx, fn::Scale(x, alpha)));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Maximum(x, scaled)));
  } else {
    SLUICE_ASSIGN_OR_RETURN(Value neg, Built(ctx, fn::Neg(x)));
    SLUICE_ASSIGN_OR_RETURN(Value neg_part, Built(ctx, fn::Relu(neg)));
    SLUICE_ASSIGN_OR_RETURN(Value scaled, Built(ctx, fn::Scale(neg_part, -alpha)));
    SLUICE_ASSIGN_OR_RETURN(Value pos_part, Built(ctx, fn::Relu(x)));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Add(pos_part, scaled)));
  }
  return ctx.SetOutput(0, out);
}

// Elu: relu(x) + alpha (min(exp(x), 1) - 1); Selu: gamma (relu(x) + alpha min(exp(x), 1) -
// alpha), ONNX's gamma (alpha e^x - alpha) where x <= 0. Any alpha.
absl::Status MapElu(NodeContext& ctx) {
  const bool selu = ctx.node().op_type() == "Selu";
  SLUICE_RETURN_IF_ERROR(selu ? ctx.OnlyAttrs({"alpha", "gamma"}) : ctx.OnlyAttrs({"alpha"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(double alpha,
                          ctx.FloatAttr("alpha", selu ? 1.67326319217681884765625f : 1.0f));
  SLUICE_ASSIGN_OR_RETURN(double gamma, ctx.FloatAttr("gamma", 1.05070102214813232421875f));
  SLUICE_ASSIGN_OR_RETURN(Value relu, Built(ctx, fn::Relu(x)));
  Value neg_part = x;
  if (selu) {
    SLUICE_ASSIGN_OR_RETURN(Value e, Built(ctx, fn::Exp(x)));
    SLUICE_ASSIGN_OR_RETURN(Value one, ScalarLike(ctx, x, 1.0));
    SLUICE_ASSIGN_OR_RETURN(Value capped, Built(ctx, fn::Minimum(e, one)));
    SLUICE_ASSIGN_OR_RETURN(neg_part, Built(ctx, fn::Scale(capped, alpha, -alpha)));
  } else {
    SLUICE_ASSIGN_OR_RETURN(Value em1, ExpM1NonPositive(ctx, x));
    SLUICE_ASSIGN_OR_RETURN(neg_part, Built(ctx, fn::Scale(em1, alpha)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Add(relu, neg_part)));
  if (selu) {
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Scale(out, gamma)));
  }
  return ctx.SetOutput(0, out);
}

// max(0, x) + min(0, alpha (exp(x / alpha) - 1)), ONNX's formula as written.
absl::Status MapCelu(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"alpha"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(double alpha, ctx.FloatAttr("alpha", 1.0));
  Value scaled = x;
  if (alpha != 1.0) {
    SLUICE_ASSIGN_OR_RETURN(Value divisor, ScalarLike(ctx, x, alpha));
    SLUICE_ASSIGN_OR_RETURN(scaled, Built(ctx, fn::Div(x, divisor)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value e, Built(ctx, fn::Exp(scaled)));
  SLUICE_ASSIGN_OR_RETURN(Value em1, Built(ctx, fn::Scale(e, 1.0, -1.0)));
  SLUICE_ASSIGN_OR_RETURN(Value neg_part, Built(ctx, fn::Scale(em1, alpha)));
  SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarLike(ctx, x, 0.0));
  SLUICE_ASSIGN_OR_RETURN(Value capped, Built(ctx, fn::Minimum(neg_part, zero)));
  SLUICE_ASSIGN_OR_RETURN(Value relu, Built(ctx, fn::Relu(x)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Add(relu, capped)));
  return ctx.SetOutput(0, out);
}

// HardSigmoid: clip(alpha x + beta, 0, 1); HardSwish: x HardSigmoid(x) with alpha 1/6 and
// beta 0.5 (ONNX's function body).
absl::Status MapHardSigmoid(NodeContext& ctx) {
  const bool swish = ctx.node().op_type() == "HardSwish";
  SLUICE_RETURN_IF_ERROR(swish ? ctx.OnlyAttrs({}) : ctx.OnlyAttrs({"alpha", "beta"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  double alpha = static_cast<float>(1.0 / 6.0);
  double beta = 0.5;
  if (!swish) {
    SLUICE_ASSIGN_OR_RETURN(alpha, ctx.FloatAttr("alpha", 0.2f));
    SLUICE_ASSIGN_OR_RETURN(beta, ctx.FloatAttr("beta", 0.5));
  }
  SLUICE_ASSIGN_OR_RETURN(Value linear, Built(ctx, fn::Scale(x, alpha, beta)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Clip(linear, 0.0, 1.0)));
  if (swish) {
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Mul(x, out)));
  }
  return ctx.SetOutput(0, out);
}

// x / (1 + |x|).
absl::Status MapSoftsign(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value abs, Built(ctx, fn::Abs(x)));
  SLUICE_ASSIGN_OR_RETURN(Value denominator, Built(ctx, fn::Scale(abs, 1.0, 1.0)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Div(x, denominator)));
  return ctx.SetOutput(0, out);
}

// Softplus: log(1 + exp(x)) without overflow (StableSoftplus); Mish: x tanh(softplus(x)).
absl::Status MapSoftplus(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value out, StableSoftplus(ctx, x));
  if (ctx.node().op_type() == "Mish") {
    SLUICE_ASSIGN_OR_RETURN(Value t, Built(ctx, fn::Tanh(out)));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Mul(x, t)));
  }
  return ctx.SetOutput(0, out);
}

// clip(x, alpha, inf) * (x > alpha): x where x > alpha, else 0 (-inf included: the clip
// keeps the product finite). NaN stays NaN, where ONNX gives 0.
absl::Status MapThresholdedRelu(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"alpha"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(double alpha, ctx.FloatAttr("alpha", 1.0));
  if (std::isnan(alpha)) return ctx.Error("alpha is NaN");
  SLUICE_ASSIGN_OR_RETURN(Value threshold, ScalarLike(ctx, x, alpha));
  SLUICE_ASSIGN_OR_RETURN(Value above, Built(ctx, fn::GreaterThan(x, threshold)));
  SLUICE_ASSIGN_OR_RETURN(Value mask, Built(ctx, fn::Cast(above, x.var().dtype())));
  SLUICE_ASSIGN_OR_RETURN(Value clipped,
                          Built(ctx, fn::Clip(x, alpha, std::numeric_limits<double>::infinity())));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Mul(clipped, mask)));
  return ctx.SetOutput(0, out);
}

// approximate="none" (the default): x (0.5 + 0.5 erf(x / sqrt(2))); approximate="tanh": x (0.5
// + 0.5 tanh(sqrt(2/pi) (x + 0.044715 x^3))). Each rounds as ONNX's 0.5 x (1 + ...) does (the
// halvings are exact).
absl::Status MapGelu(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"approximate"}));
  SLUICE_ASSIGN_OR_RETURN(std::string approximate, ctx.StringAttr("approximate", "none"));
  if (approximate != "none" && approximate != "tanh") {
    return ctx.Error(
        absl::StrCat("attribute approximate='", approximate, "' is neither 'none' nor 'tanh'"));
  }
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  Value gate = x;  // erf(x / sqrt(2)) or tanh(...), in [-1, 1]
  if (approximate == "none") {
    SLUICE_ASSIGN_OR_RETURN(Value sqrt_two, ScalarLike(ctx, x, kSqrtTwo));
    SLUICE_ASSIGN_OR_RETURN(Value arg, Built(ctx, fn::Div(x, sqrt_two)));
    SLUICE_ASSIGN_OR_RETURN(gate, Built(ctx, fn::Erf(arg)));
  } else {
    SLUICE_ASSIGN_OR_RETURN(Value cube, Built(ctx, fn::Pow(x, 3.0)));
    SLUICE_ASSIGN_OR_RETURN(Value cubic_term, Built(ctx, fn::Scale(cube, 0.044715)));
    SLUICE_ASSIGN_OR_RETURN(Value inner, Built(ctx, fn::Add(x, cubic_term)));
    SLUICE_ASSIGN_OR_RETURN(Value arg, Built(ctx, fn::Scale(inner, kSqrtTwoOverPi)));
    SLUICE_ASSIGN_OR_RETURN(gate, Built(ctx, fn::Tanh(arg)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value half_one_plus, Built(ctx, fn::Scale(gate, 0.5, 0.5)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Mul(x, half_one_plus)));
  return ctx.SetOutput(0, out);
}

}  // namespace sluice::framework::onnx::internal
