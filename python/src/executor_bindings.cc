// sluice._sluice.Executor and Scope: framework::Executor runs with host or device-resident
// feeds and fetches, interruptible waits (Ctrl-C cancels the run), scope variables read
// and written by name, and persistables saved and loaded.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/io/persistables.h"
#include "framework/io/scope_variables.h"
#include "python/src/bindings.h"

namespace sluice::python {
namespace {

// Persistable variables live here between runs. Destroyed before the context it keeps
// alive (member order), so no blob outlives its VM. The executors that read and write
// single variables are made per device on first use.
//
// framework::Scope takes one caller at a time, and Python threads share a scope (the
// global one) while the GIL is released: every use of `scope` and `io_executors` holds
// `mu`, always taken with the GIL released (a thread holding `mu` never waits for the GIL).
struct PyScope {
  explicit PyScope(eager::Context ctx) : context(std::move(ctx)) {}
  framework::Executor& IoExecutor(Device device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_ptr<framework::Executor>& exe = io_executors[device.ToString()];
    if (exe == nullptr) {
      framework::ExecutorOptions options;
      options.interpreter.device = device;
      exe = std::make_unique<framework::Executor>(&context.registry(), context.vm(), options);
    }
    return *exe;
  }
  eager::Context context;
  absl::Mutex mu;
  framework::Scope scope ABSL_GUARDED_BY(mu);
  std::map<std::string, std::unique_ptr<framework::Executor>> io_executors ABSL_GUARDED_BY(mu);
};

// Runs `f` on the scope's variables with the GIL released and the scope's lock held.
template <typename F>
auto WithScope(PyScope& s, F&& f) {
  nb::gil_scoped_release release;
  absl::MutexLock lock(&s.mu);
  return f(s.scope);
}

struct PyExecutor {
  PyExecutor(eager::Context ctx, framework::ExecutorOptions options)
      : context(std::move(ctx)),
        executor(std::make_unique<framework::Executor>(&context.registry(), context.vm(),
                                                       std::move(options))) {}
  eager::Context context;
  Device device;
  std::unique_ptr<framework::Executor> executor;
};

void CheckSameVm(const eager::Context& a, const eager::Context& b, const char* what) {
  if (a.vm() != b.vm()) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat(what, " belongs to another sluice.Context than the executor")));
  }
}

// Waits for `handle` with the GIL released, waking every 20 ms to let Python handle
// signals: a KeyboardInterrupt (or any exception a signal handler raises) cancels the run,
// waits for it to stop, and propagates. The scope keeps what finished ops wrote.
const absl::StatusOr<framework::RunResult>& WaitForRun(framework::RunHandle& handle) {
  if (!WaitInterruptibly([&](absl::Duration slice) { return handle.WaitFor(slice); })) {
    nb::python_error interrupted;  // takes the pending exception
    {
      nb::gil_scoped_release release;
      handle.Cancel();
      handle.Wait();
    }
    throw interrupted;
  }
  return handle.Wait();
}

nb::list Run(PyExecutor& self, const PyProgram& program, nb::dict feed,
             const std::vector<std::string>& fetch_list, PyScope& scope, bool return_numpy,
             const std::vector<std::string>& fetch_on_device, const std::string& trace_path) {
  CheckSameVm(self.context, scope.context, "the scope");
  framework::Feeds feeds;
  framework::DeviceIo device_io;
  for (auto [key, value] : feed) {
    const std::string name = nb::cast<std::string>(key);
    if (nb::isinstance<eager::Tensor>(value)) {
      const eager::Tensor& t = nb::cast<const eager::Tensor&>(value);
      CheckSameVm(self.context, t.context(), absl::StrCat("feed '", name, "'").c_str());
      device_io.feeds.emplace_back(name, t.blob());
    } else {
      feeds.emplace_back(name, HostTensorFromArray(value, absl::StrCat("feed '", name, "'")));
    }
  }
  device_io.fetches = fetch_on_device;
  framework::RunOptions options;
  options.trace_path = trace_path;
  absl::StatusOr<std::shared_ptr<framework::RunHandle>> handle =
      WithScope(scope, [&](framework::Scope& vars) {
        return self.executor->RunAsync(program.program->desc(), feeds, device_io, fetch_list, &vars,
                                       nullptr, options);
      });
  std::shared_ptr<framework::RunHandle> run = Unwrap(std::move(handle));
  const absl::StatusOr<framework::RunResult>& result = WaitForRun(*run);
  Check(result.status());
  // Both result lists are in fetch_list order: a device fetch's blob is in device_fetches,
  // a host fetch's bytes in fetches.
  nb::list out;
  for (size_t i = 0; i < fetch_list.size(); ++i) {
    const bool on_device = std::find(fetch_on_device.begin(), fetch_on_device.end(),
                                     fetch_list[i]) != fetch_on_device.end();
    if (on_device) {
      out.append(nb::cast(Unwrap(self.context.FromBlob(result->device_fetches[i]))));
      continue;
    }
    framework::HostTensor t = result->fetches[i];
    if (return_numpy) {
      out.append(ArrayFromBytes(t.dtype, t.shape, std::move(t.bytes)));
    } else {
      // A cpu Tensor of the fetched values.
      absl::StatusOr<eager::Tensor> tensor;
      {
        nb::gil_scoped_release release;
        tensor = self.context.FromBytes(t.dtype, t.shape, t.bytes, Device::Cpu());
      }
      out.append(nb::cast(Unwrap(std::move(tensor))));
    }
  }
  return out;
}

// Scope: the variables that live across runs.
void BindScope(nb::module_& m) {
  nb::class_<PyScope>(m, "Scope", "Variables that live across runs (parameters, optimizer state).")
      .def(nb::new_([](eager::Context ctx) { return std::make_shared<PyScope>(std::move(ctx)); }),
           nb::arg("context"))
      .def("var_names",
           [](PyScope& s) {
             return WithScope(s, [](framework::Scope& vars) { return vars.LocalNames(); });
           })
      .def("has_var",
           [](PyScope& s, const std::string& name) {
             return WithScope(s, [&](framework::Scope& vars) {
               const vm::BlobRef* blob = vars.Find(name);
               return blob != nullptr && *blob != nullptr;
             });
           })
      .def("var_shape",
           [](PyScope& s, const std::string& name) {
             absl::StatusOr<Shape> shape =
                 WithScope(s, [&](framework::Scope& vars) -> absl::StatusOr<Shape> {
                   const vm::BlobRef* blob = vars.Find(name);
                   if (blob == nullptr || *blob == nullptr) {
                     return absl::NotFoundError(
                         absl::StrCat("variable '", name, "' is not in the scope"));
                   }
                   return (*blob)->shape();
                 });
             return FromShape(Unwrap(std::move(shape)));
           })
      .def(
          "read",
          [](PyScope& s, const std::string& name) {
            framework::HostTensor t = Unwrap(WithScope(s, [&](framework::Scope& vars) {
              return framework::io::ReadVariable(s.IoExecutor(Device::Cpu()), &vars, name);
            }));
            return ArrayFromBytes(t.dtype, t.shape, std::move(t.bytes));
          },
          nb::arg("name"), "A NumPy copy of variable `name`.")
      .def(
          "write",
          [](PyScope& s, const std::string& name, nb::handle array, const std::string& device) {
            framework::HostTensor value =
                HostTensorFromArray(array, absl::StrCat("variable '", name, "'"));
            const Device d = ParseDevice(device);
            Unwrap(s.context.runtime()->GetDevice(d));
            Check(WithScope(s, [&](framework::Scope& vars) {
              return framework::io::WriteVariable(s.IoExecutor(d), &vars, name, value);
            }));
          },
          nb::arg("name"), nb::arg("array"), nb::arg("device") = "cpu",
          "Sets variable `name` to a copy of `array`, on `device`.")
      .def("erase", [](PyScope& s, const std::string& name) {
        return WithScope(s, [&](framework::Scope& vars) { return vars.Erase(name); });
      });
}

}  // namespace

void BindExecutor(nb::module_& m) {
  BindScope(m);
  nb::class_<PyExecutor>(m, "Executor", "Runs static programs (framework::Executor).")
      .def(
          "__init__",
          [](PyExecutor* self, eager::Context ctx, const std::string& device, int compute_streams,
             bool compile_subgraphs, bool release_temporaries, bool inplace, bool addto) {
            framework::ExecutorOptions options;
            options.interpreter.device = ParseDevice(device);
            Unwrap(ctx.runtime()->GetDevice(options.interpreter.device));
            options.interpreter.compute_streams = compute_streams;
            options.interpreter.compile_subgraphs = compile_subgraphs;
            options.interpreter.release_temporaries = release_temporaries;
            options.interpreter.inplace = inplace;
            options.interpreter.addto = addto;
            new (self) PyExecutor(std::move(ctx), options);
            self->device = options.interpreter.device;
          },
          nb::arg("context"), nb::arg("device") = "cpu", nb::arg("compute_streams") = 1,
          nb::arg("compile_subgraphs") = true, nb::arg("release_temporaries") = true,
          nb::arg("inplace") = true, nb::arg("addto") = false)
      .def_prop_ro("device", [](const PyExecutor& e) { return e.device.ToString(); })
      .def("run", &Run, nb::arg("program"), nb::arg("feed"), nb::arg("fetch_list"),
           nb::arg("scope"), nb::arg("return_numpy") = true,
           nb::arg("fetch_on_device") = std::vector<std::string>{}, nb::arg("trace_path") = "",
           "Runs `program` once in `scope`. `feed` maps names to arrays (host feeds) or "
           "Tensors (device-resident feeds); fetches named in `fetch_on_device` come back as "
           "Tensors, the others as NumPy arrays. The GIL is released while it runs; Ctrl-C "
           "cancels the run (the scope keeps what finished ops wrote) and raises "
           "KeyboardInterrupt.")
      .def_prop_ro("cache_hits", [](const PyExecutor& e) { return e.executor->cache_hits(); })
      .def_prop_ro("cache_misses", [](const PyExecutor& e) { return e.executor->cache_misses(); })
      .def("last_lowering", [](const PyExecutor& e) {
        framework::LoweringStats stats = Unwrap(e.executor->LastLowering());
        nb::dict out;
        out["compiled_subgraphs"] = stats.compiled_subgraphs;
        out["fused_ops"] = stats.fused_ops;
        out["compile_fallbacks"] = stats.compile_fallbacks;
        out["inplace_reuses"] = stats.inplace_reuses;
        out["addto_sums"] = stats.addto_sums;
        out["addto_writes"] = stats.addto_writes;
        out["storage_handoffs"] = stats.storage_handoffs;
        out["peak_temporary_bytes"] = stats.peak_temporary_bytes;
        return out;
      });

  m.def(
      "_save_persistables",
      [](PyExecutor& e, const PyProgram& program, PyScope& scope, const std::string& dir) {
        CheckSameVm(e.context, scope.context, "the scope");
        Check(WithScope(scope, [&](framework::Scope& vars) {
          return framework::io::SavePersistables(*e.executor, program.program->desc(), &vars, dir);
        }));
      },
      nb::arg("executor"), nb::arg("program"), nb::arg("scope"), nb::arg("dir"));
  // The names of the persistables left as they were (only with allow_missing).
  m.def(
      "_load_persistables",
      [](PyExecutor& e, const PyProgram& program, PyScope& scope, const std::string& dir,
         bool allow_missing) {
        CheckSameVm(e.context, scope.context, "the scope");
        absl::StatusOr<framework::io::LoadReport> report =
            WithScope(scope, [&](framework::Scope& vars) {
              return framework::io::LoadPersistables(
                  *e.executor, program.program->desc(), &vars, dir,
                  framework::io::LoadOptions{.allow_missing = allow_missing});
            });
        Check(report.status());
        return report->skipped;
      },
      nb::arg("executor"), nb::arg("program"), nb::arg("scope"), nb::arg("dir"),
      nb::arg("allow_missing") = false);
}

}  // namespace sluice::python
