// Trace and GraphFunction: the function a Graph (graph.h) traces, and what it sees besides
// its inputs while it is traced (graph.h's header comment, "Tracing" and "Parameters").
// Apart from graph.h so that a specialization (specialization.h), which runs the trace,
// needs no Graph.
//
// Trace is valid only during the trace, on the thread that runs it; thread-compatible.
#ifndef SLUICE_FRAMEWORK_GRAPH_TRACE_H_
#define SLUICE_FRAMEWORK_GRAPH_TRACE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/device.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"

namespace sluice::framework::graph {

namespace internal {
struct TraceAccess;
}  // namespace internal

// What the traced function sees besides its inputs. Valid only during the trace.
class Trace {
 public:
  // The persistable parameter variable bound to `tensor` (a tensor of the graph's context,
  // on the graph's device): the same variable for the same tensor. InvalidArgument naming
  // the tensor otherwise.
  absl::StatusOr<Var> Param(const eager::Tensor& tensor);
  // The programs being traced (also the thread's current ones).
  Program& main() { return main_; }
  Program& startup() { return startup_; }
  const Device& device() const { return device_; }

 private:
  friend struct internal::TraceAccess;
  Trace(Program& main, Program& startup, const eager::Context& ctx, Device device)
      : main_(main), startup_(startup), ctx_(ctx), device_(device) {}
  Program& main_;
  Program& startup_;
  const eager::Context& ctx_;
  const Device device_;
  // Bound parameters in order of first use: (variable name, tensor).
  std::vector<std::pair<std::string, eager::Tensor>> params_;
  absl::flat_hash_map<const void*, size_t> param_index_;  // tensor state -> params_ index
};

// The traced function: the graph's outputs (static Values of trace.main()) from its inputs
// (one `Data` variable per call input, in order).
using GraphFunction = std::function<absl::StatusOr<std::vector<Value>>(
    Trace& trace, const std::vector<Value>& inputs)>;

}  // namespace sluice::framework::graph

#endif  // SLUICE_FRAMEWORK_GRAPH_TRACE_H_
