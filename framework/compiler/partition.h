// The partitioning pass (docs/design.md, "Subgraph compilation"): finds maximal groups of
// fusible ops (op_lowering.h) in a block and describes each as a Subgraph. It sees a block
// as plain data — ops with their variable ids, device, fixed stream and predecessors, and
// the variables' metadata — so the interpreter (or a test) hands it any block without this
// folder knowing the interpreter's types.
//
// Rules:
//  - an op joins a group only with a producer of one of its inputs (so a group is
//    connected), on the same device and fixed stream (or both unfixed), with its outputs
//    of the group's domain shape and dtype;
//  - contracting a group never creates a cycle: an op joins only when no path leads from
//    the group to it through something outside the group (checked on the contracted graph,
//    so paths through other groups count);
//  - every variable a group writes must be written by that op alone in the block (no
//    other version of it exists for another op to see);
//  - a value another op outside the group reads, or a pinned variable (fed, fetched,
//    persistable), stays visible: it is an output of the group;
//  - groups of one op are left alone (nothing to fuse).
// Pure function; thread-safe.
#ifndef SLUICE_FRAMEWORK_COMPILER_PARTITION_H_
#define SLUICE_FRAMEWORK_COMPILER_PARTITION_H_

#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/stream_id.h"
#include "framework/compiler/op_lowering.h"
#include "framework/compiler/subgraph.h"
#include "vm/attrs.h"

namespace sluice::framework::compiler {

struct PartitionVar {
  ValueMeta meta;
  bool pinned = false;  // fed, fetched or persistable: must stay visible
};

struct PartitionOp {
  std::string type;
  const vm::AttrMap* attrs = nullptr;  // may be null
  std::vector<int> inputs;             // variable ids, in slot order
  std::vector<int> outputs;
  Device device;
  std::optional<StreamKey> stream;  // fixed stream, if any
  bool eligible = true;             // false: never fused (control flow, copies, ...)
  std::vector<int> preds;           // ops it depends on (each smaller), any reduction kept
};

struct PartitionGroup {
  std::vector<int> ops;          // ascending
  Subgraph graph;                // inputs and outputs as below
  std::vector<int> input_vars;   // per graph input
  std::vector<int> output_vars;  // per graph output
};

struct PartitionOptions {
  int min_ops = 2;  // smaller groups are not reported
};

std::vector<PartitionGroup> Partition(const std::vector<PartitionOp>& ops,
                                      const std::vector<PartitionVar>& vars,
                                      const PartitionOptions& options = {});

// True when contracting each group to one node leaves the op graph acyclic: what tests
// check of Partition's result.
bool ContractionIsAcyclic(const std::vector<PartitionOp>& ops,
                          const std::vector<PartitionGroup>& groups);

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_PARTITION_H_
