// What the Python extension's translation units share: the exception that carries an
// absl::Status into Python, the owners that keep a Program alive while Python holds its
// variables, conversions between Python objects and the front end's Values, and the
// Bind* entry points module.cc calls. The extension is thin: every feature it offers is a
// C++ API of the layers below (docs/design.md, "The Python package").
//
// Threading: every function here runs with the GIL held unless it says otherwise; waits
// on the VM release it.
#ifndef SLUICE_PYTHON_SRC_BINDINGS_H_
#define SLUICE_PYTHON_SRC_BINDINGS_H_

#include <nanobind/nanobind.h>

#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/interpreter/host_tensor.h"
#include "vm/attrs.h"

namespace sluice::python {

namespace nb = nanobind;

// An error status on its way to Python: the translator (errors.cc) raises the
// sluice.Error subclass registered for its code, carrying the message and the code.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status) : status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return "sluice status error"; }

 private:
  absl::Status status_;
};

inline void Check(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}
template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  if (!value.ok()) throw StatusError(value.status());
  return *std::move(value);
}

// Keeps the first exception (a Python one, or any other) that a Python callable raised
// inside a C++ builder callback (a cond branch, a loop body, a graph's build), so that the
// builder is told the callback failed — and undoes what it appended — and the original
// exception is raised again once the builder has returned. A StatusError becomes its
// status. Used with the GIL held.
class CallbackErrors {
 public:
  template <typename F>
  auto Run(F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const StatusError& e) {
      return e.status();
    } catch (...) {
      if (!error_) error_ = std::current_exception();
      return absl::CancelledError("a Python callback raised");
    }
  }
  void RaiseIfAny() {
    if (error_) {
      std::exception_ptr error = std::exchange(error_, nullptr);
      std::rethrow_exception(error);
    }
  }

 private:
  std::exception_ptr error_;
};

// Called during a wait with the GIL released: takes the GIL and runs Python's signal
// handlers. An exception a handler raises (KeyboardInterrupt) stays pending in the thread
// state and makes this return Cancelled, which ends the wait.
absl::Status CheckSignals();
// Raises the exception a signal handler left pending, if any (GIL held).
void RaisePendingSignal();
// Waits with the GIL released until `wait_for(slice)` says the awaited thing is done,
// running Python's signal handlers (CheckSignals) between 20 ms slices. False when a
// handler raised: its exception is pending (RaisePendingSignal raises it). GIL held on
// entry and return.
bool WaitInterruptibly(absl::FunctionRef<bool(absl::Duration)> wait_for);
// Waits, GIL released and interruptibly, until an eager Value's producers are done (a
// static Value: returns at once). Raises KeyboardInterrupt or the producer's error.
void AwaitValue(const framework::Value& value);

// A Program built from Python, and the context whose op registry checks it. Held by
// shared_ptr: every Variable, static layer and guard of the program holds it too, since
// framework::Var refers to its Program by address.
struct PyProgram {
  explicit PyProgram(eager::Context ctx);
  ~PyProgram();
  PyProgram(const PyProgram&) = delete;
  PyProgram& operator=(const PyProgram&) = delete;
  eager::Context context;
  std::unique_ptr<framework::Program> program;
};

// A static variable and the owner that keeps its program alive (null for a variable of a
// program the extension does not own: a Graph's trace, valid during the trace only).
struct PyVariable {
  framework::Var var;
  std::shared_ptr<PyProgram> owner;
  // For a variable of a graph trace (no owner): true while the trace runs.
  std::shared_ptr<const bool> trace_alive;
  bool usable() const { return owner != nullptr || (trace_alive != nullptr && *trace_alive); }
};

// The PyProgram that owns `program`, or null. RegisterOwner makes the link once the
// PyProgram is held by shared_ptr; ForgetOwner drops it when the PyProgram dies.
std::shared_ptr<PyProgram> OwnerOf(const framework::Program* program);
void RegisterOwner(const std::shared_ptr<PyProgram>& owner);
void ForgetOwner(const framework::Program* program);

// A Tensor or a Variable as a Value. Inside a Graph's trace an eager tensor becomes the
// trace's parameter bound to it (graph::Trace::Param). TypeError for anything else.
framework::Value ToValue(nb::handle object);
// An operand of an in-place function (`op`, e.g. "add_"; `name`, the operand): an eager
// Tensor outside a Graph's trace. TypeError naming both for a static Variable, anything else,
// or a call inside a trace (in-place updates are eager only: use the out-of-place function).
eager::Tensor EagerOperand(nb::handle object, const char* op, const char* name);
// Each item of a sequence of Tensors or Variables, as ToValue.
std::vector<framework::Value> ToValues(nb::handle sequence);
// A reduction's axes: None (all), an int, or a sequence of ints.
std::vector<int64_t> Axes(nb::handle axis);
nb::object FromValue(framework::Value value);

// Python attributes (bool, int, float, str, sequences of ints) as an AttrMap. TypeError
// naming the attribute for another type.
vm::AttrMap ToAttrs(const nb::dict& attrs);

DataType ParseDtype(const std::string& name);
Device ParseDevice(const std::string& name);
Shape ToShape(const std::vector<int64_t>& dims);
std::vector<int64_t> FromShape(const Shape& shape);

// A NumPy-compatible host array (any object with the buffer protocol or DLPack, made
// C-contiguous) as a HostTensor; InvalidArgument naming the dtype for one Sluice has not.
framework::HostTensor HostTensorFromArray(nb::handle array, const std::string& what);
// A NumPy array that takes over `bytes` (no copy).
nb::object ArrayFromBytes(DataType dtype, const Shape& shape, std::vector<uint8_t> bytes);

}  // namespace sluice::python

namespace sluice::framework::graph {
class Trace;
}  // namespace sluice::framework::graph

namespace sluice::python {

// `a op b` for Tensors, Variables and Python numbers ("add", "sub", "mul", "div",
// "matmul", "lt", "le", "gt", "ge"); reflected: `b op a`. NotImplemented for other types.
nb::object GenericBinary(const std::string& op, nb::handle a, nb::handle b, bool reflected);
// Adds the arithmetic and comparison operators over GenericBinary to class `cls`, as
// overloads after any it already has (nanobind tries overloads in order).
template <typename Class>
void DefineGenericOperators(Class& cls) {
#define SLUICE_PY_OPERATOR(method, op, reflected)         \
  cls.def(method, [](nb::handle self, nb::handle other) { \
    return GenericBinary(op, self, other, reflected);     \
  })
  SLUICE_PY_OPERATOR("__add__", "add", false);
  SLUICE_PY_OPERATOR("__radd__", "add", true);
  SLUICE_PY_OPERATOR("__sub__", "sub", false);
  SLUICE_PY_OPERATOR("__rsub__", "sub", true);
  SLUICE_PY_OPERATOR("__mul__", "mul", false);
  SLUICE_PY_OPERATOR("__rmul__", "mul", true);
  SLUICE_PY_OPERATOR("__truediv__", "div", false);
  SLUICE_PY_OPERATOR("__rtruediv__", "div", true);
  SLUICE_PY_OPERATOR("__matmul__", "matmul", false);
  SLUICE_PY_OPERATOR("__rmatmul__", "matmul", true);
  SLUICE_PY_OPERATOR("__lt__", "lt", false);
  SLUICE_PY_OPERATOR("__le__", "le", false);
  SLUICE_PY_OPERATOR("__gt__", "gt", false);
  SLUICE_PY_OPERATOR("__ge__", "ge", false);
#undef SLUICE_PY_OPERATOR
  cls.def("__neg__",
          [](nb::handle self) { return GenericBinary("mul", self, nb::float_(-1.0), false); });
}

// The graph trace running on this thread (graph_bindings.cc), or null.
framework::graph::Trace* CurrentTrace();
// The token of the running graph trace `program` belongs to (true while the trace runs),
// or null for a program of no running trace (GIL held).
std::shared_ptr<const bool> TraceToken(const framework::Program* program);
// A Variable's program still exists: its owner holds it, or it belongs to a running
// trace. FailedPrecondition naming the variable otherwise (a Variable kept from a trace
// that has ended).
void CheckUsable(const PyVariable& variable);

void BindErrors(nb::module_& m);
void BindTensors(nb::module_& m);
void BindFunctional(nb::module_& m);
// The op table's functions (generated: functional_ops_bindings.cc); BindFunctional calls it.
void BindFunctionalOps(nb::module_& m);
void BindStatic(nb::module_& m);
void BindExecutor(nb::module_& m);
void BindGraph(nb::module_& m);
void BindVmTools(nb::module_& m);
void BindTraining(nb::module_& m);
// ONNX import (framework/onnx): sluice.onnx's C++ half.
void BindOnnx(nb::module_& m);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_BINDINGS_H_
