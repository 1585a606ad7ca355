// The ONNX node table: for each op type of the default domain this importer maps, the
// opsets whose semantics it implements and the mapper that appends the Sluice ops. One row
// per (op type, opset range); docs/onnx.md prints the table (`sluice import --list-ops`).
//
// A row's range starts at the opset that gave the op the meaning its mapper implements and
// ends at kNewestCheckedOpset when every later version only widened the op's data types (a
// type Sluice lacks is refused when the tensor is made, naming it).
//
// Functions over a constant table; thread-safe.
#ifndef SLUICE_FRAMEWORK_ONNX_INTERNAL_NODE_TABLE_H_
#define SLUICE_FRAMEWORK_ONNX_INTERNAL_NODE_TABLE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "framework/onnx/internal/node_context.h"

namespace sluice::framework::onnx::internal {

// The newest opset whose changes were read against this table (ONNX 1.20's opset 28).
inline constexpr int64_t kNewestCheckedOpset = 28;

using NodeMapper = absl::Status (*)(NodeContext& ctx);

struct NodeMapping {
  absl::string_view op_type;
  int64_t first_opset;
  int64_t last_opset;
  NodeMapper map;
  absl::string_view limits;  // what the mapping refuses, for the docs ("" when nothing)
};

// Every row, grouped by op type.
absl::Span<const NodeMapping> NodeMappings();

// The row for the context's node and opset. Unimplemented naming the node when no row has
// its op type; InvalidArgument naming the node and the ranges this build maps when the op
// type is known at other opsets.
absl::StatusOr<const NodeMapping*> FindNodeMapping(const NodeContext& ctx);

// The mappers (elementwise_mappers.cc, shape_mappers.cc).
absl::Status MapBinary(NodeContext& ctx);    // Add Sub Mul Div, comparisons, logical ops
absl::Status MapVariadic(NodeContext& ctx);  // Sum Mean Max Min
absl::Status MapUnary(NodeContext& ctx);     // Relu Sigmoid Tanh Exp Log Sqrt Abs Neg Not Erf ...
absl::Status MapPow(NodeContext& ctx);
absl::Status MapClip(NodeContext& ctx);
absl::Status MapCast(NodeContext& ctx);
absl::Status MapIdentity(NodeContext& ctx);  // Identity, Dropout in inference
absl::Status MapConstant(NodeContext& ctx);
absl::Status MapMatMul(NodeContext& ctx);
absl::Status MapGemm(NodeContext& ctx);
absl::Status MapSoftmax(NodeContext& ctx);  // Softmax, LogSoftmax
absl::Status MapReduce(NodeContext& ctx);   // ReduceSum, ReduceMean
absl::Status MapReshape(NodeContext& ctx);
absl::Status MapFlatten(NodeContext& ctx);
absl::Status MapSqueeze(NodeContext& ctx);  // Squeeze, Unsqueeze
absl::Status MapTranspose(NodeContext& ctx);
absl::Status MapConcat(NodeContext& ctx);
absl::Status MapSplit(NodeContext& ctx);
absl::Status MapIf(NodeContext& ctx);  // control_flow_mappers.cc
absl::Status MapLoop(NodeContext& ctx);

// Activations as compositions of elementwise ops (activation_mappers.cc).
absl::Status MapLeakyRelu(NodeContext& ctx);
absl::Status MapElu(NodeContext& ctx);  // Elu, Selu
absl::Status MapCelu(NodeContext& ctx);
absl::Status MapHardSigmoid(NodeContext& ctx);  // HardSigmoid, HardSwish
absl::Status MapSoftsign(NodeContext& ctx);
absl::Status MapSoftplus(NodeContext& ctx);  // Softplus, Mish
absl::Status MapThresholdedRelu(NodeContext& ctx);
absl::Status MapGelu(NodeContext& ctx);

// Normalization (norm_mappers.cc): BatchNormalization in inference, LayerNormalization.
absl::Status MapBatchNormalization(NodeContext& ctx);
absl::Status MapLayerNormalization(NodeContext& ctx);

// LinearAttention (linear_attention_mappers.cc): its recurrence unrolled over T.
absl::Status MapLinearAttention(NodeContext& ctx);

// GridSample (grid_sample_mappers.cc): per axis the grid's coordinates, taps and weights as
// ops, each combination of taps a gather of X's rows.
absl::Status MapGridSample(NodeContext& ctx);

// Attention (attention_mappers.cc): matmuls, softmax and the masks as a composition.
absl::Status MapAttention(NodeContext& ctx);

// Resize and Upsample as gathers along each resized axis, weighted by taps computed at import
// (resize_mappers.cc); the scales, sizes and roi must be constants.
absl::Status MapResize(NodeContext& ctx);

// Recurrent ops (rnn_mappers.cc): RNN, GRU and LSTM unrolled at import over X's static
// sequence length, as matmuls, elementwise ops and concats; sequence_lens masks the steps.
absl::Status MapRnn(NodeContext& ctx);
absl::Status MapGru(NodeContext& ctx);
absl::Status MapLstm(NodeContext& ctx);

// Convolution and pooling, 1-D and 2-D (conv_mappers.cc); auto_pad resolved at import.
absl::Status MapConv(NodeContext& ctx);
absl::Status MapPool(NodeContext& ctx);        // MaxPool, AveragePool, LpPool
absl::Status MapGlobalPool(NodeContext& ctx);  // GlobalAveragePool, GlobalMaxPool
// ConvTranspose, 1-D and 2-D, as conv2d_grad's XGrad (conv_transpose_mappers.cc).
absl::Status MapConvTranspose(NodeContext& ctx);

// The forms before NumPy broadcasting (legacy_mappers.cc): Add Sub Mul Div Pow at opsets
// 1-6 (B broadcast onto A with attribute broadcast 1, aligned at attribute axis or to the
// right); Max Min Sum Mean at 1-7 (inputs of one shape); Gemm and PRelu at 1-6.
absl::Status MapLegacyBinary(NodeContext& ctx);
absl::Status MapLegacyVariadic(NodeContext& ctx);
absl::Status MapLegacyGemm(NodeContext& ctx);
absl::Status MapLegacyPRelu(NodeContext& ctx);

// Constant folding (constant_folding.cc, layout_folding.cc). Shape and Size: the input's static
// shape, always a constant. ConstantOfShape: a constant for at most 4096 elements, else a
// fill_constant op; the shape must be a constant.
absl::Status MapShape(NodeContext& ctx);  // Shape, Size
absl::Status MapConstantOfShape(NodeContext& ctx);
// Range (no kernel yet): folded when every input is a constant (outputs of up to 2^24
// elements), else InvalidArgument naming the input. Expand, Gather, Slice and Where fold
// through it when every input is a constant.
absl::Status MapFoldOnly(NodeContext& ctx);

// Gather, Slice and Where (index_mappers.cc): folded when every input is a constant, else the
// gather, slice and where ops; Slice's starts, ends, axes and steps must be constants.
absl::Status MapGather(NodeContext& ctx);
absl::Status MapSlice(NodeContext& ctx);
absl::Status MapWhere(NodeContext& ctx);

// Run before the row's mapper: when the node's op type folds (Add Sub Mul Div, Max and Min of
// two inputs, Equal Less LessOrEqual Greater GreaterOrEqual, And Or Xor Not, Neg Cast Concat
// Reshape Squeeze Unsqueeze Identity), every input is a constant and the output has at most
// 4096 elements, makes the output a constant computed on the host and returns true. False
// (the mapper runs) otherwise, and whenever folding fails: an invalid node, a cast C++ leaves
// undefined, an integer division by zero.
absl::StatusOr<bool> TryFoldConstants(NodeContext& ctx);

// Compositions of existing ops (composite_mappers.cc): CastLike (a constant input folds at
// import), Mod (folded at import when both inputs are constants; integers otherwise), Sign,
// IsNaN, IsInf, PRelu, Shrink, Swish, Trilu (a where over a mask made at import; k must be a
// constant), EyeLike (a constant).
absl::Status MapCastLike(NodeContext& ctx);
absl::Status MapMod(NodeContext& ctx);
absl::Status MapSign(NodeContext& ctx);
absl::Status MapIsNaN(NodeContext& ctx);
absl::Status MapIsInf(NodeContext& ctx);
absl::Status MapPRelu(NodeContext& ctx);
absl::Status MapShrink(NodeContext& ctx);
absl::Status MapSwish(NodeContext& ctx);  // Swish, SwiGLU
absl::Status MapLrn(NodeContext& ctx);
absl::Status MapTrilu(NodeContext& ctx);
absl::Status MapEyeLike(NodeContext& ctx);
// Reductions and normalizations (composite_reduce_mappers.cc); axes must be constants.
absl::Status MapReduceComposite(NodeContext& ctx);  // ReduceSumSquare L1 L2 LogSum LogSumExp
absl::Status MapReduceMax(NodeContext& ctx);        // ReduceMax, ReduceMin (max_pool2d)
absl::Status MapHardmax(NodeContext& ctx);
absl::Status MapRMSNormalization(NodeContext& ctx);
absl::Status MapLpNormalization(NodeContext& ctx);
absl::Status MapMeanVarianceNormalization(NodeContext& ctx);
absl::Status MapInstanceNormalization(NodeContext& ctx);
absl::Status MapGroupNormalization(NodeContext& ctx);
// Element moves (composite_layout_mappers.cc): Expand, GatherElements, Pad and Tile (the
// shape, pads, constant value, axes and repeats must be constants), SpaceToDepth and
// DepthToSpace.
absl::Status MapExpand(NodeContext& ctx);  // folded when every input is a constant
absl::Status MapGatherElements(NodeContext& ctx);
absl::Status MapPad(NodeContext& ctx);
absl::Status MapTile(NodeContext& ctx);
absl::Status MapSpaceToDepth(NodeContext& ctx);  // SpaceToDepth, DepthToSpace

}  // namespace sluice::framework::onnx::internal

#endif  // SLUICE_FRAMEWORK_ONNX_INTERNAL_NODE_TABLE_H_
