// The functional ops (framework/builder/functional.h) for Python: each takes Tensors or
// Variables and runs at once or appends to the Variables' program, as the C++ front end
// does. `call` runs any registered op by name with attributes, in either mode.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/builder/losses.h"
#include "python/src/bindings.h"

namespace sluice::python {
namespace {

using UnaryFn = absl::StatusOr<framework::Value> (*)(const framework::Value&);
using BinaryFn = absl::StatusOr<framework::Value> (*)(const framework::Value&,
                                                      const framework::Value&);

std::vector<framework::Value> ToValues(const nb::handle& sequence) {
  std::vector<framework::Value> values;
  for (nb::handle item : sequence) values.push_back(ToValue(item));
  return values;
}

// One slot's operands: a Tensor/Variable, or a sequence of them (variadic slots).
std::vector<framework::Value> SlotValues(nb::handle slot) {
  if (nb::isinstance<eager::Tensor>(slot) || nb::isinstance<PyVariable>(slot)) {
    return {ToValue(slot)};
  }
  return ToValues(slot);
}

nb::list ToList(const std::vector<nb::object>& objects) {
  nb::list out;
  for (const nb::object& o : objects) out.append(o);
  return out;
}

// `call(op, inputs, attrs, device, context)`: every output, slots flattened in order.
nb::list CallOp(const std::string& op, nb::handle inputs, nb::dict attrs,
                std::optional<std::string> device, std::optional<eager::Context> context) {
  std::vector<std::vector<framework::Value>> slots;
  for (nb::handle slot : inputs) slots.push_back(SlotValues(slot));
  const vm::AttrMap attr_map = ToAttrs(attrs);
  const framework::Value* first = nullptr;
  for (const auto& slot : slots) {
    if (!slot.empty()) {
      first = &slot.front();
      break;
    }
  }
  const bool is_static = first != nullptr ? first->is_static()
                                          : framework::CurrentMainProgram() != nullptr && !context;
  std::vector<nb::object> outputs;
  if (is_static) {
    if (device) {
      throw StatusError(absl::InvalidArgumentError(absl::StrCat(
          "op '", op, "': device applies to eager calls; place static ops with the Executor")));
    }
    std::vector<std::vector<framework::Var>> vars(slots.size());
    for (size_t s = 0; s < slots.size(); ++s) {
      for (const framework::Value& v : slots[s]) {
        if (!v.is_static()) {
          throw StatusError(absl::InvalidArgumentError(
              absl::StrCat("op '", op, "': static and eager operands mixed")));
        }
        vars[s].push_back(v.var());
      }
    }
    framework::Program* program =
        first != nullptr ? first->var().program() : framework::CurrentMainProgram();
    std::vector<std::vector<framework::Var>> out =
        Unwrap(framework::AppendOp(*program, op, vars, attr_map));
    for (const auto& slot : out) {
      for (const framework::Var& var : slot) outputs.push_back(FromValue(var));
    }
    return ToList(outputs);
  }
  std::vector<std::vector<eager::Tensor>> tensors(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    for (const framework::Value& v : slots[s]) {
      if (v.is_static()) {
        throw StatusError(absl::InvalidArgumentError(
            absl::StrCat("op '", op, "': static and eager operands mixed")));
      }
      tensors[s].push_back(v.tensor());
    }
  }
  std::optional<eager::Context> ctx = context;
  if (!ctx) {
    if (first == nullptr) {
      throw StatusError(absl::InvalidArgumentError(
          absl::StrCat("op '", op, "': an op without inputs needs a context")));
    }
    ctx = first->tensor().context();
  }
  std::optional<Device> d;
  if (device) d = ParseDevice(*device);
  std::vector<eager::Tensor> out = Unwrap(ctx->Call(op, tensors, attr_map, d));
  for (eager::Tensor& t : out) outputs.push_back(nb::cast(std::move(t)));
  return ToList(outputs);
}

// A reduction's axes: None (all), an int, or a sequence of ints.
std::vector<int64_t> Axes(nb::handle axis) {
  if (axis.is_none()) return {};
  if (PyLong_Check(axis.ptr())) return {nb::cast<int64_t>(axis)};
  return nb::cast<std::vector<int64_t>>(axis);
}

template <UnaryFn F>
nb::object Unary(nb::handle x) {
  return FromValue(Unwrap(F(ToValue(x))));
}
template <BinaryFn F>
nb::object Binary(nb::handle x, nb::handle y) {
  return FromValue(Unwrap(F(ToValue(x), ToValue(y))));
}

}  // namespace

void BindFunctional(nb::module_& m) {
  m.def("relu", &Unary<fn::Relu>, nb::arg("x"));
  m.def("sigmoid", &Unary<fn::Sigmoid>, nb::arg("x"));
  m.def("tanh", &Unary<fn::Tanh>, nb::arg("x"));
  m.def("exp", &Unary<fn::Exp>, nb::arg("x"));
  m.def("log", &Unary<fn::Log>, nb::arg("x"));
  m.def("sqrt", &Unary<fn::Sqrt>, nb::arg("x"));
  m.def("square", &Unary<fn::Square>, nb::arg("x"));
  m.def("logical_not", &Unary<fn::LogicalNot>, nb::arg("x"));
  m.def("add", &Binary<fn::Add>, nb::arg("x"), nb::arg("y"));
  m.def("subtract", &Binary<fn::Sub>, nb::arg("x"), nb::arg("y"));
  m.def("multiply", &Binary<fn::Mul>, nb::arg("x"), nb::arg("y"));
  m.def("divide", &Binary<fn::Div>, nb::arg("x"), nb::arg("y"));
  m.def("less_than", &Binary<fn::LessThan>, nb::arg("x"), nb::arg("y"));
  m.def("less_equal", &Binary<fn::LessEqual>, nb::arg("x"), nb::arg("y"));
  m.def("greater_than", &Binary<fn::GreaterThan>, nb::arg("x"), nb::arg("y"));
  m.def("greater_equal", &Binary<fn::GreaterEqual>, nb::arg("x"), nb::arg("y"));
  m.def("equal", &Binary<fn::Equal>, nb::arg("x"), nb::arg("y"));
  m.def("not_equal", &Binary<fn::NotEqual>, nb::arg("x"), nb::arg("y"));
  m.def("logical_and", &Binary<fn::LogicalAnd>, nb::arg("x"), nb::arg("y"));
  m.def("logical_or", &Binary<fn::LogicalOr>, nb::arg("x"), nb::arg("y"));
  m.def("logical_xor", &Binary<fn::LogicalXor>, nb::arg("x"), nb::arg("y"));
  m.def(
      "scale",
      [](nb::handle x, double scale, double bias) {
        return FromValue(Unwrap(fn::Scale(ToValue(x), scale, bias)));
      },
      nb::arg("x"), nb::arg("scale") = 1.0, nb::arg("bias") = 0.0, "scale * x + bias.");
  m.def(
      "increment",
      [](nb::handle x, double value) {
        return FromValue(Unwrap(fn::Increment(ToValue(x), value)));
      },
      nb::arg("x"), nb::arg("value") = 1.0);
  m.def(
      "matmul",
      [](nb::handle x, nb::handle y, bool transpose_x, bool transpose_y) {
        return FromValue(Unwrap(fn::Matmul(ToValue(x), ToValue(y), transpose_x, transpose_y)));
      },
      nb::arg("x"), nb::arg("y"), nb::arg("transpose_x") = false, nb::arg("transpose_y") = false);
  m.def(
      "sum",
      [](nb::handle x, nb::handle axis, bool keepdim) {
        return FromValue(Unwrap(fn::ReduceSum(ToValue(x), Axes(axis), keepdim)));
      },
      nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("keepdim") = false,
      "reduce_sum over `axis` (all axes when None).");
  m.def(
      "mean",
      [](nb::handle x, nb::handle axis, bool keepdim) {
        return FromValue(Unwrap(fn::ReduceMean(ToValue(x), Axes(axis), keepdim)));
      },
      nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("keepdim") = false);
  m.def(
      "softmax",
      [](nb::handle x, int64_t axis) { return FromValue(Unwrap(fn::Softmax(ToValue(x), axis))); },
      nb::arg("x"), nb::arg("axis") = -1);
  m.def(
      "reshape",
      [](nb::handle x, std::vector<int64_t> shape) {
        return FromValue(Unwrap(fn::Reshape(ToValue(x), std::move(shape))));
      },
      nb::arg("x"), nb::arg("shape"));
  m.def(
      "transpose",
      [](nb::handle x, std::vector<int64_t> perm) {
        return FromValue(Unwrap(fn::Transpose(ToValue(x), std::move(perm))));
      },
      nb::arg("x"), nb::arg("perm"));
  m.def(
      "concat",
      [](nb::handle xs, int64_t axis) { return FromValue(Unwrap(fn::Concat(ToValues(xs), axis))); },
      nb::arg("x"), nb::arg("axis") = 0);
  m.def(
      "add_n", [](nb::handle xs) { return FromValue(Unwrap(fn::Sum(ToValues(xs)))); },
      nb::arg("inputs"));
  m.def(
      "softmax_with_cross_entropy",
      [](nb::handle logits, nb::handle label, bool return_softmax) -> nb::object {
        auto [softmax, loss] = Unwrap(fn::SoftmaxWithCrossEntropy(ToValue(logits), ToValue(label)));
        if (!return_softmax) return FromValue(loss);
        return nb::make_tuple(FromValue(loss), FromValue(softmax));
      },
      nb::arg("logits"), nb::arg("label"), nb::arg("return_softmax") = false,
      "The loss; (loss, softmax) with return_softmax, as Paddle's.");
  m.def(
      "mse_loss",
      [](nb::handle input, nb::handle label) {
        return FromValue(Unwrap(nn::MseLoss(ToValue(input), ToValue(label))));
      },
      nb::arg("input"), nb::arg("label"), "mean((input - label)^2).");
  m.def("call", &CallOp, nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::dict(),
        nb::arg("device") = nb::none(), nb::arg("context") = nb::none(),
        "Runs (or appends) any registered op by name: `inputs` per schema slot (a Tensor or "
        "Variable, or a sequence for a variadic slot), `attrs` a dict of bool, int, float, "
        "str or int sequences. Returns every output, slots flattened in order.");
}

}  // namespace sluice::python
