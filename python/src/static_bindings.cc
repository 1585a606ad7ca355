// sluice._sluice.Program, Variable, program guards and the static builder (framework/
// builder, framework/optim): what sluice.static is made of.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/layers.h"
#include "framework/ir/program_desc.h"
#include "framework/optim/optimizer.h"
#include "python/src/bindings.h"

namespace sluice::python {
namespace {

std::shared_ptr<PyProgram> NewProgram(eager::Context ctx) {
  auto program = std::make_shared<PyProgram>(std::move(ctx));
  RegisterOwner(program);
  return program;
}

// A guard that makes (main, startup) current between __enter__ and __exit__, on the
// thread that entered.
// The guard's stack is the entering thread's: __exit__ on another thread is refused, and a
// handle destroyed while entered (never exited) leaves its guard and programs alive rather
// than pop a stack that may not be its own.
struct GuardHandle {
  GuardHandle(std::shared_ptr<PyProgram> m, std::shared_ptr<PyProgram> s)
      : main(std::move(m)), startup(std::move(s)) {}
  ~GuardHandle() {
    if (guard != nullptr) {
      guard.release();  // NOLINT: deliberately leaked, see above
      new std::shared_ptr<PyProgram>(main);
      new std::shared_ptr<PyProgram>(startup);
    }
  }
  std::shared_ptr<PyProgram> main, startup;
  std::unique_ptr<framework::ProgramGuard> guard;
  std::thread::id entered_on;
};

struct StaticLinear {
  nn::Linear layer;
  std::shared_ptr<PyProgram> owner;
};

// The values a Python callable returned: one Tensor/Variable, or a sequence of them.
std::vector<framework::Value> ReturnedValues(nb::handle result, bool* single) {
  *single = nb::isinstance<eager::Tensor>(result) || nb::isinstance<PyVariable>(result);
  if (*single) return {ToValue(result)};
  std::vector<framework::Value> values;
  for (nb::handle item : result) values.push_back(ToValue(item));
  return values;
}

std::vector<nb::object> ToObjects(const std::vector<framework::Value>& values) {
  std::vector<nb::object> objects;
  for (const framework::Value& v : values) objects.push_back(FromValue(v));
  return objects;
}

nb::list ToList(const std::vector<framework::Value>& values) {
  nb::list out;
  for (const framework::Value& v : values) out.append(FromValue(v));
  return out;
}

nb::object Cond(nb::handle pred, nb::callable true_fn, nb::callable false_fn) {
  CallbackErrors errors;
  bool single = false;
  auto branch = [&](nb::callable& fn) -> fn::BranchFn {
    return [&errors, &single, fn]() -> absl::StatusOr<std::vector<framework::Value>> {
      return errors.Run([&]() -> absl::StatusOr<std::vector<framework::Value>> {
        nb::object result = fn();
        if (result.is_none()) return std::vector<framework::Value>{};
        return ReturnedValues(result, &single);
      });
    };
  };
  const framework::Value p = ToValue(pred);
  AwaitValue(p);  // an eager predicate is read: wait for it with the GIL released
  absl::StatusOr<std::vector<framework::Value>> out =
      fn::Cond(p, branch(true_fn), branch(false_fn));
  errors.RaiseIfAny();
  std::vector<framework::Value> values = Unwrap(std::move(out));
  if (values.empty()) return nb::none();
  if (single && values.size() == 1) return FromValue(values.front());
  return ToList(values);
}

nb::list WhileLoop(nb::callable cond, nb::callable body, nb::handle loop_vars,
                   std::optional<int64_t> max_iterations, int64_t parallel_iterations) {
  CallbackErrors errors;
  bool single = false;
  std::vector<framework::Value> init = ReturnedValues(loop_vars, &single);
  fn::LoopCondFn c =
      [&](const std::vector<framework::Value>& vars) -> absl::StatusOr<framework::Value> {
    return errors.Run([&]() -> absl::StatusOr<framework::Value> {
      std::vector<nb::object> args = ToObjects(vars);
      nb::object result = cond(*nb::tuple(nb::cast(args)));
      framework::Value value = ToValue(result);
      AwaitValue(value);  // the loop reads an eager predicate: wait with the GIL released
      return value;
    });
  };
  fn::LoopBodyFn b = [&](const std::vector<framework::Value>& vars)
      -> absl::StatusOr<std::vector<framework::Value>> {
    return errors.Run([&]() -> absl::StatusOr<std::vector<framework::Value>> {
      std::vector<nb::object> args = ToObjects(vars);
      nb::object result = body(*nb::tuple(nb::cast(args)));
      bool one = false;
      return ReturnedValues(result, &one);
    });
  };
  fn::WhileOptions options;
  options.max_iterations = max_iterations;
  options.parallel_iterations = parallel_iterations;
  absl::StatusOr<std::vector<framework::Value>> out = fn::WhileLoop(c, b, init, options);
  errors.RaiseIfAny();
  return ToList(Unwrap(std::move(out)));
}

framework::Var VarOf(nb::handle loss, const char* what) {
  framework::Value v = ToValue(loss);
  if (!v.is_static()) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": expected a static Variable (build inside program_guard), got an "
                     "eager Tensor")));
  }
  return v.var();
}

nb::list Minimize(framework::Optimizer& optimizer, nb::handle loss,
                  const std::vector<std::string>& no_grad_set) {
  absl::flat_hash_set<std::string> skip(no_grad_set.begin(), no_grad_set.end());
  std::vector<std::pair<framework::Var, framework::Var>> pairs =
      Unwrap(optimizer.Minimize(VarOf(loss, "minimize"), skip));
  nb::list out;
  for (const auto& [param, grad] : pairs) {
    out.append(nb::make_tuple(FromValue(param), FromValue(grad)));
  }
  return out;
}

// Program: construction, loading, text and inspection.
void BindProgram(nb::module_& m) {
  nb::class_<PyProgram>(m, "Program", "A static program (ir::ProgramDesc) under construction.")
      .def(nb::new_([](std::optional<eager::Context> ctx) {
             if (!ctx) {
               ctx = nb::cast<eager::Context>(
                   nb::module_::import_("sluice").attr("current_context")());
             }
             return NewProgram(*std::move(ctx));
           }),
           nb::arg("context") = nb::none())
      .def_prop_ro("num_blocks", [](const PyProgram& p) { return p.program->desc().num_blocks(); })
      .def(
          "to_text", [](const PyProgram& p) { return p.program->desc().ToText(); },
          "The program in the text format of docs/program-format.md.")
      .def(
          "save",
          [](const PyProgram& p, const std::string& path) { Check(p.program->desc().Save(path)); },
          nb::arg("path"), "Writes to_text() to `path` (what `sluice run` reads).")
      .def("content_hash", [](const PyProgram& p) { return p.program->desc().Hash(); })
      .def("var_names",
           [](const PyProgram& p) {
             std::vector<std::string> names;
             for (const framework::ir::VarDesc& v : p.program->desc().global_block().vars()) {
               names.push_back(v.name);
             }
             return names;
           })
      .def("op_types",
           [](const PyProgram& p) {
             std::vector<std::string> types;
             for (const framework::ir::OpDesc& op : p.program->desc().global_block().ops()) {
               types.push_back(op.type);
             }
             return types;
           })
      .def("var",
           [](const std::shared_ptr<PyProgram>& p, const std::string& name) {
             if (!p->program->HasVarAnywhere(name)) {
               throw StatusError(
                   absl::NotFoundError(absl::StrCat("the program has no variable '", name, "'")));
             }
             return PyVariable{framework::Var(p->program.get(), name), p, nullptr};
           })
      .def("__str__", [](const PyProgram& p) { return p.program->desc().ToText(); });
  m.def("_new_program", &NewProgram, nb::arg("context"));
  m.def(
      "_load_program",
      [](eager::Context ctx, const std::string& path) {
        std::shared_ptr<PyProgram> program = NewProgram(std::move(ctx));
        program->program->mutable_desc() = Unwrap(framework::ir::ProgramDesc::Load(path));
        return program;
      },
      nb::arg("context"), nb::arg("path"));
}

// Variable: a program's variable, with the generic operators.
void BindVariable(nb::module_& m) {
  nb::class_<PyVariable> variable(m, "Variable", "A variable of a static program.");
  DefineGenericOperators(variable);
  variable.def_prop_ro("name", [](const PyVariable& v) { return v.var.name(); })
      .def_prop_ro("shape",
                   [](const PyVariable& v) {
                     CheckUsable(v);
                     nb::list out;
                     for (int64_t d : FromShape(v.var.shape())) out.append(d);
                     return nb::tuple(out);
                   })
      .def_prop_ro("dtype",
                   [](const PyVariable& v) {
                     CheckUsable(v);
                     return std::string(DataTypeName(v.var.dtype()));
                   })
      .def_prop_ro("persistable",
                   [](const PyVariable& v) {
                     CheckUsable(v);
                     return v.var.desc().persistable;
                   })
      .def_prop_rw(
          "stop_gradient",
          [](const PyVariable& v) {
            CheckUsable(v);
            return v.var.stop_gradient();
          },
          [](PyVariable& v, bool stop) {
            CheckUsable(v);
            v.var.set_stop_gradient(stop);
          })
      .def_prop_ro("program", [](const PyVariable& v) { return v.owner; })
      .def("__repr__", [](const PyVariable& v) {
        if (!v.usable()) {
          return absl::StrCat("Variable(name='", v.var.name(), "', of an ended graph trace)");
        }
        return absl::StrCat("Variable(name='", v.var.name(), "', shape=", v.var.shape().ToString(),
                            ", dtype=", DataTypeName(v.var.dtype()), ")");
      });
}

// program_guard and data().
void BindProgramGuard(nb::module_& m) {
  nb::class_<GuardHandle>(m, "_ProgramGuard")
      .def(nb::init<std::shared_ptr<PyProgram>, std::shared_ptr<PyProgram>>())
      .def("__enter__",
           [](GuardHandle& g) {
             if (g.guard) throw nb::value_error("program_guard entered twice");
             g.guard =
                 std::make_unique<framework::ProgramGuard>(*g.main->program, *g.startup->program);
             g.entered_on = std::this_thread::get_id();
           })
      .def("__exit__", [](GuardHandle& g, nb::args) {
        if (!g.guard) throw nb::value_error("program_guard exited without being entered");
        if (g.entered_on != std::this_thread::get_id()) {
          throw nb::value_error(
              "program_guard exited on another thread than the one that entered it");
        }
        g.guard.reset();
      });
  m.def(
      "_in_program_guard", [] { return framework::CurrentMainProgram() != nullptr; },
      "Whether a program guard is current on this thread.");
  m.def(
      "data",
      [](const std::string& name, std::vector<int64_t> shape, const std::string& dtype) {
        return FromValue(Unwrap(framework::Data(name, ToShape(shape), ParseDtype(dtype))));
      },
      nb::arg("name"), nb::arg("shape"), nb::arg("dtype") = "float32",
      "A feed variable of the current main program.");
}

// The static Linear layer and optimizers.
void BindStaticTraining(nb::module_& m) {
  nb::class_<StaticLinear>(m, "_StaticLinear")
      .def("__init__",
           [](StaticLinear* self, int64_t in_features, int64_t out_features,
              std::optional<int64_t> seed, const std::string& dtype, const std::string& name) {
             nn::LinearOptions options;
             options.seed = seed;
             options.dtype = ParseDtype(dtype);
             options.name = name;
             nn::Linear layer = Unwrap(nn::Linear::Create(in_features, out_features, options));
             new (self) StaticLinear{std::move(layer), OwnerOf(framework::CurrentMainProgram())};
           })
      .def_prop_ro("weight", [](const StaticLinear& l) { return FromValue(l.layer.weight()); })
      .def_prop_ro("bias", [](const StaticLinear& l) { return FromValue(l.layer.bias()); })
      .def("__call__", [](const StaticLinear& l, nb::handle x) {
        return FromValue(Unwrap(l.layer(VarOf(x, "Linear"))));
      });

  nb::class_<framework::Optimizer>(m, "_StaticOptimizer")
      .def("minimize", &Minimize, nb::arg("loss"),
           nb::arg("no_grad_set") = std::vector<std::string>{},
           "Appends backward and the update ops to the loss's program (and the optimizer's "
           "state to the startup program); returns the (parameter, gradient) pairs.");
  nb::class_<framework::Sgd, framework::Optimizer>(m, "_StaticSgd")
      .def(nb::init<double>(), nb::arg("learning_rate"));
  nb::class_<framework::Adam, framework::Optimizer>(m, "_StaticAdam")
      .def(nb::init<double, double, double, double>(), nb::arg("learning_rate"), nb::arg("beta1"),
           nb::arg("beta2"), nb::arg("epsilon"));
}

}  // namespace

void BindStatic(nb::module_& m) {
  BindProgram(m);
  BindVariable(m);
  BindProgramGuard(m);
  BindStaticTraining(m);

  m.def("cond", &Cond, nb::arg("pred"), nb::arg("true_fn"), nb::arg("false_fn"),
        "Runs (eager) or builds (static) the branch `pred` selects; returns its values.");
  m.def("while_loop", &WhileLoop, nb::arg("cond"), nb::arg("body"), nb::arg("loop_vars"),
        nb::arg("max_iterations") = nb::none(), nb::arg("parallel_iterations") = 1,
        "while cond(*vars): vars = body(*vars); returns the final values.");
}

}  // namespace sluice::python
