#include "framework/onnx/internal/node_table.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::framework::onnx::internal {
namespace {

constexpr int64_t kNew = kNewestCheckedOpset;

constexpr NodeMapping kTable[] = {
    {"Abs", 6, kNew, MapUnary, "f32, f64, i32, i64; the lowest integer stays itself (wraps)"},
    {"Acos", 7, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Acosh", 9, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Add", 1, 6, MapLegacyBinary,
     "B of A's shape, or with broadcast 1 of one element or a run of A's dims (from axis)"},
    {"Add", 7, kNew, MapBinary, "f32, f64, i32, i64; integers wrap around"},
    {"And", 7, kNew, MapBinary, ""},
    {"Asin", 7, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Asinh", 9, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Atan", 7, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Atanh", 9, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Attention", 23, kNew, MapAttention,
     "f32 and f64; softmax_precision FLOAT or DOUBLE; no nonpad_kv_seqlen with past_key"},
    {"AveragePool", 1, kNew, MapPool,
     "1-D and 2-D, f32 and f64 only; pads smaller than the kernel (as ONNX Runtime)"},
    {"BatchNormalization", 6, 8, MapBatchNormalization,
     "inference only (is_test ignored, as ONNX Runtime does); spatial 1 only; no statistics "
     "outputs"},
    {"BatchNormalization", 9, kNew, MapBatchNormalization,
     "inference only: training_mode 0, no running-statistics outputs; f32 and f64"},
    {"Cast", 6, kNew, MapCast, "to a type Sluice has (FLOAT, DOUBLE, INT32, INT64, BOOL)"},
    {"CastLike", 15, kNew, MapCastLike,
     "to a type Sluice has; saturate and round_mode ignored (FLOAT8 only); a constant input "
     "casts at import"},
    {"Ceil", 6, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Celu", 12, kNew, MapCelu, ""},
    {"Clip", 6, 10, MapClip, ""},
    {"Clip", 11, kNew, MapClip, "min and max must be constants"},
    {"Concat", 4, kNew, MapConcat, ""},
    {"Constant", 1, kNew, MapConstant, "not sparse_value or strings"},
    {"ConstantOfShape", 9, kNew, MapConstantOfShape,
     "the shape must be a constant; an INT64 value beyond 2^53 only for up to 4096 elements"},
    {"Conv", 1, kNew, MapConv, "1-D and 2-D, f32 and f64 only"},
    {"ConvTranspose", 1, 10, MapConvTranspose,
     "1-D and 2-D, f32 and f64 only; pads from output_shape or SAME_* put an odd one at the "
     "beginning for SAME_UPPER, at the end otherwise (opset 1's equations)"},
    {"ConvTranspose", 11, kNew, MapConvTranspose, "1-D and 2-D, f32 and f64 only"},
    {"Cos", 7, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Cosh", 9, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"DepthToSpace", 1, kNew, MapSpaceToDepth, "4-D input [N, C, H, W]"},
    {"Div", 1, 6, MapLegacyBinary,
     "B of A's shape, or with broadcast 1 of one element or a run of A's dims (from axis)"},
    {"Div", 7, kNew, MapBinary,
     "f32, f64, i32, i64; integers truncate toward zero, a zero divisor fails the run"},
    {"Dropout", 7, kNew, MapIdentity,
     "inference only: training_mode must be absent or a constant false, and no mask output"},
    {"Elu", 6, kNew, MapElu, ""},
    {"Equal", 11, kNew, MapBinary, ""},
    {"Erf", 9, kNew, MapUnary, "f32 and f64 only (Sluice's erf kernel)"},
    {"Exp", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Expand", 8, kNew, MapExpand, "the shape must be a constant"},
    {"EyeLike", 9, kNew, MapEyeLike, "2-D; a constant made at import"},
    {"Flatten", 1, kNew, MapFlatten, ""},
    {"Floor", 6, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"GRU", 7, kNew, MapGru,
     "f32 and f64; unrolled at import over X's static sequence length (at most 8192 steps); "
     "activations Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
     "HardSigmoid, Elu, Softsign, Softplus"},
    {"Gather", 1, kNew, MapGather,
     "an index out of range fails the run (the import, for constant indices)"},
    {"GatherElements", 11, kNew, MapGatherElements,
     "an index out of range fails the run (the import, for constant indices)"},
    {"Gelu", 20, kNew, MapGelu, ""},
    {"Gemm", 1, 6, MapLegacyGemm, "C of shape [M, N], or broadcast to it with broadcast 1"},
    {"Gemm", 7, kNew, MapGemm, ""},
    {"GlobalAveragePool", 1, kNew, MapGlobalPool, "f32 and f64 only"},
    {"GlobalMaxPool", 1, kNew, MapGlobalPool, "f32 and f64 only"},
    {"Greater", 9, kNew, MapBinary, ""},
    {"GreaterOrEqual", 12, kNew, MapBinary, ""},
    {"GridSample", 16, 19, MapGridSample, "2-D; f32 and f64"},
    {"GridSample", 20, kNew, MapGridSample, "2-D and 3-D; f32 and f64"},
    {"GroupNormalization", 18, 20, MapGroupNormalization, "f32 and f64"},
    {"GroupNormalization", 21, kNew, MapGroupNormalization,
     "f32 and f64; stash_type ignored (statistics in X's dtype)"},
    {"HardSigmoid", 6, kNew, MapHardSigmoid, ""},
    {"HardSwish", 14, kNew, MapHardSigmoid, ""},
    {"Hardmax", 1, kNew, MapHardmax, "f32 and f64"},
    {"Identity", 1, kNew, MapIdentity, "tensors only (not sequences or optionals)"},
    {"If", 1, kNew, MapIf,
     "both branches yield the same dtypes and shapes (Sluice's cond is static)"},
    {"InstanceNormalization", 6, kNew, MapInstanceNormalization, "f32 and f64"},
    {"IsInf", 10, kNew, MapIsInf, "f32 and f64"},
    {"IsNaN", 9, kNew, MapIsNaN, "f32 and f64"},
    {"LRN", 1, kNew, MapLrn, "rank 3 or more; f32 and f64"},
    {"LSTM", 7, kNew, MapLstm,
     "f32 and f64; unrolled at import over X's static sequence length (at most 8192 steps); "
     "activations Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
     "HardSigmoid, Elu, Softsign, Softplus"},
    {"LayerNormalization", 17, kNew, MapLayerNormalization,
     "Scale and B of X's dims from axis on (leading 1s aside); stash_type ignored (statistics "
     "in double); f32 and f64"},
    {"LeakyRelu", 6, kNew, MapLeakyRelu, ""},
    {"Less", 9, kNew, MapBinary, ""},
    {"LessOrEqual", 12, kNew, MapBinary, ""},
    {"LinearAttention", 27, kNew, MapLinearAttention,
     "f32 and f64; unrolled at import over T (at most 8192 steps)"},
    {"Log", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"LogSoftmax", 1, kNew, MapSoftmax, ""},
    {"Loop", 1, kNew, MapLoop, "no scan outputs; carried values keep their dtypes and shapes"},
    {"LpNormalization", 1, kNew, MapLpNormalization, "p 1 or 2; f32 and f64"},
    {"LpPool", 2, kNew, MapPool, "1-D and 2-D, f32 and f64; p a whole number"},
    {"MatMul", 1, kNew, MapMatMul, "operands of rank 2 or more (Sluice's matmul)"},
    {"Max", 1, 7, MapLegacyVariadic, "inputs of one shape"},
    {"Max", 8, kNew, MapVariadic, ""},
    {"MaxPool", 1, kNew, MapPool,
     "1-D and 2-D, f32 and f64 only; no Indices output (storage_order 0); pads smaller than "
     "the kernel (as ONNX Runtime)"},
    {"Mean", 1, 7, MapLegacyVariadic, "inputs of one shape"},
    {"Mean", 8, kNew, MapVariadic, ""},
    {"MeanVarianceNormalization", 9, kNew, MapMeanVarianceNormalization, "f32 and f64"},
    {"Min", 1, 7, MapLegacyVariadic, "inputs of one shape"},
    {"Min", 8, kNew, MapVariadic, ""},
    {"Mish", 18, kNew, MapSoftplus, ""},
    {"Mod", 10, kNew, MapMod,
     "f32 and f64 only when both inputs are constants (folded at import); an integer divisor "
     "of 0 fails the run"},
    {"Mul", 1, 6, MapLegacyBinary,
     "B of A's shape, or with broadcast 1 of one element or a run of A's dims (from axis)"},
    {"Mul", 7, kNew, MapBinary, "f32, f64, i32, i64; integers wrap around"},
    {"Neg", 6, kNew, MapUnary, "f32, f64, i32, i64; the lowest integer stays itself (wraps)"},
    {"Not", 1, kNew, MapUnary, ""},
    {"Or", 7, kNew, MapBinary, ""},
    {"PRelu", 1, 6, MapLegacyPRelu,
     "slope broadcast to X, or 1-D along the one dim of X of its size"},
    {"PRelu", 7, kNew, MapPRelu, ""},
    {"Pad", 1, 10, MapPad, "modes constant, edge and reflect"},
    {"Pad", 11, kNew, MapPad, "pads, constant_value and axes must be constants"},
    {"Pow", 1, 6, MapLegacyBinary, "the exponent must be a constant scalar"},
    {"Pow", 7, kNew, MapPow, "the exponent must be a constant scalar"},
    {"RMSNormalization", 23, kNew, MapRMSNormalization, "stash_type FLOAT or DOUBLE; f32 and f64"},
    {"RNN", 7, kNew, MapRnn,
     "f32 and f64; unrolled at import over X's static sequence length (at most 8192 steps); "
     "activations Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
     "HardSigmoid, Elu, Softsign, Softplus"},
    {"Range", 11, kNew, MapFoldOnly, "constant inputs only: folded at import (no kernel yet)"},
    {"Reciprocal", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"ReduceL1", 1, kNew, MapReduceComposite, "axes must be constants; f32 and f64"},
    {"ReduceL2", 1, kNew, MapReduceComposite, "axes must be constants; f32 and f64"},
    {"ReduceLogSum", 1, kNew, MapReduceComposite, "axes must be constants; f32 and f64"},
    {"ReduceLogSumExp", 1, kNew, MapReduceComposite,
     "axes must be constants; f32 and f64; computed as max + log(sum(exp(x - max)))"},
    {"ReduceMax", 1, kNew, MapReduceMax,
     "axes must be constants; integers computed in f64 (exact up to 2^53)"},
    {"ReduceMean", 1, kNew, MapReduce, "axes must be constants"},
    {"ReduceMin", 1, kNew, MapReduceMax,
     "axes must be constants; integers computed in f64 (exact up to 2^53)"},
    {"ReduceSum", 1, kNew, MapReduce, "axes must be constants"},
    {"ReduceSumSquare", 1, kNew, MapReduceComposite, "axes must be constants; f32 and f64"},
    {"Relu", 6, kNew, MapUnary, "f32, f64, i32, i64"},
    {"Reshape", 5, kNew, MapReshape, "the shape must be a constant"},
    {"Resize", 10, 10, MapResize, "nearest and linear, asymmetric (as Upsample); scales constant"},
    {"Resize", 11, kNew, MapResize,
     "every mode, coordinate transformation and antialias; scales, sizes and roi constant"},
    {"Round", 11, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Selu", 6, kNew, MapElu, ""},
    {"Shape", 1, kNew, MapShape, ""},
    {"Shrink", 9, kNew, MapShrink, ""},
    {"Sigmoid", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Sign", 9, kNew, MapSign, ""},
    {"Sin", 7, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Sinh", 9, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Size", 1, kNew, MapShape, ""},
    {"Slice", 1, kNew, MapSlice, "starts, ends, axes and steps must be constants"},
    {"Softmax", 1, kNew, MapSoftmax, ""},
    {"Softplus", 1, kNew, MapSoftplus, ""},
    {"Softsign", 1, kNew, MapSoftsign, ""},
    {"SpaceToDepth", 1, kNew, MapSpaceToDepth, "4-D input [N, C, H, W]"},
    {"Split", 2, kNew, MapSplit, "split sizes must be constants"},
    {"Sqrt", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Squeeze", 1, kNew, MapSqueeze, "axes must be constants"},
    {"Sub", 1, 6, MapLegacyBinary,
     "B of A's shape, or with broadcast 1 of one element or a run of A's dims (from axis)"},
    {"Sub", 7, kNew, MapBinary, "f32, f64, i32, i64; integers wrap around"},
    {"Sum", 1, 7, MapLegacyVariadic, "inputs of one shape"},
    {"Sum", 8, kNew, MapVariadic, ""},
    {"SwiGLU", 28, kNew, MapSwish, "f32 and f64; A and B of one shape"},
    {"Swish", 24, kNew, MapSwish, "f32 and f64"},
    {"Tan", 7, kNew, MapUnary, "f32 and f64 only (Sluice's unary math kernels)"},
    {"Tanh", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"ThresholdedRelu", 10, kNew, MapThresholdedRelu, "NaN gives NaN (ONNX: 0)"},
    {"Tile", 6, kNew, MapTile, "repeats must be a constant"},
    {"Transpose", 1, kNew, MapTranspose, ""},
    {"Trilu", 14, kNew, MapTrilu, "k must be a constant"},
    {"Unsqueeze", 1, kNew, MapSqueeze, "axes must be constants"},
    {"Upsample", 7, 9, MapResize, "nearest and linear; scales constant"},
    {"Where", 9, kNew, MapWhere, ""},
    {"Xor", 7, kNew, MapBinary, ""},
};

}  // namespace

absl::Span<const NodeMapping> NodeMappings() { return kTable; }

absl::StatusOr<const NodeMapping*> FindNodeMapping(const NodeContext& ctx) {
  const std::string& type = ctx.node().op_type();
  std::vector<std::string> ranges;
  for (const NodeMapping& row : kTable) {
    if (row.op_type != type) continue;
    if (ctx.opset() >= row.first_opset && ctx.opset() <= row.last_opset) return &row;
    ranges.push_back(absl::StrCat(row.first_opset, "-", row.last_opset));
  }
  if (ranges.empty()) {
    return absl::UnimplementedError(absl::StrCat(ctx.Describe(), ": op type ", type,
                                                 " is not supported by this importer (docs/onnx.md "
                                                 "lists the supported ones)"));
  }
  return ctx.Error(absl::StrCat("this importer maps ", type, " at opsets ",
                                absl::StrJoin(ranges, ", "), " only"));
}

}  // namespace sluice::framework::onnx::internal
