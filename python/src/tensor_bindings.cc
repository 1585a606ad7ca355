// sluice._sluice.Context and Tensor: the eager front end (framework/eager), NumPy
// conversion, arithmetic operators, autograd (framework/autograd) and the scopes that set
// the stream and switch recording off.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/stream_id.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/eager/stream_scope.h"
#include "python/src/bindings.h"
#include "vm/sync_checker.h"

namespace sluice::python {
namespace {

eager::Context MakeContext(int sim_devices, bool cuda, uint64_t seed, uint64_t sim_seed,
                           int sim_jitter_us, const std::string& record_path, bool check_sync,
                           const std::string& default_device, const std::string& scheduling,
                           bool soft_sync) {
  eager::ContextOptions options;
  options.runtime.num_sim_devices = sim_devices;
  options.runtime.enable_cuda = cuda;
  options.runtime.sim.seed = sim_seed;
  options.runtime.sim.max_jitter_us = sim_jitter_us;
  options.vm.record_path = record_path;
  options.vm.check_sync = check_sync;
  if (scheduling == "caller") {
    options.vm.scheduling = vm::VmOptions::Scheduling::kCallerThread;
  } else if (scheduling != "dedicated") {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("scheduling '", scheduling, "': expected 'dedicated' or 'caller'")));
  }
  options.default_device = ParseDevice(default_device);
  options.seed = seed;
  options.soft_sync = soft_sync;
  eager::Context ctx = Unwrap(eager::Context::Create(std::move(options)));
  // The default device must exist: a bad one is an error now, not at the first op.
  Unwrap(ctx.runtime()->GetDevice(ctx.default_device()));
  return ctx;
}

// The tensor's bytes; the wait for its producers releases the GIL and can be interrupted
// (Ctrl-C raises KeyboardInterrupt at once; the work itself goes on).
std::vector<uint8_t> ReadBytes(const eager::Tensor& t) {
  AwaitValue(t);
  absl::StatusOr<std::vector<uint8_t>> bytes;
  {
    nb::gil_scoped_release release;
    bytes = t.ToBytes();  // its producers are done: a copy
  }
  return Unwrap(std::move(bytes));
}

// Context::Sync, interruptible as ReadBytes is.
void SyncInterruptibly(eager::Context& ctx) {
  auto done = std::make_shared<absl::Notification>();
  Check(ctx.WhenDone([done] { done->Notify(); }));
  if (!WaitInterruptibly(
          [&](absl::Duration slice) { return done->WaitForNotificationWithTimeout(slice); })) {
    RaisePendingSignal();
  }
  absl::Status status;
  {
    nb::gil_scoped_release release;
    status = ctx.Sync();  // everything is done: returns at once, with the first error
  }
  Check(status);
}

nb::object ToNumpy(const eager::Tensor& t) {
  if (!t.valid()) throw StatusError(absl::InvalidArgumentError("an empty tensor has no values"));
  return ArrayFromBytes(t.dtype(), t.shape(), ReadBytes(t));
}

bool IsNumber(nb::handle h) {
  return PyFloat_Check(h.ptr()) || (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()));
}

DataType DtypeOf(const framework::Value& v) {
  return v.is_static() ? v.var().dtype() : v.tensor().dtype();
}

bool IsFloat(DataType t) { return t == DataType::kF32 || t == DataType::kF64; }

// A constant of `like`'s dtype: a rank-0 tensor on its device, or a fill_constant appended
// to its program.
framework::Value ConstantLike(const framework::Value& like, double value) {
  if (like.is_static()) {
    // Into the variable's own program (its current block), not the guard's.
    const framework::Var& var = like.var();
    vm::AttrMap attrs;
    attrs.Set("shape", std::vector<int64_t>{});
    attrs.Set("value", value);
    attrs.Set("dtype", std::string(DataTypeName(var.dtype())));
    std::vector<std::vector<framework::Var>> out =
        Unwrap(framework::AppendOp(*var.program(), "fill_constant", {}, std::move(attrs)));
    return out.front().front();
  }
  const eager::Tensor& t = like.tensor();
  eager::Context ctx = t.context();
  return Unwrap(fn::FillConstant(ctx, Shape(std::vector<int64_t>{}), value, t.dtype(), t.device()));
}

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMatmul, kLt, kLe, kGt, kGe };

framework::Value Apply(BinaryOp op, const framework::Value& a, const framework::Value& b) {
  switch (op) {
    case BinaryOp::kAdd:
      return Unwrap(fn::Add(a, b));
    case BinaryOp::kSub:
      return Unwrap(fn::Sub(a, b));
    case BinaryOp::kMul:
      return Unwrap(fn::Mul(a, b));
    case BinaryOp::kDiv:
      return Unwrap(fn::Div(a, b));
    case BinaryOp::kMatmul:
      return Unwrap(fn::Matmul(a, b));
    case BinaryOp::kLt:
      return Unwrap(fn::LessThan(a, b));
    case BinaryOp::kLe:
      return Unwrap(fn::LessEqual(a, b));
    case BinaryOp::kGt:
      return Unwrap(fn::GreaterThan(a, b));
    case BinaryOp::kGe:
      return Unwrap(fn::GreaterEqual(a, b));
  }
  return a;
}

// `self op other` (reflected: `other op self`) for a Tensor or Variable `self` and another
// Tensor, Variable or Python number. Numbers combine with floating tensors through the
// scale op where that is exact (x + s, x - s, s - x, x * s, as Paddle does), otherwise
// through a rank-0 constant of self's dtype.
nb::object BinaryWithObject(BinaryOp op, nb::handle self, nb::handle other, bool reflected) {
  const framework::Value x = ToValue(self);
  if (IsNumber(other)) {
    const double s = nb::cast<double>(other);
    if (IsFloat(DtypeOf(x))) {
      switch (op) {
        case BinaryOp::kAdd:
          return FromValue(Unwrap(fn::Scale(x, 1.0, s)));
        case BinaryOp::kSub:
          return FromValue(Unwrap(reflected ? fn::Scale(x, -1.0, s) : fn::Scale(x, 1.0, -s)));
        case BinaryOp::kMul:
          return FromValue(Unwrap(fn::Scale(x, s, 0.0)));
        default:
          break;
      }
    }
    const framework::Value c = ConstantLike(x, s);
    return FromValue(reflected ? Apply(op, c, x) : Apply(op, x, c));
  }
  if (!nb::isinstance<eager::Tensor>(other) && !nb::isinstance<PyVariable>(other)) {
    return nb::borrow(Py_NotImplemented);
  }
  const framework::Value y = ToValue(other);
  return FromValue(reflected ? Apply(op, y, x) : Apply(op, x, y));
}

std::string Repr(const eager::Tensor& t) {
  if (!t.valid()) return "Tensor(<empty>)";
  nb::object values = ToNumpy(t);
  std::string text = nb::cast<std::string>(nb::repr(values));
  return absl::StrCat("Tensor(", text, ", device=", t.device().ToString(),
                      autograd::RequiresGrad(t) ? ", requires_grad=True" : "", ")");
}

// Context managers over RAII guards with thread-local state: each must end on the thread
// that entered it (__exit__ elsewhere is refused), and a handle destroyed while entered
// leaves its guard alive (leaked) rather than unwind a stack that may not be its own.
template <typename Guard>
struct ScopedGuard {
  ~ScopedGuard() {
    if (guard != nullptr) guard.release();  // NOLINT: deliberately leaked, see above
  }
  template <typename... Args>
  void Enter(const char* what, Args&&... args) {
    if (guard != nullptr) throw nb::value_error(absl::StrCat(what, " entered twice").c_str());
    guard = std::make_unique<Guard>(std::forward<Args>(args)...);
    entered_on = std::this_thread::get_id();
  }
  void Exit(const char* what) {
    if (guard == nullptr) {
      throw nb::value_error(absl::StrCat(what, " exited without being entered").c_str());
    }
    if (entered_on != std::this_thread::get_id()) {
      throw nb::value_error(
          absl::StrCat(what, " exited on another thread than the one that entered it").c_str());
    }
    guard.reset();
  }
  std::unique_ptr<Guard> guard;
  std::thread::id entered_on;
};
struct NoGradScope : ScopedGuard<autograd::NoGradGuard> {};
struct StreamScopeHandle : ScopedGuard<eager::StreamScope> {
  StreamKey key;
};

}  // namespace

absl::Status CheckSignals() {
  nb::gil_scoped_acquire acquire;
  if (PyErr_CheckSignals() != 0) return absl::CancelledError("interrupted by a signal");
  return absl::OkStatus();
}

void RaisePendingSignal() {
  if (PyErr_Occurred() != nullptr) throw nb::python_error();
}

bool WaitInterruptibly(absl::FunctionRef<bool(absl::Duration)> wait_for) {
  nb::gil_scoped_release release;
  while (!wait_for(absl::Milliseconds(20))) {
    if (!CheckSignals().ok()) return false;
  }
  return true;
}

void AwaitValue(const framework::Value& value) {
  if (value.is_static() || !value.tensor().valid()) return;
  absl::Status ready;
  {
    nb::gil_scoped_release release;
    ready = value.tensor().WaitUntilReady(&CheckSignals);
  }
  RaisePendingSignal();
  Check(ready);
}

nb::object GenericBinary(const std::string& op, nb::handle a, nb::handle b, bool reflected) {
  static const std::pair<const char*, BinaryOp> kOps[] = {
      {"add", BinaryOp::kAdd}, {"sub", BinaryOp::kSub},       {"mul", BinaryOp::kMul},
      {"div", BinaryOp::kDiv}, {"matmul", BinaryOp::kMatmul}, {"lt", BinaryOp::kLt},
      {"le", BinaryOp::kLe},   {"gt", BinaryOp::kGt},         {"ge", BinaryOp::kGe}};
  for (const auto& [name, value] : kOps) {
    if (op == name) return BinaryWithObject(value, a, b, reflected);
  }
  throw nb::value_error(absl::StrCat("unknown operator '", op, "'").c_str());
}

namespace {

// Context: construction, the default device, sync and statistics.
void BindContext(nb::module_& m) {
  nb::class_<eager::Context>(m, "Context",
                             "An eager context: the devices (a Runtime), a VM and the op "
                             "registry. Tensors keep their context alive.")
      .def(
          "__init__",
          [](eager::Context* self, int sim_devices, bool cuda, uint64_t seed, uint64_t sim_seed,
             int sim_jitter_us, const std::string& record_path, bool check_sync,
             const std::string& default_device, const std::string& scheduling, bool soft_sync) {
            new (self) eager::Context(MakeContext(sim_devices, cuda, seed, sim_seed, sim_jitter_us,
                                                  record_path, check_sync, default_device,
                                                  scheduling, soft_sync));
          },
          nb::kw_only(), nb::arg("sim_devices") = 2, nb::arg("cuda") = true,
          nb::arg("seed") = 0x5eed, nb::arg("sim_seed") = 0, nb::arg("sim_jitter_us") = 0,
          nb::arg("record_path") = "", nb::arg("check_sync") = false,
          nb::arg("default_device") = "cpu", nb::arg("scheduling") = "dedicated",
          nb::arg("soft_sync") = true)
      .def("sync", &SyncInterruptibly,
           "Waits for everything submitted so far; raises the first kernel error since the last "
           "sync.")
      .def_prop_rw(
          "default_device",
          [](const eager::Context& ctx) { return ctx.default_device().ToString(); },
          [](eager::Context& ctx, const std::string& device) {
            const Device d = ParseDevice(device);
            Unwrap(ctx.runtime()->GetDevice(d));
            ctx.set_default_device(d);
          })
      .def_prop_ro("devices",
                   [](const eager::Context& ctx) {
                     std::vector<std::string> names;
                     for (ep::Device* d : ctx.runtime()->devices()) {
                       names.push_back(d->id().ToString());
                     }
                     return names;
                   })
      .def_prop_ro("live_tensors", &eager::Context::LiveTensors)
      .def("sync_violations",
           [](const eager::Context& ctx) -> int64_t {
             const vm::SyncChecker* checker = ctx.vm()->sync_checker();
             return checker == nullptr ? 0 : checker->violation_count();
           })
      .def("stats", [](const eager::Context& ctx) { return ctx.vm()->stats().ToString(); });
}

// Tensor's autograd members: requires_grad, grad, backward, ...
void BindTensorAutograd(nb::class_<eager::Tensor>& tensor) {
  tensor
      .def_prop_rw(
          "requires_grad", [](const eager::Tensor& t) { return autograd::RequiresGrad(t); },
          [](eager::Tensor& t, bool value) { Check(autograd::SetRequiresGrad(t, value)); })
      .def_prop_rw(
          "stop_gradient", [](const eager::Tensor& t) { return !autograd::RequiresGrad(t); },
          [](eager::Tensor& t, bool value) { Check(autograd::SetRequiresGrad(t, !value)); })
      .def_prop_ro("is_leaf", [](const eager::Tensor& t) { return autograd::IsLeaf(t); })
      .def_prop_ro("grad",
                   [](const eager::Tensor& t) -> std::optional<eager::Tensor> {
                     eager::Tensor g = autograd::GradOf(t);
                     if (!g.valid()) return std::nullopt;
                     return g;
                   })
      .def(
          "backward",
          [](const eager::Tensor& t, std::optional<eager::Tensor> grad, bool retain_graph) {
            autograd::BackwardOptions options;
            options.retain_graph = retain_graph;
            Check(autograd::Backward(t, grad.value_or(eager::Tensor()), options));
          },
          nb::arg("grad") = nb::none(), nb::arg("retain_graph") = false,
          "Accumulates this tensor's gradient into the leaves' .grad (grad ops run "
          "asynchronously).")
      .def("clear_grad", [](const eager::Tensor& t) { autograd::ZeroGrad(t); })
      .def("retain_grad", [](const eager::Tensor& t) { Check(autograd::RetainGrad(t)); })
      .def("detach", [](const eager::Tensor& t) { return autograd::Detach(t); });
}

// Tensor's arithmetic operators (Tensor op Tensor; numbers and Variables go through the
// generic operators).
void BindTensorOperators(nb::class_<eager::Tensor>& tensor) {
  tensor
      // Operators: Tensor op Tensor first (the hot path), then numbers and Variables.
      .def("__add__",
           [](const eager::Tensor& a, const eager::Tensor& b) { return Unwrap(fn::Add(a, b)); })
      .def("__sub__",
           [](const eager::Tensor& a, const eager::Tensor& b) { return Unwrap(fn::Sub(a, b)); })
      .def("__mul__",
           [](const eager::Tensor& a, const eager::Tensor& b) { return Unwrap(fn::Mul(a, b)); })
      .def("__truediv__",
           [](const eager::Tensor& a, const eager::Tensor& b) { return Unwrap(fn::Div(a, b)); })
      .def("__matmul__",
           [](const eager::Tensor& a, const eager::Tensor& b) { return Unwrap(fn::Matmul(a, b)); })
      .def("__neg__", [](const eager::Tensor& a) { return Unwrap(fn::Scale(a, -1.0)); });
}

// no_grad and stream scopes.
void BindScopes(nb::module_& m) {
  nb::class_<NoGradScope>(m, "_NoGrad")
      .def(nb::init<>())
      .def("__enter__", [](NoGradScope& s) { s.Enter("no_grad"); })
      .def("__exit__", [](NoGradScope& s, nb::args) { s.Exit("no_grad"); });
  nb::class_<StreamScopeHandle>(m, "_StreamScope")
      .def("__init__",
           [](StreamScopeHandle* self, const std::string& key) {
             const StreamKey parsed = Unwrap(StreamKey::Parse(key));
             new (self) StreamScopeHandle();
             self->key = parsed;
           })
      .def("__enter__", [](StreamScopeHandle& s) { s.Enter("stream", s.key); })
      .def("__exit__", [](StreamScopeHandle& s, nb::args) { s.Exit("stream"); })
      .def_prop_ro("key", [](const StreamScopeHandle& s) { return s.key.ToString(); });
}

// Source ops from Python (fill_constant, uniform and gaussian random), eager or static.
void BindSourceOps(nb::module_& m) {
  m.def(
      "_fill",
      [](std::optional<eager::Context> ctx, const std::vector<int64_t>& shape, double value,
         const std::string& dtype, std::optional<std::string> device) -> nb::object {
        if (!ctx)
          return FromValue(Unwrap(fn::FillConstant(ToShape(shape), value, ParseDtype(dtype))));
        std::optional<Device> d;
        if (device) d = ParseDevice(*device);
        return nb::cast(
            Unwrap(fn::FillConstant(*ctx, ToShape(shape), value, ParseDtype(dtype), d)));
      },
      nb::arg("context").none(), nb::arg("shape"), nb::arg("value"), nb::arg("dtype"),
      nb::arg("device") = nb::none(),
      "fill_constant: eager in `context`, or appended to the current program when None.");
  m.def(
      "_random",
      [](std::optional<eager::Context> ctx, const std::string& kind,
         const std::vector<int64_t>& shape, double a, double b, std::optional<int64_t> seed,
         const std::string& dtype, std::optional<std::string> device) -> nb::object {
        const DataType dt = ParseDtype(dtype);
        if (!ctx) {
          if (kind != "uniform") {
            throw StatusError(absl::UnimplementedError("static gaussian_random from Python"));
          }
          return FromValue(Unwrap(fn::UniformRandom(ToShape(shape), a, b, seed, dt)));
        }
        std::optional<Device> d;
        if (device) d = ParseDevice(*device);
        if (kind == "uniform") {
          return nb::cast(Unwrap(fn::UniformRandom(*ctx, ToShape(shape), a, b, seed, dt, d)));
        }
        return nb::cast(Unwrap(fn::GaussianRandom(*ctx, ToShape(shape), a, b, seed, dt, d)));
      },
      nb::arg("context").none(), nb::arg("kind"), nb::arg("shape"), nb::arg("a"), nb::arg("b"),
      nb::arg("seed").none(), nb::arg("dtype"), nb::arg("device") = nb::none());
}

}  // namespace

void BindTensors(nb::module_& m) {
  BindContext(m);
  nb::class_<eager::Tensor> tensor(m, "Tensor",
                                   "An eager tensor: ops on it return at once and run in the VM; "
                                   "reading it waits only for what produced it.");
  tensor
      .def_static(
          "_from_array",
          [](eager::Context& ctx, nb::handle array, std::optional<std::string> device) {
            framework::HostTensor host = HostTensorFromArray(array, "sluice.tensor");
            const Device d = device ? ParseDevice(*device) : ctx.default_device();
            absl::StatusOr<eager::Tensor> t;
            {
              nb::gil_scoped_release release;
              t = ctx.FromBytes(host.dtype, host.shape, host.bytes, d);
            }
            return Unwrap(std::move(t));
          },
          nb::arg("context"), nb::arg("array"), nb::arg("device") = nb::none())
      .def_prop_ro("shape",
                   [](const eager::Tensor& t) {
                     std::vector<int64_t> dims = FromShape(t.shape());
                     nb::list out;
                     for (int64_t d : dims) out.append(d);
                     return nb::tuple(out);
                   })
      .def_prop_ro("dtype",
                   [](const eager::Tensor& t) { return std::string(DataTypeName(t.dtype())); })
      .def_prop_ro("device", [](const eager::Tensor& t) { return t.device().ToString(); })
      .def_prop_ro("ndim", [](const eager::Tensor& t) { return t.shape().rank(); })
      .def_prop_ro("size", &eager::Tensor::num_elements)
      .def_prop_ro("context", &eager::Tensor::context)
      .def("numpy", &ToNumpy, "A NumPy copy of the values (waits for their producers).")
      .def(
          "__array__",
          [](const eager::Tensor& t, nb::handle dtype, nb::handle copy) {
            nb::object array = ToNumpy(t);
            if (!dtype.is_none()) array = array.attr("astype")(dtype);
            return array;
          },
          nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
      .def(
          "__dlpack__",
          [](const eager::Tensor& t, nb::kwargs kwargs) {
            // A host copy: DLPack consumers get CPU memory they own.
            return ToNumpy(t).attr("__dlpack__")();
          },
          nb::arg("kwargs"))
      .def("__dlpack_device__", [](const eager::Tensor&) { return nb::make_tuple(1, 0); })
      .def("item",
           [](const eager::Tensor& t) {
             if (t.num_elements() != 1) {
               throw StatusError(absl::InvalidArgumentError(
                   absl::StrCat("item(): the tensor has ", t.num_elements(), " elements, not 1")));
             }
             return ToNumpy(t).attr("item")();
           })
      .def("__len__",
           [](const eager::Tensor& t) {
             if (t.shape().rank() == 0) throw nb::type_error("len() of a rank-0 tensor");
             return t.shape().dims()[0];
           })
      .def("__repr__", &Repr)
      .def(
          "to",
          [](const eager::Tensor& t, const std::string& device) {
            return Unwrap(t.To(ParseDevice(device)));
          },
          nb::arg("device"), "A copy on `device` (asynchronous).")
      .def("astype", [](const eager::Tensor& t, const std::string& dtype) {
        return Unwrap(fn::Cast(t, ParseDtype(dtype)));
      });
  BindTensorAutograd(tensor);
  BindTensorOperators(tensor);

  // The generic operators, shared by Tensor and Variable (static_bindings.cc adds them
  // there).
  m.def("_binary", &GenericBinary, nb::arg("op"), nb::arg("x"), nb::arg("y"),
        nb::arg("reflected") = false);
  DefineGenericOperators(tensor);

  BindScopes(m);
  BindSourceOps(m);
}

}  // namespace sluice::python
