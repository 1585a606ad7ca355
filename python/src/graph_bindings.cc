// sluice._sluice._Graph: graph::Graph (framework/graph) over a Python function, the shape
// of oneflow.nn.Graph: traced once per input signature into a program, each call one VM
// instruction. While the function is traced, eager tensors it uses (a layer's weights)
// become the trace's parameters, bound in place (ToValue, conversions.cc).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "framework/graph/graph.h"
#include "python/src/bindings.h"

namespace sluice::python {
namespace {

thread_local framework::graph::Trace* current_trace = nullptr;

// The programs of the traces running now (GIL held).
absl::flat_hash_set<const framework::Program*>& LiveTracePrograms() {
  static auto* programs = new absl::flat_hash_set<const framework::Program*>;
  return *programs;
}

// Sets the thread's current trace for its lifetime, and marks its programs live.
class TraceScope {
 public:
  explicit TraceScope(framework::graph::Trace* trace) : trace_(trace), previous_(current_trace) {
    current_trace = trace;
    LiveTracePrograms().insert(&trace->main());
    LiveTracePrograms().insert(&trace->startup());
  }
  ~TraceScope() {
    LiveTracePrograms().erase(&trace_->main());
    LiveTracePrograms().erase(&trace_->startup());
    current_trace = previous_;
  }

 private:
  framework::graph::Trace* trace_;
  framework::graph::Trace* previous_;
};

struct PyGraph {
  std::optional<framework::graph::Graph> graph;
  nb::callable function;
  // A Python exception raised by the traced function, raised again by the call.
  std::optional<nb::python_error> error;
  bool single_output = false;
};

}  // namespace

framework::graph::Trace* CurrentTrace() { return current_trace; }

bool IsLiveTraceProgram(const framework::Program* program) {
  return LiveTracePrograms().contains(program);
}

void BindGraph(nb::module_& m) {
  nb::class_<PyGraph>(m, "_Graph")
      .def(
          "__init__",
          [](PyGraph* self, eager::Context ctx, nb::callable function, const std::string& name,
             std::optional<std::string> device) {
            new (self) PyGraph();
            self->function = std::move(function);
            framework::graph::GraphOptions options;
            options.name = name;
            if (device) options.device = ParseDevice(*device);
            // The function runs on the calling thread during a call (the GIL is held).
            framework::graph::GraphFunction traced = [self](framework::graph::Trace& trace,
                                                            const std::vector<framework::Value>& in)
                -> absl::StatusOr<std::vector<framework::Value>> {
              TraceScope scope(&trace);
              try {
                nb::list args;
                for (const framework::Value& v : in) args.append(FromValue(v));
                nb::object result = self->function(*nb::tuple(args));
                std::vector<framework::Value> out;
                self->single_output =
                    nb::isinstance<PyVariable>(result) || nb::isinstance<eager::Tensor>(result);
                if (self->single_output) {
                  out.push_back(ToValue(result));
                } else {
                  for (nb::handle item : result) out.push_back(ToValue(item));
                }
                return out;
              } catch (nb::python_error& e) {
                if (!self->error) self->error.emplace(std::move(e));
                return absl::CancelledError("the graph's build() raised");
              } catch (const StatusError& e) {
                return e.status();
              }
            };
            self->graph.emplace(
                Unwrap(framework::graph::Graph::Create(std::move(ctx), traced, options)));
          },
          nb::arg("context"), nb::arg("function"), nb::arg("name") = "graph",
          nb::arg("device") = nb::none())
      .def(
          "__call__",
          [](PyGraph& self, const std::vector<eager::Tensor>& inputs) -> nb::object {
            absl::StatusOr<std::vector<eager::Tensor>> out = (*self.graph)(inputs);
            if (self.error) {
              nb::python_error e = std::move(*self.error);
              self.error.reset();
              throw e;
            }
            std::vector<eager::Tensor> tensors = Unwrap(std::move(out));
            if (self.single_output && tensors.size() == 1) return nb::cast(tensors.front());
            nb::list list;
            for (eager::Tensor& t : tensors) list.append(nb::cast(std::move(t)));
            return nb::tuple(list);
          },
          nb::arg("inputs"))
      .def("reset_state", [](PyGraph& self) { self.graph->ResetState(); })
      .def("stats", [](const PyGraph& self) {
        const framework::graph::GraphStats s = self.graph->stats();
        nb::dict out;
        out["calls"] = s.calls;
        out["traces"] = s.traces;
        out["evictions"] = s.evictions;
        out["specializations"] = s.specializations;
        return out;
      });
}

}  // namespace sluice::python
