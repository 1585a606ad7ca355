#include "framework/eager/functional.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/eager/internal/context_state.h"

namespace sluice::eager {
namespace internal {

// The functional API's way into Context and Tensor internals.
struct OpCalls {
  // Context::CallSingle in the context of inputs[0], reached through its state (no Context
  // handle to copy per op).
  // `inputs` point to the caller's handles (copying a handle costs two atomic updates).
  static absl::StatusOr<Tensor> Single(absl::string_view op, absl::Span<const Tensor* const> inputs,
                                       const vm::AttrMap& attrs) {
    if (inputs.empty() || !inputs[0]->valid()) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op, "': empty Tensor"));
    }
    return Context::CallSingleIn(inputs[0]->state_->context(), op, inputs, attrs, std::nullopt);
  }
};

}  // namespace internal
namespace {

absl::StatusOr<Context> ContextOf(absl::string_view op, const Tensor& t) {
  if (!t.valid()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", op, "': empty Tensor"));
  }
  return t.context();
}

absl::StatusOr<Tensor> One(absl::StatusOr<std::vector<Tensor>> out) {
  if (!out.ok()) return out.status();
  return std::move((*out)[0]);
}

absl::StatusOr<Tensor> Unary(absl::string_view op, const Tensor& x,
                             const vm::AttrMap& attrs = vm::AttrMap()) {
  const Tensor* const inputs[] = {&x};
  return internal::OpCalls::Single(op, inputs, attrs);
}

absl::StatusOr<Tensor> Binary(absl::string_view op, const Tensor& x, const Tensor& y,
                              const vm::AttrMap& attrs = vm::AttrMap()) {
  const Tensor* const inputs[] = {&x, &y};
  return internal::OpCalls::Single(op, inputs, attrs);
}

absl::StatusOr<Tensor> Variadic(absl::string_view op, const std::vector<Tensor>& xs,
                                vm::AttrMap attrs = {}) {
  if (xs.empty()) return absl::InvalidArgumentError(absl::StrCat("op '", op, "': no inputs"));
  SLUICE_ASSIGN_OR_RETURN(Context ctx, ContextOf(op, xs[0]));
  return One(ctx.Call(op, {xs}, attrs));
}

std::vector<int64_t> Dims(const Shape& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

}  // namespace

absl::StatusOr<Tensor> Add(const Tensor& x, const Tensor& y) { return Binary("add", x, y); }
absl::StatusOr<Tensor> Sub(const Tensor& x, const Tensor& y) { return Binary("sub", x, y); }
absl::StatusOr<Tensor> Mul(const Tensor& x, const Tensor& y) { return Binary("mul", x, y); }
absl::StatusOr<Tensor> Div(const Tensor& x, const Tensor& y) { return Binary("div", x, y); }
absl::StatusOr<Tensor> Maximum(const Tensor& x, const Tensor& y) { return Binary("max", x, y); }
absl::StatusOr<Tensor> Minimum(const Tensor& x, const Tensor& y) { return Binary("min", x, y); }

absl::StatusOr<Tensor> Relu(const Tensor& x) { return Unary("relu", x); }
absl::StatusOr<Tensor> Sigmoid(const Tensor& x) { return Unary("sigmoid", x); }
absl::StatusOr<Tensor> Tanh(const Tensor& x) { return Unary("tanh", x); }
absl::StatusOr<Tensor> Exp(const Tensor& x) { return Unary("exp", x); }
absl::StatusOr<Tensor> Log(const Tensor& x) { return Unary("log", x); }
absl::StatusOr<Tensor> Sqrt(const Tensor& x) { return Unary("sqrt", x); }
absl::StatusOr<Tensor> Square(const Tensor& x) { return Unary("square", x); }

absl::StatusOr<Tensor> Scale(const Tensor& x, double scale, double bias) {
  return Unary("scale", x, vm::AttrMap().Set("scale", scale).Set("bias", bias));
}
absl::StatusOr<Tensor> Clip(const Tensor& x, double lo, double hi) {
  return Unary("clip", x, vm::AttrMap().Set("min", lo).Set("max", hi));
}
absl::StatusOr<Tensor> Cast(const Tensor& x, DataType dtype) {
  return Unary("cast", x, vm::AttrMap().Set("dtype", std::string(DataTypeName(dtype))));
}
absl::StatusOr<Tensor> Assign(const Tensor& x) { return Unary("assign", x); }
absl::StatusOr<Tensor> Sum(const std::vector<Tensor>& xs) { return Variadic("sum", xs); }
absl::StatusOr<Tensor> FillZerosLike(const Tensor& x) { return Unary("fill_zeros_like", x); }

absl::StatusOr<Tensor> Matmul(const Tensor& x, const Tensor& y, bool transpose_x,
                              bool transpose_y) {
  return Binary("matmul", x, y,
                vm::AttrMap()
                    .Set("transpose_x", int64_t{transpose_x})
                    .Set("transpose_y", int64_t{transpose_y}));
}
absl::StatusOr<Tensor> ReduceSum(const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  return Unary("reduce_sum", x,
               vm::AttrMap().Set("axes", std::move(axes)).Set("keepdim", int64_t{keepdim}));
}
absl::StatusOr<Tensor> ReduceMean(const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  return Unary("reduce_mean", x,
               vm::AttrMap().Set("axes", std::move(axes)).Set("keepdim", int64_t{keepdim}));
}
absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t axis) {
  return Unary("softmax", x, vm::AttrMap().Set("axis", axis));
}
absl::StatusOr<Tensor> LogSoftmax(const Tensor& x, int64_t axis) {
  return Unary("log_softmax", x, vm::AttrMap().Set("axis", axis));
}
absl::StatusOr<std::pair<Tensor, Tensor>> SoftmaxWithCrossEntropy(const Tensor& logits,
                                                                  const Tensor& label) {
  SLUICE_ASSIGN_OR_RETURN(Context ctx, ContextOf("softmax_with_cross_entropy", logits));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                          ctx.Call("softmax_with_cross_entropy", {{logits}, {label}}));
  return std::make_pair(std::move(out[0]), std::move(out[1]));
}

absl::StatusOr<Tensor> Reshape(const Tensor& x, std::vector<int64_t> shape) {
  return Unary("reshape", x, vm::AttrMap().Set("shape", std::move(shape)));
}
absl::StatusOr<Tensor> Transpose(const Tensor& x, std::vector<int64_t> perm) {
  return Unary("transpose", x, vm::AttrMap().Set("perm", std::move(perm)));
}
absl::StatusOr<Tensor> Concat(const std::vector<Tensor>& xs, int64_t axis) {
  return Variadic("concat", xs, vm::AttrMap().Set("axis", axis));
}
absl::StatusOr<std::vector<Tensor>> Split(const Tensor& x, int64_t num, int64_t axis) {
  SLUICE_ASSIGN_OR_RETURN(Context ctx, ContextOf("split", x));
  return ctx.Call("split", {{x}}, vm::AttrMap().Set("num", num).Set("axis", axis));
}

absl::StatusOr<Tensor> FillConstant(Context& ctx, const Shape& shape, double value, DataType dtype,
                                    std::optional<Device> device) {
  return One(ctx.Call("fill_constant", {},
                      vm::AttrMap()
                          .Set("shape", Dims(shape))
                          .Set("value", value)
                          .Set("dtype", std::string(DataTypeName(dtype))),
                      device));
}

absl::StatusOr<Tensor> UniformRandom(Context& ctx, const Shape& shape, double min, double max,
                                     std::optional<int64_t> seed, DataType dtype,
                                     std::optional<Device> device) {
  return One(ctx.Call("uniform_random", {},
                      vm::AttrMap()
                          .Set("shape", Dims(shape))
                          .Set("min", min)
                          .Set("max", max)
                          .Set("seed", seed.has_value() ? *seed : ctx.NextSeed())
                          .Set("dtype", std::string(DataTypeName(dtype))),
                      device));
}

absl::StatusOr<Tensor> GaussianRandom(Context& ctx, const Shape& shape, double mean, double std,
                                      std::optional<int64_t> seed, DataType dtype,
                                      std::optional<Device> device) {
  return One(ctx.Call("gaussian_random", {},
                      vm::AttrMap()
                          .Set("shape", Dims(shape))
                          .Set("mean", mean)
                          .Set("std", std)
                          .Set("seed", seed.has_value() ? *seed : ctx.NextSeed())
                          .Set("dtype", std::string(DataTypeName(dtype))),
                      device));
}

absl::Status SgdStep(const Tensor& param, const Tensor& grad, const Tensor& lr) {
  SLUICE_ASSIGN_OR_RETURN(Context ctx, ContextOf("sgd", param));
  return ctx.CallInto("sgd", {{param}, {grad}, {lr}}, {{param}});
}

absl::Status AdamStep(const Tensor& param, const Tensor& grad, const Tensor& lr,
                      const AdamState& state, double beta1, double beta2, double epsilon) {
  SLUICE_ASSIGN_OR_RETURN(Context ctx, ContextOf("adam", param));
  return ctx.CallInto(
      "adam",
      {{param},
       {grad},
       {lr},
       {state.moment1},
       {state.moment2},
       {state.beta1_pow},
       {state.beta2_pow}},
      {{param}, {state.moment1}, {state.moment2}, {state.beta1_pow}, {state.beta2_pow}},
      vm::AttrMap().Set("beta1", beta1).Set("beta2", beta2).Set("epsilon", epsilon));
}

}  // namespace sluice::eager
