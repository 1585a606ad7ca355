#include "framework/onnx/internal/node_table.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::framework::onnx::internal {
namespace {

constexpr int64_t kNew = kNewestCheckedOpset;

constexpr NodeMapping kTable[] = {
    {"Abs", 6, kNew, MapUnary, ""},
    {"Add", 7, kNew, MapBinary, ""},
    {"And", 7, kNew, MapBinary, ""},
    {"Cast", 6, kNew, MapCast, "to a type Sluice has (FLOAT, DOUBLE, INT32, INT64, BOOL)"},
    {"Clip", 6, 10, MapClip, ""},
    {"Clip", 11, kNew, MapClip, "min and max must be constants"},
    {"Concat", 4, kNew, MapConcat, ""},
    {"Constant", 9, kNew, MapConstant, "not sparse_value or strings"},
    {"Div", 7, kNew, MapBinary, ""},
    {"Dropout", 7, kNew, MapIdentity,
     "inference only: training_mode must be absent or a constant false, and no mask output"},
    {"Equal", 11, kNew, MapBinary, ""},
    {"Exp", 6, kNew, MapUnary, ""},
    {"Flatten", 1, kNew, MapFlatten, ""},
    {"Gemm", 7, kNew, MapGemm, ""},
    {"Greater", 9, kNew, MapBinary, ""},
    {"GreaterOrEqual", 12, kNew, MapBinary, ""},
    {"Identity", 1, kNew, MapIdentity, "tensors only (not sequences or optionals)"},
    {"Less", 9, kNew, MapBinary, ""},
    {"LessOrEqual", 12, kNew, MapBinary, ""},
    {"Log", 6, kNew, MapUnary, ""},
    {"LogSoftmax", 1, kNew, MapSoftmax, ""},
    {"MatMul", 1, kNew, MapMatMul, "operands of rank 2 or more (Sluice's matmul)"},
    {"Max", 8, kNew, MapVariadic, ""},
    {"Mean", 8, kNew, MapVariadic, ""},
    {"Min", 8, kNew, MapVariadic, ""},
    {"Mul", 7, kNew, MapBinary, ""},
    {"Neg", 6, kNew, MapUnary, ""},
    {"Not", 1, kNew, MapUnary, ""},
    {"Or", 7, kNew, MapBinary, ""},
    {"Pow", 7, kNew, MapPow, "the exponent must be a constant scalar"},
    {"Reciprocal", 6, kNew, MapUnary, ""},
    {"ReduceMean", 1, kNew, MapReduce, "axes must be constants"},
    {"ReduceSum", 1, kNew, MapReduce, "axes must be constants"},
    {"Relu", 6, kNew, MapUnary, ""},
    {"Reshape", 5, kNew, MapReshape, "the shape must be a constant"},
    {"Sigmoid", 6, kNew, MapUnary, ""},
    {"Softmax", 1, kNew, MapSoftmax, ""},
    {"Split", 2, kNew, MapSplit, "equal parts only; split sizes must be constants"},
    {"Sqrt", 6, kNew, MapUnary, ""},
    {"Squeeze", 1, kNew, MapSqueeze, "axes must be constants"},
    {"Sub", 7, kNew, MapBinary, ""},
    {"Sum", 8, kNew, MapVariadic, ""},
    {"Tanh", 6, kNew, MapUnary, ""},
    {"Transpose", 1, kNew, MapTranspose, ""},
    {"Unsqueeze", 1, kNew, MapSqueeze, "axes must be constants"},
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
