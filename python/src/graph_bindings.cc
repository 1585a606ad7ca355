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

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "framework/graph/graph.h"
#include "python/src/bindings.h"

namespace sluice::python {
namespace {

thread_local framework::graph::Trace* current_trace = nullptr;

// The programs of the traces running now, each with a token that turns false when its
// trace ends (GIL held). A Variable of a trace keeps the token, not the address: a later
// trace's program may reuse the address.
absl::flat_hash_map<const framework::Program*, std::shared_ptr<bool>>& LiveTracePrograms() {
  static auto* programs = new absl::flat_hash_map<const framework::Program*, std::shared_ptr<bool>>;
  return *programs;
}

// Sets the thread's current trace for its lifetime, and marks its programs live.
class TraceScope {
 public:
  explicit TraceScope(framework::graph::Trace* trace)
      : trace_(trace), previous_(current_trace), alive_(std::make_shared<bool>(true)) {
    current_trace = trace;
    LiveTracePrograms()[&trace->main()] = alive_;
    LiveTracePrograms()[&trace->startup()] = alive_;
  }
  ~TraceScope() {
    *alive_ = false;
    LiveTracePrograms().erase(&trace_->main());
    LiveTracePrograms().erase(&trace_->startup());
    current_trace = previous_;
  }

 private:
  framework::graph::Trace* trace_;
  framework::graph::Trace* previous_;
  std::shared_ptr<bool> alive_;
};

struct PyGraph {
  std::optional<framework::graph::Graph> graph;
  nb::callable function;
  // What the traced function raised, raised again by the call.
  CallbackErrors errors;
  bool single_output = false;
};

}  // namespace

framework::graph::Trace* CurrentTrace() { return current_trace; }

std::shared_ptr<const bool> TraceToken(const framework::Program* program) {
  auto it = LiveTracePrograms().find(program);
  return it == LiveTracePrograms().end() ? nullptr : it->second;
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
            // The function runs on the calling thread during a call, which holds the graph's
            // lock with the GIL released: the trace takes the GIL back (another thread may
            // then call the graph and wait for the lock without holding the GIL).
            framework::graph::GraphFunction traced = [self](framework::graph::Trace& trace,
                                                            const std::vector<framework::Value>& in)
                -> absl::StatusOr<std::vector<framework::Value>> {
              nb::gil_scoped_acquire acquire;
              TraceScope scope(&trace);
              return self->errors.Run([&]() -> absl::StatusOr<std::vector<framework::Value>> {
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
              });
            };
            self->graph.emplace(
                Unwrap(framework::graph::Graph::Create(std::move(ctx), traced, options)));
          },
          nb::arg("context"), nb::arg("function"), nb::arg("name") = "graph",
          nb::arg("device") = nb::none())
      .def(
          "__call__",
          [](PyGraph& self, const std::vector<eager::Tensor>& inputs) -> nb::object {
            absl::StatusOr<std::vector<eager::Tensor>> out;
            {
              nb::gil_scoped_release release;
              out = (*self.graph)(inputs);
            }
            self.errors.RaiseIfAny();
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
