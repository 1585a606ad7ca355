// Specialization: one graph (graph.h) traced and lowered for one device and one list of
// input dtypes and shapes — its programs, the scope of its optimizer state, the bound eager
// parameters and the GraphLaunch kernel every call of that form submits.
//
// Immutable once built (but for the kernel's per-launch copy operands, graph_launch.h).
// Destroyed only when no submitted launch can still run it (graph.cc waits for that).
#ifndef SLUICE_FRAMEWORK_GRAPH_SPECIALIZATION_H_
#define SLUICE_FRAMEWORK_GRAPH_SPECIALIZATION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/graph/graph_launch.h"
#include "framework/graph/graph_options.h"
#include "framework/graph/trace.h"
#include "framework/interpreter/scope.h"
#include "vm/stream.h"

namespace sluice::framework::graph {

// What a specialization is keyed by. Value type.
struct SpecializationKey {
  Device device;
  std::vector<std::pair<DataType, Shape>> inputs;
  friend bool operator==(const SpecializationKey& a, const SpecializationKey& b) {
    return a.device == b.device && a.inputs == b.inputs;
  }
};

struct Specialization {
  SpecializationKey key;
  std::unique_ptr<Program> main;
  std::unique_ptr<Program> startup;
  // Declared before the kernel, whose frame points at their blobs: destroyed after it.
  // The graph's state scope (graph.h, "State"), shared by its specializations.
  std::shared_ptr<Scope> scope;
  // The blobs of the scope this specialization reads or writes (empty: the graph keeps no
  // state, and its calls carry no state token).
  std::vector<vm::Blob*> state;
  std::vector<eager::Tensor> read_params;     // bound parameters the graph only reads
  std::vector<eager::Tensor> updated_params;  // and those it writes
  std::atomic<bool> cancel{false};            // never set: a graph call runs to its end
  std::atomic<int64_t> ops_run{0};
  vm::Stream* stream = nullptr;  // the device's launcher stream
  std::vector<eager::Context::OutputSpec> outputs;
  std::unique_ptr<GraphLaunch> launch;
};

// Traces `function` for `key` and lowers it (see graph.h). The startup program's variables
// that `scope` does not hold yet are made by running it, into `scope`; those it holds are
// reused (a graph's state is one, whatever the shapes of its calls). Errors carry `name`
// ("graph 'step'"): the function's own, an output that is not a static Value of the trace,
// a persistable that neither Trace::Param nor the startup program gives a value, state the
// scope holds with another dtype or shape, and the lowering's (naming the op).
absl::StatusOr<std::unique_ptr<Specialization>> BuildSpecialization(
    eager::Context& ctx, const GraphFunction& function, const GraphOptions& options,
    const std::string& name, SpecializationKey key, std::shared_ptr<Scope> scope);

}  // namespace sluice::framework::graph

#endif  // SLUICE_FRAMEWORK_GRAPH_SPECIALIZATION_H_
