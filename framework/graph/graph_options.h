// GraphOptions: how a Graph (graph.h) is named, placed, cached and lowered. Apart from
// graph.h so that a specialization (specialization.h), which lowers with them, needs no
// Graph.
//
// Value type; thread-compatible.
#ifndef SLUICE_FRAMEWORK_GRAPH_GRAPH_OPTIONS_H_
#define SLUICE_FRAMEWORK_GRAPH_GRAPH_OPTIONS_H_

#include <optional>
#include <string>

#include "core/device.h"

namespace sluice::framework::graph {

struct GraphOptions {
  std::string name = "graph";  // in errors and traces: "graph 'name'"
  // Where the graph runs; unset: the first input's device (the context's default device
  // for a graph without inputs). Every input must be on it.
  std::optional<Device> device;
  // Specializations kept (by device, input dtypes and shapes); at least 1.
  int max_specializations = 8;
  // The GC plan's option for the graph's own temporaries: off, each has storage of its own;
  // on, temporaries with disjoint live ranges share (the graph keeps its live set between
  // calls either way).
  bool release_temporaries = true;
};

}  // namespace sluice::framework::graph

#endif  // SLUICE_FRAMEWORK_GRAPH_GRAPH_OPTIONS_H_
