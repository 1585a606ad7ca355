#include "framework/compiler/op_lowering.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"

namespace sluice::framework::compiler {
namespace {

enum class Form {
  kBinary,      // X, Y -> Out: one node
  kUnary,       // X -> Out: one node
  kUnaryGrad,   // V, OutGrad -> XGrad: one node
  kBinaryGrad,  // X, Y, OutGrad -> XGrad, YGrad: two nodes
  kScale,
  kCast,
  kSgd,  // Param, Grad, LearningRate -> ParamOut
};

struct OpRule {
  const char* type;
  Form form;
  ExprOp op;      // the node (kBinaryGrad: XGrad's)
  ExprOp second;  // kBinaryGrad: YGrad's
};

constexpr OpRule kRules[] = {
    {"add", Form::kBinary, ExprOp::kAdd, ExprOp::kAdd},
    {"sub", Form::kBinary, ExprOp::kSub, ExprOp::kSub},
    {"mul", Form::kBinary, ExprOp::kMul, ExprOp::kMul},
    {"div", Form::kBinary, ExprOp::kDiv, ExprOp::kDiv},
    {"max", Form::kBinary, ExprOp::kMax, ExprOp::kMax},
    {"min", Form::kBinary, ExprOp::kMin, ExprOp::kMin},
    {"relu", Form::kUnary, ExprOp::kRelu, ExprOp::kRelu},
    {"sigmoid", Form::kUnary, ExprOp::kSigmoid, ExprOp::kSigmoid},
    {"tanh", Form::kUnary, ExprOp::kTanh, ExprOp::kTanh},
    {"exp", Form::kUnary, ExprOp::kExp, ExprOp::kExp},
    {"log", Form::kUnary, ExprOp::kLog, ExprOp::kLog},
    {"sqrt", Form::kUnary, ExprOp::kSqrt, ExprOp::kSqrt},
    {"square", Form::kUnary, ExprOp::kSquare, ExprOp::kSquare},
    {"relu_grad", Form::kUnaryGrad, ExprOp::kReluGrad, ExprOp::kReluGrad},
    {"sigmoid_grad", Form::kUnaryGrad, ExprOp::kSigmoidGrad, ExprOp::kSigmoidGrad},
    {"tanh_grad", Form::kUnaryGrad, ExprOp::kTanhGrad, ExprOp::kTanhGrad},
    {"exp_grad", Form::kUnaryGrad, ExprOp::kExpGrad, ExprOp::kExpGrad},
    {"log_grad", Form::kUnaryGrad, ExprOp::kLogGrad, ExprOp::kLogGrad},
    {"sqrt_grad", Form::kUnaryGrad, ExprOp::kSqrtGrad, ExprOp::kSqrtGrad},
    {"square_grad", Form::kUnaryGrad, ExprOp::kSquareGrad, ExprOp::kSquareGrad},
    // XGrad, YGrad of the binary ops (the host kernels' GradX / GradY functors).
    {"add_grad", Form::kBinaryGrad, ExprOp::kCopy, ExprOp::kCopy},
    {"sub_grad", Form::kBinaryGrad, ExprOp::kCopy, ExprOp::kNeg},
    {"mul_grad", Form::kBinaryGrad, ExprOp::kMul, ExprOp::kMul},
    {"div_grad", Form::kBinaryGrad, ExprOp::kDiv, ExprOp::kDivGradY},
    {"max_grad", Form::kBinaryGrad, ExprOp::kMaxGradX, ExprOp::kMaxGradY},
    {"min_grad", Form::kBinaryGrad, ExprOp::kMinGradX, ExprOp::kMinGradY},
    {"scale", Form::kScale, ExprOp::kScale, ExprOp::kScale},
    {"cast", Form::kCast, ExprOp::kCast, ExprOp::kCast},
    {"sgd", Form::kSgd, ExprOp::kSgd, ExprOp::kSgd},
};

const OpRule* FindRule(absl::string_view type) {
  for (const OpRule& rule : kRules) {
    if (type == rule.type) return &rule;
  }
  return nullptr;
}

int InputsOf(Form form) {
  switch (form) {
    case Form::kBinary:
    case Form::kUnaryGrad:
      return 2;
    case Form::kBinaryGrad:
    case Form::kSgd:
      return 3;
    default:
      return 1;
  }
}

std::optional<DataType> CastTarget(const vm::AttrMap* attrs) {
  if (attrs == nullptr) return std::nullopt;
  absl::StatusOr<std::string> name = attrs->GetString("dtype");
  if (!name.ok()) return std::nullopt;
  absl::StatusOr<DataType> dtype = ParseDataType(*name);
  if (!dtype.ok()) return std::nullopt;
  return *dtype;
}

}  // namespace

bool IsFusible(absl::string_view type, const vm::AttrMap* attrs,
               const std::vector<ValueMeta>& inputs, const std::vector<ValueMeta>& outputs) {
  const OpRule* rule = FindRule(type);
  if (rule == nullptr) return false;
  const int want_outputs = rule->form == Form::kBinaryGrad ? 2 : 1;
  if (static_cast<int>(inputs.size()) != InputsOf(rule->form) ||
      static_cast<int>(outputs.size()) != want_outputs) {
    return false;
  }
  const Shape& domain = outputs[0].shape;
  const DataType dtype = outputs[0].dtype;
  for (const ValueMeta& out : outputs) {
    if (!IsFloating(out.dtype) || out.dtype != dtype || out.shape != domain) return false;
  }
  for (const ValueMeta& in : inputs) {
    if (!IsFloating(in.dtype) || !BroadcastsInto(in.shape, domain)) return false;
    if (rule->form != Form::kCast && in.dtype != dtype) return false;
  }
  switch (rule->form) {
    case Form::kUnary:
    case Form::kUnaryGrad:
    case Form::kBinaryGrad:
      // No broadcasting inside these ops (the grads' reductions are not elementwise).
      for (const ValueMeta& in : inputs) {
        if (in.shape != domain) return false;
      }
      return true;
    case Form::kSgd:
      return inputs[0].shape == domain && inputs[1].shape == domain &&
             inputs[2].shape.NumElements() == 1;
    case Form::kScale:
      return inputs[0].shape == domain;
    case Form::kCast: {
      const std::optional<DataType> to = CastTarget(attrs);
      return to.has_value() && *to == dtype && inputs[0].shape == domain;
    }
    case Form::kBinary:
      return true;
  }
  return false;
}

absl::StatusOr<std::vector<int>> AppendOp(absl::string_view type, const vm::AttrMap* attrs,
                                          const std::vector<int>& args,
                                          const std::vector<ValueMeta>& outputs, Subgraph& graph) {
  const OpRule* rule = FindRule(type);
  if (rule == nullptr || outputs.empty() || static_cast<int>(args.size()) != InputsOf(rule->form)) {
    return absl::InvalidArgumentError(absl::StrCat("op '", type, "' is not fusible"));
  }
  const DataType dtype = outputs[0].dtype;
  auto add = [&](ExprOp op, std::initializer_list<int> operands) {
    ExprNode node;
    node.op = op;
    node.dtype = dtype;
    int a = 0;
    for (int v : operands) node.args[a++] = v;
    graph.nodes.push_back(node);
    return graph.num_values() - 1;
  };
  switch (rule->form) {
    case Form::kBinary:
    case Form::kUnaryGrad:
      return std::vector<int>{add(rule->op, {args[0], args[1]})};
    case Form::kUnary:
    case Form::kCast:
      return std::vector<int>{add(rule->op, {args[0]})};
    case Form::kScale: {
      const int v = add(ExprOp::kScale, {args[0]});
      ExprNode& node = graph.nodes.back();
      node.params[0] = attrs != nullptr ? attrs->GetFloat("scale").value_or(1.0) : 1.0;
      node.params[1] = attrs != nullptr ? attrs->GetFloat("bias").value_or(0.0) : 0.0;
      return std::vector<int>{v};
    }
    case Form::kSgd:
      return std::vector<int>{add(ExprOp::kSgd, {args[0], args[1], args[2]})};
    case Form::kBinaryGrad: {
      const int x = args[0], y = args[1], g = args[2];
      auto part = [&](ExprOp op) {
        switch (op) {
          case ExprOp::kCopy:
          case ExprOp::kNeg:
            return add(op, {g});
          case ExprOp::kDiv:  // div_grad's X part: g / y
            return add(op, {g, y});
          default:  // x, y, g
            return add(op, {x, y, g});
        }
      };
      if (rule->op == ExprOp::kMul) {  // mul_grad: XGrad = g * y, YGrad = g * x
        const int dx = add(ExprOp::kMul, {g, y});
        const int dy = add(ExprOp::kMul, {g, x});
        return std::vector<int>{dx, dy};
      }
      const int dx = part(rule->op);
      const int dy = part(rule->second);
      return std::vector<int>{dx, dy};
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("op '", type, "' is not fusible"));
}

}  // namespace sluice::framework::compiler
