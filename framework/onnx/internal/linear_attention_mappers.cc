// ONNX LinearAttention (opset 27) unrolled at import over the static sequence length T, as
// its recurrence is defined (node_table.h). Q [B, T, Hq * dk], K [B, T, Hkv * dk] and
// V [B, T, Hkv * dv] are split into heads; the state S [B, Hkv, dk, dv] starts at past_state
// (or zeros) and for each step t
//
//   gated, gated_delta:  S = S * exp(g_t)      g_t per head or per key dimension (decay)
//   delta, gated_delta:  v_t = beta_t (v_t - k_t^T S)
//   every rule:          S = S + k_t v_t^T     (an outer product: a matmul)
//                        o_t = scale q_t^T S   (S's heads repeated for the query heads, GQA)
//
// then Y is the steps' o_t concatenated and merged back to [B, T, Hq * dv], and present_state
// is S. ONNX's reference computes in float32 whatever the inputs; this computes in the
// inputs' type (FLOAT or DOUBLE). Refused, naming the node: other update rules, a decay or
// beta the rule does not take or lacks, shapes that do not divide into the heads, and more
// than 8192 steps.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
// File-local helpers, in a namespace of their own: a unity build compiles this file with the
// other mappers.
namespace linear_attention_mapping {

constexpr int kPastState = 3, kDecay = 4, kBeta = 5;
constexpr int64_t kMaxSteps = 8192;

// [B, T, H * D] -> [B, H, T, D].
absl::StatusOr<Value> Heads(const NodeContext& ctx, const Value& x, int64_t heads,
                            absl::string_view what) {
  const Shape s = x.var().shape();
  if (s.rank() != 3 || heads <= 0 || s.dim(2) % heads != 0) {
    return ctx.Error(absl::StrCat(what, " ", s.ToString(), " is not [B, T, heads * size] for ",
                                  heads, " heads"));
  }
  SLUICE_ASSIGN_OR_RETURN(
      Value r, Built(ctx, fn::Reshape(x, {s.dim(0), s.dim(1), heads, s.dim(2) / heads})));
  return Built(ctx, fn::Transpose(r, {0, 2, 1, 3}));
}

// Step t of x [B, H, T, D]: [B, H, 1, D].
absl::StatusOr<Value> Step(const NodeContext& ctx, const Value& x, int64_t t) {
  return Built(ctx, fn::Slice(x, {t}, {t + 1}, {2}));
}

}  // namespace linear_attention_mapping

absl::Status MapLinearAttention(NodeContext& ctx) {
  using namespace linear_attention_mapping;  // NOLINT(build/namespaces): this file's helpers
  SLUICE_RETURN_IF_ERROR(
      ctx.OnlyAttrs({"chunk_size", "kv_num_heads", "q_num_heads", "scale", "update_rule"}));
  SLUICE_ASSIGN_OR_RETURN(const int64_t hq, ctx.IntAttr("q_num_heads", 0));
  SLUICE_ASSIGN_OR_RETURN(const int64_t hkv, ctx.IntAttr("kv_num_heads", 0));
  SLUICE_ASSIGN_OR_RETURN(const double scale_attr, ctx.FloatAttr("scale", 0.0));
  SLUICE_ASSIGN_OR_RETURN(const std::string rule, ctx.StringAttr("update_rule", "gated_delta"));
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta") {
    return ctx.Error(
        absl::StrCat("update_rule '", rule, "' is not linear, gated, delta or gated_delta"));
  }
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0) {
    return ctx.Error(absl::StrCat("q_num_heads (", hq,
                                  ") must be a positive multiple of "
                                  "kv_num_heads (",
                                  hkv, "), both given"));
  }
  const bool gated = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  if (gated != ctx.HasInput(kDecay) || delta != ctx.HasInput(kBeta)) {
    return ctx.Error(absl::StrCat("update_rule '", rule, "' takes ", gated ? "a decay" : "no decay",
                                  " and ", delta ? "a beta" : "no beta", " input"));
  }
  SLUICE_ASSIGN_OR_RETURN(Value query, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value key, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(Value value, ctx.Input(2));
  const DataType dtype = query.var().dtype();
  if (dtype != DataType::kF32 && dtype != DataType::kF64) {
    return ctx.Error(absl::StrCat("query is ", DataTypeName(dtype), "; FLOAT and DOUBLE only"));
  }
  SLUICE_ASSIGN_OR_RETURN(Value q, Heads(ctx, query, hq, "query"));
  SLUICE_ASSIGN_OR_RETURN(Value k, Heads(ctx, key, hkv, "key"));
  SLUICE_ASSIGN_OR_RETURN(Value v, Heads(ctx, value, hkv, "value"));
  const Shape qs = q.var().shape(), ks = k.var().shape(), vs = v.var().shape();
  const int64_t b = qs.dim(0), steps = qs.dim(2), dk = qs.dim(3), dv = vs.dim(3);
  if (ks.dim(0) != b || ks.dim(2) != steps || ks.dim(3) != dk || vs.dim(0) != b ||
      vs.dim(2) != steps) {
    return ctx.Error(absl::StrCat("query ", qs.ToString(), ", key ", ks.ToString(), " and value ",
                                  vs.ToString(), " (in heads) do not agree"));
  }
  if (steps > kMaxSteps) {
    return ctx.Error(
        absl::StrCat("T is ", steps, "; at most ", kMaxSteps, " steps are unrolled at import"));
  }
  const Shape state_shape({b, hkv, dk, dv});
  Value state = q;  // assigned below
  if (ctx.HasInput(kPastState)) {
    SLUICE_ASSIGN_OR_RETURN(state, ctx.Input(kPastState));
    if (state.var().shape() != state_shape || state.var().dtype() != dtype) {
      return ctx.Error(absl::StrCat("past_state is ", state.var().shape().ToString(),
                                    "; it must be ", state_shape.ToString()));
    }
  } else {
    SLUICE_ASSIGN_OR_RETURN(state, Built(ctx, fn::FillConstant(state_shape, 0.0, dtype)));
  }
  // decay as [B, Hkv, T, 1 or dk]; beta as [B, 1 or Hkv, T, 1].
  std::optional<Value> decay, beta;
  if (gated) {
    SLUICE_ASSIGN_OR_RETURN(Value g, ctx.Input(kDecay));
    const Shape gs = g.var().shape();
    if (gs.rank() != 3 || gs.dim(0) != b || gs.dim(1) != steps ||
        (gs.dim(2) != hkv && gs.dim(2) != hkv * dk)) {
      return ctx.Error(absl::StrCat("decay ", gs.ToString(), " must be [", b, ", ", steps, ", ",
                                    hkv, " or ", hkv * dk, "]"));
    }
    SLUICE_ASSIGN_OR_RETURN(g, Built(ctx, fn::Exp(g)));
    SLUICE_ASSIGN_OR_RETURN(decay, Heads(ctx, g, hkv, "decay"));
  }
  if (delta) {
    SLUICE_ASSIGN_OR_RETURN(Value r, ctx.Input(kBeta));
    const Shape rs = r.var().shape();
    if (rs.rank() != 3 || rs.dim(0) != b || rs.dim(1) != steps ||
        (rs.dim(2) != hkv && rs.dim(2) != 1)) {
      return ctx.Error(
          absl::StrCat("beta ", rs.ToString(), " must be [", b, ", ", steps, ", ", hkv, " or 1]"));
    }
    SLUICE_ASSIGN_OR_RETURN(beta, Heads(ctx, r, rs.dim(2), "beta"));
  }
  const double scale = scale_attr != 0.0 ? scale_attr : 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<Value> outputs;
  for (int64_t t = 0; t < steps; ++t) {
    SLUICE_ASSIGN_OR_RETURN(Value k_t, Step(ctx, k, t));  // [B, Hkv, 1, dk]
    SLUICE_ASSIGN_OR_RETURN(Value v_t, Step(ctx, v, t));  // [B, Hkv, 1, dv]
    if (gated) {
      SLUICE_ASSIGN_OR_RETURN(Value e, Step(ctx, *decay, t));  // [B, Hkv, 1, 1 or dk]
      SLUICE_ASSIGN_OR_RETURN(e, Built(ctx, fn::Transpose(e, {0, 1, 3, 2})));
      SLUICE_ASSIGN_OR_RETURN(state, Built(ctx, fn::Mul(state, e)));
    }
    if (delta) {
      SLUICE_ASSIGN_OR_RETURN(Value retrieved, Built(ctx, fn::Matmul(k_t, state)));
      SLUICE_ASSIGN_OR_RETURN(Value diff, Built(ctx, fn::Sub(v_t, retrieved)));
      SLUICE_ASSIGN_OR_RETURN(Value rate, Step(ctx, *beta, t));  // [B, 1 or Hkv, 1, 1]
      SLUICE_ASSIGN_OR_RETURN(v_t, Built(ctx, fn::Mul(rate, diff)));
    }
    SLUICE_ASSIGN_OR_RETURN(Value outer, Built(ctx, fn::Matmul(k_t, v_t, /*transpose_x=*/true)));
    SLUICE_ASSIGN_OR_RETURN(state, Built(ctx, fn::Add(state, outer)));
    SLUICE_ASSIGN_OR_RETURN(Value read, RepeatHeads(ctx, state, hq / hkv));
    SLUICE_ASSIGN_OR_RETURN(Value q_t, Step(ctx, q, t));  // [B, Hq, 1, dk]
    SLUICE_ASSIGN_OR_RETURN(Value o_t, Built(ctx, fn::Matmul(q_t, read)));
    SLUICE_ASSIGN_OR_RETURN(o_t, Built(ctx, fn::Scale(o_t, scale)));
    outputs.push_back(o_t);
  }
  Value y = outputs.empty() ? q : outputs[0];
  if (outputs.size() > 1) {
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Concat(outputs, 2)));  // [B, Hq, T, dv]
  }
  if (outputs.empty()) {
    return ctx.Error("T is 0; there is no step to unroll");
  }
  SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Transpose(y, {0, 2, 1, 3})));
  SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Reshape(y, {b, steps, hq * dv})));
  // Last: an output takes its ONNX name, which the Values above would no longer find.
  SLUICE_RETURN_IF_ERROR(ctx.SetOutput(1, state));  // present_state
  return ctx.SetOutput(0, y);
}

}  // namespace sluice::framework::onnx::internal
