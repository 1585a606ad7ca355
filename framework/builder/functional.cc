#include "framework/builder/functional.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/status.h"

namespace sluice::framework {

const Var& Value::var() const {
  SLUICE_CHECK(is_static());
  return std::get<Var>(value_);
}

const eager::Tensor& Value::tensor() const {
  SLUICE_CHECK(!is_static());
  return std::get<eager::Tensor>(value_);
}

}  // namespace sluice::framework

namespace sluice::fn {
namespace {

using framework::Program;
using framework::Var;

std::vector<int64_t> Dims(const Shape& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

// Runs `op` on `inputs` (per slot) in their common mode; every output, slots flattened.
absl::StatusOr<std::vector<Value>> Apply(absl::string_view op,
                                         const std::vector<std::vector<Value>>& inputs,
                                         const vm::AttrMap& attrs) {
  const Value* first = nullptr;
  for (size_t s = 0; s < inputs.size(); ++s) {
    for (size_t i = 0; i < inputs[s].size(); ++i) {
      const Value& v = inputs[s][i];
      if (first == nullptr) {
        first = &v;
      } else if (v.is_static() != first->is_static()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "op '", op, "': operand ", s, "[", i, "] is ",
            v.is_static() ? "a static Var" : "an eager Tensor", " but an earlier operand is ",
            first->is_static() ? "a static Var" : "an eager Tensor",
            "; one call takes operands of one mode"));
      }
    }
  }
  if (first == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("op '", op, "': no operands"));
  }
  std::vector<Value> results;
  if (first->is_static()) {
    std::vector<std::vector<Var>> vars(inputs.size());
    for (size_t s = 0; s < inputs.size(); ++s) {
      for (const Value& v : inputs[s]) vars[s].push_back(v.var());
    }
    Program* program = first->var().program();
    if (program == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op, "': an empty Var handle"));
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> outs,
                            framework::AppendOp(*program, op, vars, attrs));
    for (std::vector<Var>& slot : outs) {
      for (Var& var : slot) results.emplace_back(std::move(var));
    }
    return results;
  }
  std::vector<std::vector<eager::Tensor>> tensors(inputs.size());
  for (size_t s = 0; s < inputs.size(); ++s) {
    for (const Value& v : inputs[s]) tensors[s].push_back(v.tensor());
  }
  if (!first->tensor().valid()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", op, "': an empty Tensor"));
  }
  eager::Context ctx = first->tensor().context();
  SLUICE_ASSIGN_OR_RETURN(std::vector<eager::Tensor> outs, ctx.Call(op, tensors, attrs));
  for (eager::Tensor& t : outs) results.emplace_back(std::move(t));
  return results;
}

absl::StatusOr<Value> One(absl::StatusOr<std::vector<Value>> outputs) {
  if (!outputs.ok()) return outputs.status();
  return std::move((*outputs)[0]);
}

absl::StatusOr<Value> Unary(absl::string_view op, const Value& x, const vm::AttrMap& attrs = {}) {
  return One(Apply(op, {{x}}, attrs));
}

absl::StatusOr<Value> Binary(absl::string_view op, const Value& x, const Value& y,
                             const vm::AttrMap& attrs = {}) {
  return One(Apply(op, {{x}, {y}}, attrs));
}

absl::StatusOr<Value> Variadic(absl::string_view op, const std::vector<Value>& xs,
                               const vm::AttrMap& attrs = {}) {
  if (xs.empty()) return absl::InvalidArgumentError(absl::StrCat("op '", op, "': no inputs"));
  return One(Apply(op, {xs}, attrs));
}

// Ops without operands: the current main program, else `ctx`.
absl::StatusOr<Value> Source(absl::string_view op, const vm::AttrMap& attrs, eager::Context* ctx) {
  if (Program* main = framework::CurrentMainProgram(); main != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> outs,
                            framework::AppendOp(*main, op, {}, attrs));
    return Value(std::move(outs[0][0]));
  }
  if (ctx == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "op '", op, "': outside a ProgramGuard an eager::Context is needed to run it eagerly"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<eager::Tensor> outs, ctx->Call(op, {}, attrs));
  return Value(std::move(outs[0]));
}

// SplitMix64 finalizer: a well-mixed seed from a small counter.
int64_t MixSeed(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>((z ^ (z >> 31)) >> 1);
}

}  // namespace

absl::StatusOr<Value> Add(const Value& x, const Value& y) { return Binary("add", x, y); }
absl::StatusOr<Value> Sub(const Value& x, const Value& y) { return Binary("sub", x, y); }
absl::StatusOr<Value> Mul(const Value& x, const Value& y) { return Binary("mul", x, y); }
absl::StatusOr<Value> Div(const Value& x, const Value& y) { return Binary("div", x, y); }

absl::StatusOr<Value> Relu(const Value& x) { return Unary("relu", x); }
absl::StatusOr<Value> Sigmoid(const Value& x) { return Unary("sigmoid", x); }
absl::StatusOr<Value> Tanh(const Value& x) { return Unary("tanh", x); }
absl::StatusOr<Value> Exp(const Value& x) { return Unary("exp", x); }
absl::StatusOr<Value> Log(const Value& x) { return Unary("log", x); }
absl::StatusOr<Value> Sqrt(const Value& x) { return Unary("sqrt", x); }
absl::StatusOr<Value> Square(const Value& x) { return Unary("square", x); }

absl::StatusOr<Value> LessThan(const Value& x, const Value& y) { return Binary("less_than", x, y); }
absl::StatusOr<Value> LessEqual(const Value& x, const Value& y) {
  return Binary("less_equal", x, y);
}
absl::StatusOr<Value> GreaterThan(const Value& x, const Value& y) {
  return Binary("greater_than", x, y);
}
absl::StatusOr<Value> GreaterEqual(const Value& x, const Value& y) {
  return Binary("greater_equal", x, y);
}
absl::StatusOr<Value> Equal(const Value& x, const Value& y) { return Binary("equal", x, y); }
absl::StatusOr<Value> NotEqual(const Value& x, const Value& y) { return Binary("not_equal", x, y); }
absl::StatusOr<Value> LogicalAnd(const Value& x, const Value& y) {
  return Binary("logical_and", x, y);
}
absl::StatusOr<Value> LogicalOr(const Value& x, const Value& y) {
  return Binary("logical_or", x, y);
}
absl::StatusOr<Value> LogicalXor(const Value& x, const Value& y) {
  return Binary("logical_xor", x, y);
}
absl::StatusOr<Value> LogicalNot(const Value& x) { return Unary("logical_not", x); }
absl::StatusOr<Value> Increment(const Value& x, double value) {
  return Unary("increment", x, vm::AttrMap().Set("value", value));
}

absl::StatusOr<Value> Scale(const Value& x, double scale, double bias) {
  return Unary("scale", x, vm::AttrMap().Set("scale", scale).Set("bias", bias));
}
absl::StatusOr<Value> Clip(const Value& x, double lo, double hi) {
  return Unary("clip", x, vm::AttrMap().Set("min", lo).Set("max", hi));
}

absl::StatusOr<Value> Matmul(const Value& x, const Value& y, bool transpose_x, bool transpose_y) {
  return Binary("matmul", x, y,
                vm::AttrMap()
                    .Set("transpose_x", int64_t{transpose_x})
                    .Set("transpose_y", int64_t{transpose_y}));
}

absl::StatusOr<Value> ReduceSum(const Value& x, std::vector<int64_t> axes, bool keepdim) {
  return Unary("reduce_sum", x,
               vm::AttrMap().Set("axes", std::move(axes)).Set("keepdim", int64_t{keepdim}));
}

absl::StatusOr<Value> ReduceMean(const Value& x, std::vector<int64_t> axes, bool keepdim) {
  return Unary("reduce_mean", x,
               vm::AttrMap().Set("axes", std::move(axes)).Set("keepdim", int64_t{keepdim}));
}

absl::StatusOr<Value> Softmax(const Value& x, int64_t axis) {
  return Unary("softmax", x, vm::AttrMap().Set("axis", axis));
}

absl::StatusOr<Value> Reshape(const Value& x, std::vector<int64_t> shape) {
  return Unary("reshape", x, vm::AttrMap().Set("shape", std::move(shape)));
}

absl::StatusOr<Value> Transpose(const Value& x, std::vector<int64_t> perm) {
  return Unary("transpose", x, vm::AttrMap().Set("perm", std::move(perm)));
}

absl::StatusOr<Value> Concat(const std::vector<Value>& xs, int64_t axis) {
  return Variadic("concat", xs, vm::AttrMap().Set("axis", axis));
}

absl::StatusOr<Value> Sum(const std::vector<Value>& xs) { return Variadic("sum", xs); }

absl::StatusOr<std::pair<Value, Value>> SoftmaxWithCrossEntropy(const Value& logits,
                                                                const Value& label) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> outs,
                          Apply("softmax_with_cross_entropy", {{logits}, {label}}, {}));
  return std::make_pair(std::move(outs[0]), std::move(outs[1]));
}

absl::StatusOr<Value> FillConstant(const Shape& shape, double value, DataType dtype,
                                   eager::Context* ctx) {
  return Source("fill_constant",
                vm::AttrMap()
                    .Set("shape", Dims(shape))
                    .Set("value", value)
                    .Set("dtype", std::string(DataTypeName(dtype))),
                ctx);
}

absl::StatusOr<Value> UniformRandom(const Shape& shape, double min, double max,
                                    std::optional<int64_t> seed, DataType dtype,
                                    eager::Context* ctx) {
  if (!seed.has_value()) {
    if (Program* main = framework::CurrentMainProgram(); main != nullptr) {
      seed = MixSeed(main->desc().global_block().ops().size());
    } else if (ctx != nullptr) {
      seed = ctx->NextSeed();
    }
  }
  return Source("uniform_random",
                vm::AttrMap()
                    .Set("shape", Dims(shape))
                    .Set("min", min)
                    .Set("max", max)
                    .Set("seed", seed.value_or(0))
                    .Set("dtype", std::string(DataTypeName(dtype))),
                ctx);
}

}  // namespace sluice::fn
