// ONNX Attention (opsets 23 to 25) as a composition of Sluice ops (node_table.h):
//
//   Q, K, V [B, heads, S, head size]  (3-D [B, S, heads * head size] with q_num_heads and
//                                      kv_num_heads: reshaped and transposed to 4-D first)
//   K, V     <- concat(past, K or V) along the sequence when past_key and past_value are given
//              (they are then the present_key and present_value outputs)
//   K, V     <- each kv head repeated q_heads / kv_heads times, next to itself (GQA, MQA)
//   scores   = (Q * sqrt(scale)) (K * sqrt(scale))^T        scale default 1 / sqrt(head size)
//   scores   = softcap * tanh(scores / softcap)               when softcap > 0
//   biased   = scores + bias    bias: attn_mask (a BOOL mask as 0 / -inf; a mask shorter than
//                               the keys padded with -inf) plus the causal and sliding-window
//                               frontiers (query i sees key j iff j <= i + past length, and
//                               within the window), made at import as a constant
//   P        = softmax(biased) along the keys; a row whose bias is -inf at every key is 0
//   Y        = P V    (3-D inputs: transposed and reshaped back to [B, S, heads * v head size])
//
// qk_matmul_output is the scores (mode 0, or 1, as ONNX's reference gives), the biased scores
// (mode 2) or P (mode 3). softmax_precision DOUBLE runs the softmax in f64. With
// nonpad_kv_seqlen the keys past each batch's count are masked and the frontiers sit at
// offset nonpad - q, per batch, a bias computed at run time. Refused, naming the node:
// FLOAT16 and BFLOAT16 precision, nonpad_kv_seqlen with past_key, and inputs whose head
// counts do not divide.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/host_fold.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"
#include "framework/onnx/internal/tensor_proto.h"

namespace sluice::framework::onnx::internal {
// File-local helpers, in a namespace of their own: a unity build compiles this file with the
// other mappers.
namespace attention_mapping {

constexpr int kMask = 3, kPastKey = 4, kPastValue = 5, kNonpadKvSeqlen = 6;

std::vector<int64_t> DimsOf(const Value& x) {
  const Shape shape = x.var().shape();
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

// The attributes, read and checked once.
struct AttentionAttrs {
  bool is_causal = false;
  int64_t q_num_heads = 0;   // 0: absent
  int64_t kv_num_heads = 0;  // 0: absent
  int64_t qk_mode = 0;
  double scale = 0.0;  // 0: absent (1 / sqrt(head size))
  double softcap = 0.0;
  int64_t softmax_precision = 0;  // 0: absent
  int64_t left_window = -1;
  int64_t right_window = -1;
};

absl::StatusOr<AttentionAttrs> ReadAttrs(const NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(
      ctx.OnlyAttrs({"is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale",
                     "softcap", "softmax_precision", "left_window_size", "right_window_size"}));
  AttentionAttrs a;
  SLUICE_ASSIGN_OR_RETURN(a.is_causal, ctx.FlagAttr("is_causal", false));
  SLUICE_ASSIGN_OR_RETURN(a.q_num_heads, ctx.IntAttr("q_num_heads", 0));
  SLUICE_ASSIGN_OR_RETURN(a.kv_num_heads, ctx.IntAttr("kv_num_heads", 0));
  SLUICE_ASSIGN_OR_RETURN(a.qk_mode, ctx.IntAttr("qk_matmul_output_mode", 0));
  SLUICE_ASSIGN_OR_RETURN(a.scale, ctx.FloatAttr("scale", 0.0));
  SLUICE_ASSIGN_OR_RETURN(a.softcap, ctx.FloatAttr("softcap", 0.0));
  SLUICE_ASSIGN_OR_RETURN(a.softmax_precision, ctx.IntAttr("softmax_precision", 0));
  SLUICE_ASSIGN_OR_RETURN(a.left_window, ctx.IntAttr("left_window_size", -1));
  SLUICE_ASSIGN_OR_RETURN(a.right_window, ctx.IntAttr("right_window_size", -1));
  if (a.qk_mode < 0 || a.qk_mode > 3) {
    return ctx.Error(absl::StrCat("qk_matmul_output_mode is ", a.qk_mode, "; ONNX has 0 to 3"));
  }
  if (a.left_window < -1 || a.right_window < -1) {
    return ctx.Error("left_window_size and right_window_size must be -1 or at least 0");
  }
  // A window wider than any sequence is no bound: clamped so its constants stay small.
  const int64_t wide = int64_t{1} << 40;
  if (a.left_window > wide) a.left_window = wide;
  if (a.right_window > wide) a.right_window = wide;
  if (ctx.HasAttr("scale") && !(a.scale > 0.0)) {
    return ctx.Error(absl::StrCat("scale is ", a.scale, "; it must be positive"));
  }
  return a;
}

// [B, S, heads * size] -> [B, heads, S, size].
absl::StatusOr<Value> SplitHeads(const NodeContext& ctx, const Value& x, int64_t heads,
                                 absl::string_view what) {
  const std::vector<int64_t> d = DimsOf(x);
  if (heads <= 0 || d[2] % heads != 0) {
    return ctx.Error(absl::StrCat(what, "'s hidden size ", d[2], " is not a multiple of its ",
                                  heads,
                                  " heads (q_num_heads and kv_num_heads must be given "
                                  "for 3-D inputs)"));
  }
  SLUICE_ASSIGN_OR_RETURN(Value r, Built(ctx, fn::Reshape(x, {d[0], d[1], heads, d[2] / heads})));
  return Built(ctx, fn::Transpose(r, {0, 2, 1, 3}));
}

// The causal and sliding-window frontiers as a [q, kv] bias of 0 and -inf, or nothing when
// neither applies. Query i sits at position i + offset.
std::optional<HostTensor> FrontierBias(const AttentionAttrs& a, DataType dtype, int64_t q,
                                       int64_t kv, int64_t offset) {
  if (!a.is_causal && a.left_window < 0 && a.right_window < 0) return std::nullopt;
  HostTensor bias = NewTensor(dtype, Shape({q, kv}));
  (void)DispatchDtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      for (int64_t i = 0; i < q; ++i) {
        for (int64_t j = 0; j < kv; ++j) {
          const int64_t diff = i + offset - j;  // how far key j lies before the query
          const bool allowed = (!a.is_causal || diff >= 0) &&
                               (a.left_window < 0 || diff <= a.left_window) &&
                               (a.right_window < 0 || -diff <= a.right_window);
          HostStore<T>(bias, i * kv + j, allowed ? T(0) : -std::numeric_limits<T>::infinity());
        }
      }
    }
    return 0;
  });
  return bias;
}

// An int64 constant [rows, cols] holding f(i, j).
template <typename F>
absl::StatusOr<Value> IndexConstant(NodeContext& ctx, absl::string_view what, int64_t rows,
                                    int64_t cols, F f) {
  HostTensor t = NewTensor(DataType::kI64, Shape({rows, cols}));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) HostStore<int64_t>(t, i * cols + j, f(i, j));
  }
  return ImportConstant(ctx, what, std::move(t));
}

// With nonpad_kv_seqlen (int64 [B]): keys at or past nonpad[b] are masked, and the causal and
// window frontiers sit at offset nonpad[b] - q, per batch. A [B, 1, q, kv] bias of 0 and -inf
// computed at run time.
absl::StatusOr<Value> NonpadBias(NodeContext& ctx, const AttentionAttrs& a, DataType dtype,
                                 int64_t batch, int64_t q, int64_t kv) {
  SLUICE_ASSIGN_OR_RETURN(Value nonpad, ctx.Input(kNonpadKvSeqlen));
  if (nonpad.var().dtype() != DataType::kI64 || nonpad.var().shape() != Shape({batch})) {
    return ctx.Error(absl::StrCat("nonpad_kv_seqlen must be INT64 of shape [", batch, "]; it is ",
                                  DataTypeName(nonpad.var().dtype()), " ",
                                  nonpad.var().shape().ToString()));
  }
  SLUICE_ASSIGN_OR_RETURN(Value per_batch, Built(ctx, fn::Reshape(nonpad, {batch, 1, 1})));
  SLUICE_ASSIGN_OR_RETURN(
      Value key, IndexConstant(ctx, "key_index", 1, kv, [](int64_t, int64_t j) { return j; }));
  SLUICE_ASSIGN_OR_RETURN(Value allowed, Built(ctx, fn::LessThan(key, per_batch)));  // [B,1,kv]
  if (a.is_causal || a.left_window >= 0 || a.right_window >= 0) {
    // diff = i + nonpad[b] - q - j: how far key j lies before query i.
    SLUICE_ASSIGN_OR_RETURN(Value rel,
                            IndexConstant(ctx, "query_minus_key", q, kv,
                                          [q](int64_t i, int64_t j) { return i - q - j; }));
    SLUICE_ASSIGN_OR_RETURN(Value diff, Built(ctx, fn::Add(rel, per_batch)));  // [B, q, kv]
    int64_t lowest = std::numeric_limits<int64_t>::min();
    if (a.is_causal) lowest = 0;
    if (a.right_window >= 0) lowest = std::max(lowest, -a.right_window);
    if (lowest != std::numeric_limits<int64_t>::min()) {
      SLUICE_ASSIGN_OR_RETURN(Value bound,
                              ScalarConstant(ctx, static_cast<double>(lowest), DataType::kI64));
      SLUICE_ASSIGN_OR_RETURN(Value ok, Built(ctx, fn::GreaterEqual(diff, bound)));
      SLUICE_ASSIGN_OR_RETURN(allowed, Built(ctx, fn::LogicalAnd(allowed, ok)));
    }
    if (a.left_window >= 0) {
      SLUICE_ASSIGN_OR_RETURN(
          Value bound, ScalarConstant(ctx, static_cast<double>(a.left_window), DataType::kI64));
      SLUICE_ASSIGN_OR_RETURN(Value ok, Built(ctx, fn::LessEqual(diff, bound)));
      SLUICE_ASSIGN_OR_RETURN(allowed, Built(ctx, fn::LogicalAnd(allowed, ok)));
    }
  }
  const int64_t rows = a.is_causal || a.left_window >= 0 || a.right_window >= 0 ? q : 1;
  SLUICE_ASSIGN_OR_RETURN(allowed, Built(ctx, fn::Reshape(allowed, {batch, 1, rows, kv})));
  SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, dtype));
  SLUICE_ASSIGN_OR_RETURN(Value neg_inf,
                          ScalarConstant(ctx, -std::numeric_limits<double>::infinity(), dtype));
  return Built(ctx, fn::Where(allowed, zero, neg_inf));
}

// The additive bias of attn_mask (input kMask, when present) and the frontiers, or nothing.
absl::StatusOr<std::optional<Value>> Bias(NodeContext& ctx, const AttentionAttrs& a, DataType dtype,
                                          int64_t batch, int64_t q, int64_t kv, int64_t offset) {
  // The frontiers are [q, kv] constants made here: bounded as the folded constants are.
  if (a.is_causal || a.left_window >= 0 || a.right_window >= 0 || ctx.HasInput(kNonpadKvSeqlen)) {
    SLUICE_RETURN_IF_ERROR(FoldedShape(ctx, {q, kv}, int64_t{1} << 24).status());
  }
  std::optional<Value> bias;
  if (ctx.HasInput(kMask)) {
    SLUICE_ASSIGN_OR_RETURN(Value mask, ctx.Input(kMask));
    std::vector<int64_t> dims = DimsOf(mask);
    if (dims.empty()) return ctx.Error("attn_mask must have at least one dimension");
    if (mask.var().dtype() == DataType::kBool) {
      SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, dtype));
      SLUICE_ASSIGN_OR_RETURN(Value neg_inf,
                              ScalarConstant(ctx, -std::numeric_limits<double>::infinity(), dtype));
      SLUICE_ASSIGN_OR_RETURN(mask, Built(ctx, fn::Where(mask, zero, neg_inf)));
    } else if (mask.var().dtype() != dtype) {
      return ctx.Error(absl::StrCat("attn_mask is ", DataTypeName(mask.var().dtype()),
                                    "; it must be BOOL or Q's type, ", DataTypeName(dtype)));
    }
    if (dims.back() > kv) {
      return ctx.Error(absl::StrCat("attn_mask has ", dims.back(), " keys; there are only ", kv));
    }
    if (dims.back() < kv && dims.back() != 1) {  // pad the missing keys with -inf
      std::vector<int64_t> pad_dims = dims;
      pad_dims.back() = kv - dims.back();
      SLUICE_ASSIGN_OR_RETURN(
          Value pad, Built(ctx, fn::FillConstant(Shape(pad_dims),
                                                 -std::numeric_limits<double>::infinity(), dtype)));
      SLUICE_ASSIGN_OR_RETURN(mask, Built(ctx, fn::Concat({mask, pad}, -1)));
    }
    bias = mask;
  }
  if (ctx.HasInput(kNonpadKvSeqlen)) {
    SLUICE_ASSIGN_OR_RETURN(Value f, NonpadBias(ctx, a, dtype, batch, q, kv));
    if (bias.has_value()) {
      SLUICE_ASSIGN_OR_RETURN(f, Built(ctx, fn::Add(*bias, f)));
    }
    bias = f;
  } else if (std::optional<HostTensor> frontier = FrontierBias(a, dtype, q, kv, offset)) {
    SLUICE_ASSIGN_OR_RETURN(Value f, ImportConstant(ctx, "frontier", *std::move(frontier)));
    if (bias.has_value()) {
      SLUICE_ASSIGN_OR_RETURN(f, Built(ctx, fn::Add(*bias, f)));
    }
    bias = f;
  }
  return bias;
}

// probs with the rows zeroed where `bias` is -inf at every key (its last axis).
absl::StatusOr<Value> ZeroMaskedRows(NodeContext& ctx, const Value& bias, const Value& probs) {
  const DataType dtype = bias.var().dtype();
  const int64_t keys = DimsOf(bias).back();
  SLUICE_ASSIGN_OR_RETURN(
      Value lowest, ScalarConstant(ctx,
                                   dtype == DataType::kF32 ? -std::numeric_limits<float>::max()
                                                           : -std::numeric_limits<double>::max(),
                                   dtype));
  SLUICE_ASSIGN_OR_RETURN(Value is_neg_inf, Built(ctx, fn::LessThan(bias, lowest)));
  SLUICE_ASSIGN_OR_RETURN(Value count, Built(ctx, fn::Cast(is_neg_inf, dtype)));
  SLUICE_ASSIGN_OR_RETURN(count, Built(ctx, fn::ReduceSum(count, {-1}, /*keepdim=*/true)));
  SLUICE_ASSIGN_OR_RETURN(Value all, ScalarConstant(ctx, static_cast<double>(keys), dtype));
  SLUICE_ASSIGN_OR_RETURN(Value masked, Built(ctx, fn::Equal(count, all)));
  SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, dtype));
  return Built(ctx, fn::Where(masked, zero, probs));
}

}  // namespace attention_mapping

absl::StatusOr<Value> RepeatHeads(const NodeContext& ctx, const Value& x, int64_t reps) {
  if (reps == 1) return x;
  if (reps > 4096) {
    return ctx.Error(
        absl::StrCat("each key/value head would serve ", reps, " query heads (at most 4096)"));
  }
  const std::vector<int64_t> d = attention_mapping::DimsOf(x);
  SLUICE_ASSIGN_OR_RETURN(Value r, Built(ctx, fn::Reshape(x, {d[0], d[1], 1, d[2], d[3]})));
  SLUICE_ASSIGN_OR_RETURN(Value copies,
                          Built(ctx, fn::Concat(std::vector<Value>(reps, r), /*axis=*/2)));
  return Built(ctx, fn::Reshape(copies, {d[0], d[1] * reps, d[2], d[3]}));
}

absl::Status MapAttention(NodeContext& ctx) {
  using namespace attention_mapping;  // NOLINT(build/namespaces): this file's helpers
  SLUICE_ASSIGN_OR_RETURN(const AttentionAttrs a, ReadAttrs(ctx));
  if (ctx.HasInput(kNonpadKvSeqlen) && ctx.HasInput(kPastKey)) {
    return ctx.Error("nonpad_kv_seqlen cannot be combined with past_key and past_value");
  }
  if (ctx.HasInput(kPastKey) != ctx.HasInput(kPastValue)) {
    return ctx.Error("past_key and past_value must be given together");
  }
  SLUICE_ASSIGN_OR_RETURN(Value q, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value k, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(Value v, ctx.Input(2));
  const DataType dtype = q.var().dtype();
  if (dtype != DataType::kF32 && dtype != DataType::kF64) {
    return ctx.Error(absl::StrCat("Q is ", DataTypeName(dtype), "; FLOAT and DOUBLE only"));
  }
  // The softmax runs in softmax_precision's type: Q's, or DOUBLE (FLOAT16 and BFLOAT16, which
  // Sluice lacks, are refused).
  DataType softmax_dtype = dtype;
  if (a.softmax_precision != 0) {
    absl::StatusOr<DataType> precision =
        DtypeOfOnnxType(static_cast<int32_t>(a.softmax_precision), "softmax_precision");
    if (!precision.ok() || (*precision != DataType::kF32 && *precision != DataType::kF64)) {
      return ctx.Error(
          absl::StrCat("softmax_precision ", a.softmax_precision, " is not FLOAT or DOUBLE"));
    }
    if (*precision == DataType::kF64) softmax_dtype = DataType::kF64;
  }
  const int64_t rank = q.var().shape().rank();
  if ((rank != 3 && rank != 4) || k.var().shape().rank() != rank ||
      v.var().shape().rank() != rank) {
    return ctx.Error(absl::StrCat("Q, K and V must all be 3-D or all 4-D; they have shapes ",
                                  q.var().shape().ToString(), ", ", k.var().shape().ToString(),
                                  " and ", v.var().shape().ToString()));
  }
  if (rank == 3) {
    SLUICE_ASSIGN_OR_RETURN(q, SplitHeads(ctx, q, a.q_num_heads, "Q"));
    SLUICE_ASSIGN_OR_RETURN(k, SplitHeads(ctx, k, a.kv_num_heads, "K"));
    SLUICE_ASSIGN_OR_RETURN(v, SplitHeads(ctx, v, a.kv_num_heads, "V"));
  }
  int64_t past = 0;
  if (ctx.HasInput(kPastKey)) {
    SLUICE_ASSIGN_OR_RETURN(Value past_key, ctx.Input(kPastKey));
    SLUICE_ASSIGN_OR_RETURN(Value past_value, ctx.Input(kPastValue));
    if (past_key.var().shape().rank() != 4) {
      return ctx.Error(
          absl::StrCat("past_key must be 4-D; it has shape ", past_key.var().shape().ToString()));
    }
    past = DimsOf(past_key)[2];
    SLUICE_ASSIGN_OR_RETURN(k, Built(ctx, fn::Concat({past_key, k}, 2)));
    SLUICE_ASSIGN_OR_RETURN(v, Built(ctx, fn::Concat({past_value, v}, 2)));
  }

  const std::vector<int64_t> qd = DimsOf(q);
  const std::vector<int64_t> kd = DimsOf(k);
  if (kd[1] <= 0 || qd[1] % kd[1] != 0 || DimsOf(v)[1] != kd[1]) {
    return ctx.Error(absl::StrCat("Q's ", qd[1], " heads are not a multiple of K's ", kd[1],
                                  ", or V's heads differ from K's"));
  }
  SLUICE_ASSIGN_OR_RETURN(Value k_rep, RepeatHeads(ctx, k, qd[1] / kd[1]));
  SLUICE_ASSIGN_OR_RETURN(Value v_rep, RepeatHeads(ctx, v, qd[1] / kd[1]));

  const double scale = a.scale > 0.0 ? a.scale : 1.0 / std::sqrt(static_cast<double>(qd[3]));
  // ONNX's function body scales both operands by sqrt(scale), rounded to Q's type.
  const double root = dtype == DataType::kF32
                          ? static_cast<double>(static_cast<float>(std::sqrt(scale)))
                          : std::sqrt(scale);
  SLUICE_ASSIGN_OR_RETURN(Value qs, Built(ctx, fn::Scale(q, root)));
  SLUICE_ASSIGN_OR_RETURN(Value ks, Built(ctx, fn::Scale(k_rep, root)));
  SLUICE_ASSIGN_OR_RETURN(Value scores, Built(ctx, fn::Matmul(qs, ks, false, true)));
  if (a.softcap > 0.0) {
    SLUICE_ASSIGN_OR_RETURN(scores, Built(ctx, fn::Scale(scores, 1.0 / a.softcap)));
    SLUICE_ASSIGN_OR_RETURN(scores, Built(ctx, fn::Tanh(scores)));
    SLUICE_ASSIGN_OR_RETURN(scores, Built(ctx, fn::Scale(scores, a.softcap)));
  }
  Value qk_output = scores;
  SLUICE_ASSIGN_OR_RETURN(std::optional<Value> bias,
                          Bias(ctx, a, dtype, qd[0], qd[2], kd[2], past));
  Value biased = scores;
  if (bias.has_value()) {
    SLUICE_ASSIGN_OR_RETURN(biased, Built(ctx, fn::Add(scores, *bias)));
  }
  if (a.qk_mode == 2) qk_output = biased;
  Value logits = biased;
  if (softmax_dtype != dtype) {
    SLUICE_ASSIGN_OR_RETURN(logits, Built(ctx, fn::Cast(biased, softmax_dtype)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value probs, Built(ctx, fn::Softmax(logits, -1)));
  if (softmax_dtype != dtype) {
    SLUICE_ASSIGN_OR_RETURN(probs, Built(ctx, fn::Cast(probs, dtype)));
  }
  if (bias.has_value()) {
    SLUICE_ASSIGN_OR_RETURN(probs, ZeroMaskedRows(ctx, *bias, probs));
  }
  if (a.qk_mode == 3) qk_output = probs;
  SLUICE_ASSIGN_OR_RETURN(Value y, Built(ctx, fn::Matmul(probs, v_rep)));
  if (rank == 3) {
    const std::vector<int64_t> yd = DimsOf(y);
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Transpose(y, {0, 2, 1, 3})));
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Reshape(y, {yd[0], yd[2], yd[1] * yd[3]})));
  }
  // Last: an output takes its ONNX name, which the Values above would no longer find.
  SLUICE_RETURN_IF_ERROR(ctx.SetOutput(1, k));  // present_key
  SLUICE_RETURN_IF_ERROR(ctx.SetOutput(2, v));  // present_value
  SLUICE_RETURN_IF_ERROR(ctx.SetOutput(3, qk_output));
  return ctx.SetOutput(0, y);
}

}  // namespace sluice::framework::onnx::internal
