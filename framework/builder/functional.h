// One functional front end, two modes: every op here takes
// Values, each either a static Var of a Program or an eager Tensor. Static operands append
// the op to their Program (AppendOp) and return its output Vars; eager operands run the op
// at once through their eager::Context and return Tensors. Both modes send the same op
// name and the same attributes, so a model written once against these functions builds a
// program inside a ProgramGuard and computes directly outside one.
//
// Mixing static and eager operands in one call is InvalidArgument naming the op; every
// other error is the mode's own (AppendOp's or Context::Call's), naming the op and operand.
// Value is a value type; the functions are thread-compatible (a Program is built on one
// thread; an eager Context accepts calls from any thread).
#ifndef SLUICE_FRAMEWORK_BUILDER_FUNCTIONAL_H_
#define SLUICE_FRAMEWORK_BUILDER_FUNCTIONAL_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"

namespace sluice::framework {

// A static Var or an eager Tensor. Implicitly constructible from either, so that calls read
// the same in both modes.
class Value {
 public:
  Value(Var var) : value_(std::move(var)) {}                  // NOLINT: implicit by design
  Value(eager::Tensor tensor) : value_(std::move(tensor)) {}  // NOLINT: implicit by design

  bool is_static() const { return std::holds_alternative<Var>(value_); }
  // Require is_static() (resp. !is_static()).
  const Var& var() const;
  const eager::Tensor& tensor() const;

 private:
  std::variant<Var, eager::Tensor> value_;
};

}  // namespace sluice::framework

namespace sluice::fn {

using framework::Value;

// Elementwise, NumPy broadcasting.
absl::StatusOr<Value> Add(const Value& x, const Value& y);
absl::StatusOr<Value> Sub(const Value& x, const Value& y);
absl::StatusOr<Value> Mul(const Value& x, const Value& y);
absl::StatusOr<Value> Div(const Value& x, const Value& y);

absl::StatusOr<Value> Relu(const Value& x);
absl::StatusOr<Value> Sigmoid(const Value& x);
absl::StatusOr<Value> Tanh(const Value& x);
absl::StatusOr<Value> Exp(const Value& x);
absl::StatusOr<Value> Log(const Value& x);
absl::StatusOr<Value> Sqrt(const Value& x);
absl::StatusOr<Value> Square(const Value& x);
// scale * x + bias.
absl::StatusOr<Value> Scale(const Value& x, double scale, double bias = 0.0);
// min(max(x, lo), hi): NaN stays NaN; lo > hi or a NaN bound is refused; integer x takes the
// integers in [lo, hi] (the "clip" op, ops/elementwise_ops.cc).
absl::StatusOr<Value> Clip(const Value& x, double lo, double hi);

// Comparisons (numeric operands of one dtype, NumPy broadcasting) and logical ops (bool
// operands): bool results, for predicates of fn::Cond and fn::WhileLoop (control_flow.h).
absl::StatusOr<Value> LessThan(const Value& x, const Value& y);
absl::StatusOr<Value> LessEqual(const Value& x, const Value& y);
absl::StatusOr<Value> GreaterThan(const Value& x, const Value& y);
absl::StatusOr<Value> GreaterEqual(const Value& x, const Value& y);
absl::StatusOr<Value> Equal(const Value& x, const Value& y);
absl::StatusOr<Value> NotEqual(const Value& x, const Value& y);
absl::StatusOr<Value> LogicalAnd(const Value& x, const Value& y);
absl::StatusOr<Value> LogicalOr(const Value& x, const Value& y);
absl::StatusOr<Value> LogicalXor(const Value& x, const Value& y);
absl::StatusOr<Value> LogicalNot(const Value& x);
// x + value, any numeric dtype (for an integer dtype `value` must be a whole number): a
// loop counter's step.
absl::StatusOr<Value> Increment(const Value& x, double value = 1.0);

absl::StatusOr<Value> Matmul(const Value& x, const Value& y, bool transpose_x = false,
                             bool transpose_y = false);
// Empty axes: every axis.
absl::StatusOr<Value> ReduceSum(const Value& x, std::vector<int64_t> axes = {},
                                bool keepdim = false);
absl::StatusOr<Value> ReduceMean(const Value& x, std::vector<int64_t> axes = {},
                                 bool keepdim = false);
absl::StatusOr<Value> Softmax(const Value& x, int64_t axis = -1);
absl::StatusOr<Value> Reshape(const Value& x, std::vector<int64_t> shape);
absl::StatusOr<Value> Transpose(const Value& x, std::vector<int64_t> perm);
// One or more inputs (InvalidArgument naming the op when empty).
absl::StatusOr<Value> Concat(const std::vector<Value>& xs, int64_t axis = 0);
absl::StatusOr<Value> Sum(const std::vector<Value>& xs);
// (softmax, loss) for i64 class labels of shape [..., 1].
absl::StatusOr<std::pair<Value, Value>> SoftmaxWithCrossEntropy(const Value& logits,
                                                                const Value& label);

// Ops without operands choose their mode from the context: inside a ProgramGuard they
// append to the current main program (and `ctx` is ignored); outside one they run eagerly
// in `ctx` (FailedPrecondition when it is null).
absl::StatusOr<Value> FillConstant(const Shape& shape, double value,
                                   DataType dtype = DataType::kF32, eager::Context* ctx = nullptr);
// Without a seed: eagerly, the context's seed sequence supplies one; statically, a fixed
// function of the op's position in the program, so rebuilding a program gives the same one.
absl::StatusOr<Value> UniformRandom(const Shape& shape, double min = -1.0, double max = 1.0,
                                    std::optional<int64_t> seed = std::nullopt,
                                    DataType dtype = DataType::kF32, eager::Context* ctx = nullptr);

}  // namespace sluice::fn

#endif  // SLUICE_FRAMEWORK_BUILDER_FUNCTIONAL_H_
