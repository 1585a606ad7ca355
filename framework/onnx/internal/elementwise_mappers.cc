// Mappers for elementwise ops, casts, constants, matmul and Gemm (node_table.h).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"
#include "framework/onnx/internal/tensor_proto.h"

namespace sluice::framework::onnx::internal {
namespace {

using BinaryFn = absl::StatusOr<Value> (*)(const Value&, const Value&);
using UnaryFn = absl::StatusOr<Value> (*)(const Value&);

BinaryFn BinaryOf(absl::string_view type) {
  if (type == "Add") return fn::Add;
  if (type == "Sub") return fn::Sub;
  if (type == "Mul") return fn::Mul;
  if (type == "Div") return fn::Div;
  if (type == "Max") return fn::Maximum;
  if (type == "Min") return fn::Minimum;
  if (type == "Sum" || type == "Mean") return fn::Add;
  if (type == "Equal") return fn::Equal;
  if (type == "Less") return fn::LessThan;
  if (type == "LessOrEqual") return fn::LessEqual;
  if (type == "Greater") return fn::GreaterThan;
  if (type == "GreaterOrEqual") return fn::GreaterEqual;
  if (type == "And") return fn::LogicalAnd;
  if (type == "Or") return fn::LogicalOr;
  if (type == "Xor") return fn::LogicalXor;
  return nullptr;
}

absl::StatusOr<Value> Reciprocal(const Value& x) { return fn::Pow(x, -1.0); }

UnaryFn UnaryOf(absl::string_view type) {
  if (type == "Relu") return fn::Relu;
  if (type == "Sigmoid") return fn::Sigmoid;
  if (type == "Tanh") return fn::Tanh;
  if (type == "Exp") return fn::Exp;
  if (type == "Log") return fn::Log;
  if (type == "Sqrt") return fn::Sqrt;
  if (type == "Abs") return fn::Abs;
  if (type == "Erf") return fn::Erf;
  if (type == "Sin") return fn::Sin;
  if (type == "Cos") return fn::Cos;
  if (type == "Tan") return fn::Tan;
  if (type == "Asin") return fn::Asin;
  if (type == "Acos") return fn::Acos;
  if (type == "Atan") return fn::Atan;
  if (type == "Sinh") return fn::Sinh;
  if (type == "Cosh") return fn::Cosh;
  if (type == "Asinh") return fn::Asinh;
  if (type == "Acosh") return fn::Acosh;
  if (type == "Atanh") return fn::Atanh;
  if (type == "Floor") return fn::Floor;
  if (type == "Ceil") return fn::Ceil;
  if (type == "Round") return fn::Round;
  if (type == "Neg") return fn::Neg;
  if (type == "Not") return fn::LogicalNot;
  if (type == "Reciprocal") return Reciprocal;
  return nullptr;
}

// A Constant node's value from whichever attribute holds it.
absl::StatusOr<HostTensor> ConstantValue(const NodeContext& ctx) {
  if (ctx.node().attribute_size() != 1) {
    return ctx.Error("a Constant needs exactly one value attribute");
  }
  const ::onnx::AttributeProto& attr = ctx.node().attribute(0);
  const std::string& name = attr.name();
  if (name == "value") {
    absl::StatusOr<HostTensor> value = HostTensorOfProto(attr.t());
    if (!value.ok()) return ctx.Error(value.status().message());
    return value;
  }
  const Shape scalar = Shape::Make({}).value();
  if (name == "value_float") return HostTensor::FromVector(std::vector<float>{attr.f()}, scalar);
  if (name == "value_int") return HostTensor::FromVector(std::vector<int64_t>{attr.i()}, scalar);
  if (name == "value_floats") {
    std::vector<float> v(attr.floats().begin(), attr.floats().end());
    const auto n = static_cast<int64_t>(v.size());
    return HostTensor::FromVector(v, Shape{n});
  }
  if (name == "value_ints") {
    std::vector<int64_t> v(attr.ints().begin(), attr.ints().end());
    const auto n = static_cast<int64_t>(v.size());
    return HostTensor::FromVector(v, Shape{n});
  }
  return ctx.Error(
      absl::StrCat("a Constant's '", name, "' (sparse tensors and strings) is not supported"));
}

}  // namespace

absl::Status MapBinary(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  if (ctx.num_inputs() != 2) return ctx.Error("needs two inputs");
  SLUICE_ASSIGN_OR_RETURN(Value a, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, BinaryOf(ctx.node().op_type())(a, b)));
  return ctx.SetOutput(0, out);
}

absl::Status MapVariadic(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> xs, ctx.Inputs());
  if (xs.empty()) return ctx.Error("needs at least one input");
  const std::string& type = ctx.node().op_type();
  // Left to right, as ONNX Runtime's reference accumulates; broadcasting as the binary op.
  Value acc = xs[0];
  if (xs.size() == 1) {
    SLUICE_ASSIGN_OR_RETURN(acc, Built(ctx, fn::Assign(acc)));
  }
  for (size_t i = 1; i < xs.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(acc, Built(ctx, BinaryOf(type)(acc, xs[i])));
  }
  if (type == "Mean" && xs.size() > 1) {
    SLUICE_ASSIGN_OR_RETURN(acc, Built(ctx, fn::Scale(acc, 1.0 / static_cast<double>(xs.size()))));
  }
  return ctx.SetOutput(0, acc);
}

absl::Status MapUnary(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, UnaryOf(ctx.node().op_type())(x)));
  return ctx.SetOutput(0, out);
}

absl::Status MapPow(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(double factor, ctx.ConstantScalar(1, "the exponent"));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Pow(x, factor)));
  return ctx.SetOutput(0, out);
}

absl::Status MapClip(NodeContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  if (ctx.opset() < 11) {
    SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"min", "max"}));
    SLUICE_ASSIGN_OR_RETURN(lo, ctx.FloatAttr("min", std::numeric_limits<float>::lowest()));
    SLUICE_ASSIGN_OR_RETURN(hi, ctx.FloatAttr("max", std::numeric_limits<float>::max()));
  } else {
    SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
    if (ctx.HasInput(1)) {
      SLUICE_ASSIGN_OR_RETURN(lo, ctx.ConstantScalar(1, "min"));
    }
    if (ctx.HasInput(2)) {
      SLUICE_ASSIGN_OR_RETURN(hi, ctx.ConstantScalar(2, "max"));
    }
  }
  // ONNX clips to min, then to max: with min > max every number becomes max (Sluice's clip
  // refuses such bounds).
  if (lo > hi) lo = hi;
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Clip(x, lo, hi)));
  return ctx.SetOutput(0, out);
}

absl::Status MapCast(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"to", "saturate", "round_mode"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  if (!ctx.HasAttr("to")) return ctx.Error("attribute 'to' is required");
  SLUICE_ASSIGN_OR_RETURN(int64_t to, ctx.IntAttr("to", 0));
  absl::StatusOr<DataType> dtype =
      DtypeOfOnnxType(static_cast<int32_t>(to), "the cast's target type");
  if (!dtype.ok()) return ctx.Error(dtype.status().message());
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Cast(x, *dtype)));
  return ctx.SetOutput(0, out);
}

absl::Status MapIdentity(NodeContext& ctx) {
  if (ctx.node().op_type() == "Dropout") {
    SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"ratio", "seed"}));
    if (ctx.WantsOutput(1)) {
      return ctx.Error("the mask output is not supported (inference imports only)");
    }
    if (ctx.HasInput(2)) {
      SLUICE_ASSIGN_OR_RETURN(double training, ctx.ConstantScalar(2, "training_mode"));
      if (training != 0.0) return ctx.Error("training_mode true is not supported");
    }
  } else {
    SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  }
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Assign(x)));
  return ctx.SetOutput(0, out);
}

absl::Status MapConstant(NodeContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(HostTensor value, ConstantValue(ctx));
  ctx.SetConstantOutput(0, std::move(value));
  return absl::OkStatus();
}

// NumPy's matmul: a 1-D A is a row [1, K] and a 1-D B a column [K, 1], the added axis
// dropped from the result (a reshape on each side; Sluice's matmul takes rank 2 or more).
absl::Status MapMatMul(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value a, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(1));
  const bool a_vector = a.var().shape().rank() == 1;
  const bool b_vector = b.var().shape().rank() == 1;
  if (a_vector) {
    SLUICE_ASSIGN_OR_RETURN(a, Built(ctx, fn::Reshape(a, {1, a.var().shape().dim(0)})));
  }
  if (b_vector) {
    SLUICE_ASSIGN_OR_RETURN(b, Built(ctx, fn::Reshape(b, {b.var().shape().dim(0), 1})));
  }
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Matmul(a, b)));
  if (a_vector || b_vector) {
    const Shape shape = out.var().shape();
    std::vector<int64_t> dims(shape.dims().begin(), shape.dims().end());
    if (b_vector) dims.pop_back();
    if (a_vector) dims.erase(dims.end() - (b_vector ? 1 : 2));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Reshape(out, dims)));
  }
  return ctx.SetOutput(0, out);
}

// Y = alpha * op(A) op(B) + beta * C, C broadcast to Y's shape.
absl::Status MapGemm(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"alpha", "beta", "transA", "transB"}));
  SLUICE_ASSIGN_OR_RETURN(double alpha, ctx.FloatAttr("alpha", 1.0));
  SLUICE_ASSIGN_OR_RETURN(double beta, ctx.FloatAttr("beta", 1.0));
  SLUICE_ASSIGN_OR_RETURN(bool trans_a, ctx.FlagAttr("transA", false));
  SLUICE_ASSIGN_OR_RETURN(bool trans_b, ctx.FlagAttr("transB", false));
  SLUICE_ASSIGN_OR_RETURN(Value a, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(1));
  if (a.var().shape().rank() != 2 || b.var().shape().rank() != 2) {
    return ctx.Error(absl::StrCat("A and B must be matrices; they have shapes ",
                                  a.var().shape().ToString(), " and ", b.var().shape().ToString()));
  }
  SLUICE_ASSIGN_OR_RETURN(Value y, Built(ctx, fn::Matmul(a, b, trans_a != 0, trans_b != 0)));
  if (alpha != 1.0) {
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Scale(y, alpha)));
  }
  if (ctx.HasInput(2) && beta != 0.0) {
    SLUICE_ASSIGN_OR_RETURN(Value c, ctx.Input(2));
    if (beta != 1.0) {
      SLUICE_ASSIGN_OR_RETURN(c, Built(ctx, fn::Scale(c, beta)));
    }
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Add(y, c)));
  }
  return ctx.SetOutput(0, y);
}

}  // namespace sluice::framework::onnx::internal
