// Building blocks for tests of the interpreter's passes over hand-built lowered graphs
// (framework/interpreter/lowered_graph.h).
#ifndef SLUICE_TESTS_FRAMEWORK_LOWERED_GRAPH_TEST_UTIL_H_
#define SLUICE_TESTS_FRAMEWORK_LOWERED_GRAPH_TEST_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework::graph_test {

// An op func reading `inputs` and writing `outputs` (var slots); no kernel, no stream.
inline OpFunc Func(std::vector<int> inputs, std::vector<int> outputs) {
  OpFunc f;
  f.inputs = std::move(inputs);
  f.outputs = std::move(outputs);
  return f;
}

// Appends a slot named `name` of `kind` to `table` (as a block variable: `index_of` maps
// it) and returns it for the caller to fill in further.
inline VarSlot& AddSlot(VarTable& table, std::string name, VarKind kind) {
  table.index_of[name] = table.size();
  VarSlot& slot = table.slots.emplace_back();
  slot.name = std::move(name);
  slot.kind = kind;
  return slot;
}

}  // namespace sluice::framework::graph_test

#endif  // SLUICE_TESTS_FRAMEWORK_LOWERED_GRAPH_TEST_UTIL_H_
