// The Python functions the op table (framework/builder/op_api.toml) does not generate:
// `call`, which runs any registered op by name with attributes in either mode, and the
// functions with a Python convention of their own (softmax_with_cross_entropy's
// return_softmax, mse_loss, a composite). The table's ops are in functional_ops_bindings.cc.
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

}  // namespace

void BindFunctional(nb::module_& m) {
  BindFunctionalOps(m);
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
