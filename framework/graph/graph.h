// Graph: a function over the fn:: front end (framework/builder/functional.h) traced once
// into a Program and called on eager tensors, each call one VM instruction (OneFlow's
// nn.Graph and its lazy job launch; TensorFlow's tf.function). See docs/design.md, "Eager
// meets lazy".
//
//   Graph step = Graph::Create(ctx, [&](Trace& t, const std::vector<Value>& in)
//                                       -> absl::StatusOr<std::vector<Value>> {
//     SLUICE_ASSIGN_OR_RETURN(Var w, t.Param(linear.weight()));   // shared, not copied
//     ...                                                         // fn:: ops, Gradients,
//     return std::vector<Value>{loss};                            // optim::Adam::Minimize
//   }).value();
//   std::vector<eager::Tensor> out = step({x, y}).value();        // returns at once
//
// Tracing. The first call with a given (device, input dtypes and shapes) traces the
// function inside a ProgramGuard of a fresh (main, startup) pair, with one `Data` variable
// per input ("input_<i>"); the function returns the outputs as static Values of the main
// program. The startup program (what optimizers add: moments, beta powers, learning
// rates) runs once, into a scope the specialization owns. The main program's block 0 is
// then lowered once into a GraphLaunch (graph_launch.h) on the device's launcher stream
// (StreamType::kLazyJobLauncher): every step of the graph runs there, in order, inside the
// one instruction. Specializations are cached by (device, dtypes, shapes); the least
// recently used is dropped beyond GraphOptions::max_specializations (once the launches
// submitted so far have completed).
//
// Parameters. Trace::Param turns an eager tensor into a persistable parameter variable of
// the trace (is_parameter: fn::Gradients and optimizers see it) bound to the tensor's own
// blob, so the graph reads and updates the eager storage in place; every call lists it
// among the instruction's operands, and a call that updates it bumps its version (as
// Context::CallInto does).
//
// State. What the startup program makes (optimizer moments, beta powers, learning rates)
// is the graph's, per device, shared by its specializations: a call with a new batch size
// traces again but continues the same Adam moments. Every call of a graph with state lists
// a small state token tensor among its read-write operands, so calls update the state in
// call order. A call whose state an earlier failure poisoned is refused
// (FailedPrecondition naming the state); ResetState starts it afresh.
//
// Calls. `graph(inputs)` checks the inputs (valid, this context, the devices), finds or
// builds the specialization, and submits one instruction whose outputs are new eager
// tensors; it returns before the graph has run. An error inside the graph poisons what
// depends on it — outputs and updated parameters — and surfaces at the next read, naming
// the op ("block 0 op #3 'softmax_with_cross_entropy'" in "graph 'step'"), as eager errors
// do; the context stays usable. Calls are not recorded for autograd (the outputs have no
// history).
//
// Thread-safety: Graph is a handle (copies share one graph); calls from several threads
// are safe (the cache is locked; launches of one specialization run one after another on
// its launcher stream). Tracing runs the function on the calling thread, under the
// graph's lock: the function must not call the same graph. The last handle's destruction
// waits for the graph's launches to complete.
#ifndef SLUICE_FRAMEWORK_GRAPH_GRAPH_H_
#define SLUICE_FRAMEWORK_GRAPH_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/graph/graph_options.h"
#include "framework/graph/trace.h"

namespace sluice::framework::graph {

namespace internal {
struct GraphState;
}  // namespace internal

// Trace and GraphFunction: trace.h. GraphOptions: graph_options.h.

// What a graph did. Value type.
struct GraphStats {
  int64_t calls = 0;
  int64_t traces = 0;           // specializations built (cache misses)
  int64_t evictions = 0;        // specializations dropped for newer ones
  int64_t specializations = 0;  // held now
  std::string ToString() const;
};

class Graph {
 public:
  // InvalidArgument for an empty function, a name that is empty, or max_specializations < 1.
  // Nothing is traced until the first call.
  static absl::StatusOr<Graph> Create(eager::Context ctx, GraphFunction function,
                                      GraphOptions options = {});

  // One call: see the header comment. Errors returned here (nothing was submitted): an
  // empty tensor, one of another context or off the graph's device (InvalidArgument naming
  // the input); the trace's errors (the function's own, an output that is not a static
  // Value of the trace, the program's build errors naming the op), prefixed with the
  // graph's name.
  absl::StatusOr<std::vector<eager::Tensor>> operator()(const std::vector<eager::Tensor>& inputs);
  absl::StatusOr<std::vector<eager::Tensor>> Call(const std::vector<eager::Tensor>& inputs) {
    return (*this)(inputs);
  }

  // Forgets the graph's state (what its startup program made: optimizer moments, step
  // counts) and its specializations; the next call traces again and starts the state
  // afresh. Bound eager parameters keep their values. For a graph whose state an earlier
  // failure poisoned (calls then return FailedPrecondition naming it).
  void ResetState();

  GraphStats stats() const;
  // The main program traced for these inputs' dtypes and shapes (tracing it when needed),
  // for tools and tests; valid while the specialization is cached.
  absl::StatusOr<const ir::ProgramDesc*> Program(const std::vector<eager::Tensor>& inputs);

 private:
  explicit Graph(std::shared_ptr<internal::GraphState> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::GraphState> state_;
};

}  // namespace sluice::framework::graph

#endif  // SLUICE_FRAMEWORK_GRAPH_GRAPH_H_
