// Subgraph: what the subgraph compiler compiles (docs/design.md, "Subgraph compilation"). A
// group of elementwise ops the partitioning pass (partition.h) found, as one expression DAG
// over one iteration domain: every node is computed at each point of the domain, inputs are
// read with numpy broadcasting into it, and every output has the domain's shape.
//
// Values are numbered densely: 0..inputs-1 are the inputs, inputs+k is node k. A node's
// arguments are earlier values, so node order is a topological order.
//
// The text form (ToText) names everything the compiled code depends on — op kinds, dtypes,
// shapes, constants (17 significant digits, so Parse(ToText()) is exact), the names of the
// ops it replaced — and nothing else:
// it is the compile cache's key (with the device type) and the attribute a recorded launch
// carries for replay. It contains no ',', '=' or whitespace (vm::AttrMap's rule for strings).
//
// Value type; thread-compatible.
#ifndef SLUICE_FRAMEWORK_COMPILER_SUBGRAPH_H_
#define SLUICE_FRAMEWORK_COMPILER_SUBGRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"

namespace sluice::framework::compiler {

// The operations a node computes. The element functions are the uncompiled kernels' own
// (ops/cpu/elementwise_functions.h), so each node rounds exactly as its op does unfused.
enum class ExprOp : uint8_t {
  // a, b (broadcast into the domain)
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,  // a on a tie or when a is NaN, else b: NaN propagates (as the max op)
  kMin,  // the same with <=
  // a
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kSquare,
  kNeg,
  kCopy,
  kScale,  // a * p0 + p1 (p0, p1 rounded to the dtype first, as the scale kernel does)
  kCast,   // a converted to the node's dtype (between floating types)
  // v, g: the unary ops' gradients (v is Out or X, as the grad op's schema says)
  kReluGrad,
  kSigmoidGrad,
  kTanhGrad,
  kExpGrad,
  kLogGrad,
  kSqrtGrad,
  kSquareGrad,
  // x, y, g: the binary ops' gradient parts (no broadcasting inside a grad op)
  kDivGradY,  // -(g / y) * (x / y)
  kMaxGradX,  // (x >= y or x is NaN) ? g : 0: g goes to the argument kMax returned
  kMaxGradY,  // (x >= y or x is NaN) ? 0 : g
  kMinGradX,  // (x <= y or x is NaN) ? g : 0
  kMinGradY,  // (x <= y or x is NaN) ? 0 : g
  // p, g, lr: sgd's update p - lr * g (lr one element)
  kSgd,
};
inline constexpr int kNumExprOps = static_cast<int>(ExprOp::kSgd) + 1;

// "add", "relu_grad", ... (the text form's name).
absl::string_view ExprOpName(ExprOp op);
// Number of arguments: 1, 2 or 3.
int ExprOpArity(ExprOp op);

struct SubgraphInput {
  DataType dtype = DataType::kF32;
  Shape shape;  // broadcasts into the domain
};

struct ExprNode {
  ExprOp op = ExprOp::kCopy;
  DataType dtype = DataType::kF32;  // the result's
  int args[3] = {-1, -1, -1};       // value ids; -1 past the arity
  double params[2] = {0, 0};        // kScale: scale, bias
};

struct Subgraph {
  Shape domain;
  std::vector<SubgraphInput> inputs;
  std::vector<ExprNode> nodes;
  std::vector<int> outputs;        // node value ids (>= inputs.size()), each once
  std::vector<std::string> fused;  // the ops it replaces, in program order (names only)

  int num_values() const { return static_cast<int>(inputs.size() + nodes.size()); }
  bool is_input(int value) const { return value < static_cast<int>(inputs.size()); }
  DataType dtype_of(int value) const {
    return is_input(value) ? inputs[static_cast<size_t>(value)].dtype
                           : nodes[static_cast<size_t>(value) - inputs.size()].dtype;
  }

  // The text form (file comment), fused names last. The cache key (CacheText) is the whole
  // text, names included: the compiled kernel carries its name (traces, records, errors), so
  // two groups share a kernel only when they also replace the same ops.
  std::string ToText() const;
  std::string CacheText() const;
  // The text without the fused names: what the compiled code computes (generated sources
  // are named by its hash, so equal computations get equal code).
  std::string ComputationText() const;
  // InvalidArgument naming the offending token; also runs Validate.
  static absl::StatusOr<Subgraph> Parse(absl::string_view text);
  // InvalidArgument unless: arguments refer to earlier values and match the arity, every
  // input broadcasts into the domain, dtypes agree with each op's rule (floating operands
  // of the node's dtype, kCast between floating types), outputs are distinct nodes.
  absl::Status Validate() const;
  // "fused[mul+scale+add]": the name of the compiled op (trace slices, records, errors).
  std::string KernelName() const;
};

// True when a tensor of shape `from` broadcasts into `to` (numpy rules, right-aligned: each
// dimension of `from` is 1 or `to`'s).
bool BroadcastsInto(const Shape& from, const Shape& to);

// 64-bit FNV-1a of `text`: the content hash statistics and keys print.
uint64_t ContentHash(absl::string_view text);

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_SUBGRAPH_H_
