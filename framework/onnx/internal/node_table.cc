#include "framework/onnx/internal/node_table.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::framework::onnx::internal {
namespace {

constexpr int64_t kNew = kNewestCheckedOpset;

constexpr NodeMapping kTable[] = {
    {"Abs", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Add", 7, kNew, MapBinary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"And", 7, kNew, MapBinary, ""},
    {"Cast", 6, kNew, MapCast, "to a type Sluice has (FLOAT, DOUBLE, INT32, INT64, BOOL)"},
    {"Celu", 12, kNew, MapCelu, ""},
    {"Clip", 6, 10, MapClip, ""},
    {"Clip", 11, kNew, MapClip, "min and max must be constants"},
    {"Concat", 4, kNew, MapConcat, ""},
    {"Constant", 9, kNew, MapConstant, "not sparse_value or strings"},
    {"ConstantOfShape", 9, kNew, MapConstantOfShape,
     "the shape must be a constant; an INT64 value beyond 2^53 only for up to 4096 elements"},
    {"Div", 7, kNew, MapBinary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Dropout", 7, kNew, MapIdentity,
     "inference only: training_mode must be absent or a constant false, and no mask output"},
    {"Elu", 6, kNew, MapElu, ""},
    {"Equal", 11, kNew, MapBinary, ""},
    {"Exp", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Expand", 8, kNew, MapFoldOnly, "constant inputs only: folded at import (no kernel yet)"},
    {"Flatten", 1, kNew, MapFlatten, ""},
    {"Gather", 1, kNew, MapFoldOnly, "constant inputs only: folded at import (no kernel yet)"},
    {"Gelu", 20, kNew, MapGelu,
     "approximate='tanh' only: the exact form ('none', the default) needs erf, which has no "
     "kernel"},
    {"Gemm", 7, kNew, MapGemm, ""},
    {"Greater", 9, kNew, MapBinary, ""},
    {"GreaterOrEqual", 12, kNew, MapBinary, ""},
    {"HardSigmoid", 6, kNew, MapHardSigmoid, ""},
    {"HardSwish", 14, kNew, MapHardSigmoid, ""},
    {"Identity", 1, kNew, MapIdentity, "tensors only (not sequences or optionals)"},
    {"If", 1, kNew, MapIf,
     "both branches yield the same dtypes and shapes (Sluice's cond is static)"},
    {"LeakyRelu", 6, kNew, MapLeakyRelu, ""},
    {"Less", 9, kNew, MapBinary, ""},
    {"LessOrEqual", 12, kNew, MapBinary, ""},
    {"Log", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"LogSoftmax", 1, kNew, MapSoftmax, ""},
    {"Loop", 1, kNew, MapLoop, "no scan outputs; carried values keep their dtypes and shapes"},
    {"MatMul", 1, kNew, MapMatMul, "operands of rank 2 or more (Sluice's matmul)"},
    {"Max", 8, kNew, MapVariadic, ""},
    {"Mean", 8, kNew, MapVariadic, ""},
    {"Min", 8, kNew, MapVariadic, ""},
    {"Mish", 18, kNew, MapSoftplus, ""},
    {"Mul", 7, kNew, MapBinary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Neg", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Not", 1, kNew, MapUnary, ""},
    {"Or", 7, kNew, MapBinary, ""},
    {"Pow", 7, kNew, MapPow, "the exponent must be a constant scalar"},
    {"Range", 11, kNew, MapFoldOnly, "constant inputs only: folded at import (no kernel yet)"},
    {"Reciprocal", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"ReduceMean", 1, kNew, MapReduce, "axes must be constants"},
    {"ReduceSum", 1, kNew, MapReduce, "axes must be constants"},
    {"Relu", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Reshape", 5, kNew, MapReshape, "the shape must be a constant"},
    {"Selu", 6, kNew, MapElu, ""},
    {"Shape", 1, kNew, MapShape, ""},
    {"Sigmoid", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Size", 1, kNew, MapShape, ""},
    {"Slice", 1, kNew, MapFoldOnly, "constant inputs only: folded at import (no kernel yet)"},
    {"Softmax", 1, kNew, MapSoftmax, ""},
    {"Softplus", 1, kNew, MapSoftplus, ""},
    {"Softsign", 1, kNew, MapSoftsign, ""},
    {"Split", 2, kNew, MapSplit, "equal parts only; split sizes must be constants"},
    {"Sqrt", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Squeeze", 1, kNew, MapSqueeze, "axes must be constants"},
    {"Sub", 7, kNew, MapBinary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"Sum", 8, kNew, MapVariadic, ""},
    {"Tanh", 6, kNew, MapUnary, "f32 and f64 only (Sluice's arithmetic kernels)"},
    {"ThresholdedRelu", 10, kNew, MapThresholdedRelu, "NaN gives NaN (ONNX: 0)"},
    {"Transpose", 1, kNew, MapTranspose, ""},
    {"Unsqueeze", 1, kNew, MapSqueeze, "axes must be constants"},
    {"Where", 9, kNew, MapFoldOnly, "constant inputs only: folded at import (no kernel yet)"},
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
