// The lowered graph: the data the interpreter's passes (interpreter.h) hand to each other.
// Plain value types with public fields; every index is dense and refers into a vector the
// pipeline owns (var slots into VarTable::slots, op funcs into the OpFunc list, nodes into
// the Node list, segments into the Segment list, streams into the stream table). Nothing
// here refers to a VM except the blobs BindBlobs fills in (vm_binding.h).
// Thread-compatible, like every value type.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_LOWERED_GRAPH_H_
#define SLUICE_FRAMEWORK_INTERPRETER_LOWERED_GRAPH_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "core/stream_id.h"
#include "framework/interpreter/dependency_builder.h"
#include "vm/attrs.h"
#include "vm/blob.h"

namespace sluice::ops {
class OpSchema;
}  // namespace sluice::ops

namespace sluice::vm {
class OpKernel;
}  // namespace sluice::vm

namespace sluice::framework {

// How a variable gets its storage: fed by the caller (a host blob per build), persistable
// (lives in the root scope across builds), or a temporary the interpreter owns and, with
// the GC plan on, releases after its last use.
enum class VarKind { kFeed, kPersistable, kTemp };

// One variable as the lowered graph sees it: a block variable, or a copy of one on another
// device (named "<var>@<device>", always kTemp).
struct VarSlot {
  std::string name;
  VarKind kind = VarKind::kTemp;
  Device device;  // set by CollectVars; temporaries' devices may be moved by placement
  DataType dtype = DataType::kF32;
  Shape shape;
  vm::BlobRef blob;  // null until BindBlobs
  bool fetched = false;
  // Fetched and kept on its device (I/O binding, interpreter_options.h): placement copies it
  // to no other device, and BindBlobs gives a temporary a blob with storage of its own (not
  // a lazy one), which the executor can copy out through an InstructionsBuilder after a run.
  bool device_fetch = false;
  // Its blob is a dying temporary's, handed on at this slot's first write (in place:
  // inplace_pass.h; or after a release: storage_handoff.h), so that write allocates nothing.
  bool took_storage = false;
  // Its blob is also a later slot's, which took it in place when this one died
  // (inplace_pass.h): no later pass may rebind this slot to another blob.
  bool gave_in_place = false;
};

// The variables one block's passes see. A block's variables come first, in declaration
// order (so `index_of` maps exactly them); copies inserted by placement are appended.
struct VarTable {
  std::vector<VarSlot> slots;
  absl::flat_hash_map<std::string, int> index_of;  // block variable name -> slot

  int size() const { return static_cast<int>(slots.size()); }
};

// One op to run: a block op or an inserted copy.
struct OpFunc {
  std::string type;
  int source = -1;  // index of the block op; -1 for an inserted copy
  const ops::OpSchema* schema = nullptr;
  const vm::OpKernel* kernel = nullptr;      // null until kernel choice (copies: at insertion)
  std::shared_ptr<const vm::AttrMap> attrs;  // null when the op has no attributes
  Device device;                             // where it runs
  std::optional<StreamKey> stream;  // fixed by placement or attribute; else the list schedule's
  std::vector<int> inputs;          // var slots, flattened in slot order
  std::vector<int> outputs;
  // Outputs the func adds into (the add-to pass, addto_pass.h): read as well as written.
  std::vector<int> accumulates;
  bool random = false;
};

// The op func that first writes each of `num_vars` slots (-1: none). Funcs read nothing
// before it is written (ResolveOps), so it is also the slot's first accessor.
inline std::vector<int> FirstWriters(const std::vector<OpFunc>& funcs, int num_vars) {
  std::vector<int> first(static_cast<size_t>(num_vars), -1);
  for (int f = 0; f < static_cast<int>(funcs.size()); ++f) {
    for (int v : funcs[static_cast<size_t>(f)].outputs) {
      if (first[static_cast<size_t>(v)] < 0) first[static_cast<size_t>(v)] = f;
    }
  }
  return first;
}

// Whether one blob's storage can serve both variables: same device, data type and shape.
inline bool SameStorage(const VarSlot& a, const VarSlot& b) {
  return a.device == b.device && a.dtype == b.dtype && a.shape == b.shape;
}

// Each func's accesses (its inputs read, its outputs written), for BuildDependencies.
inline std::vector<OpAccess> AccessesOf(const std::vector<OpFunc>& funcs) {
  std::vector<OpAccess> accesses(funcs.size());
  for (size_t f = 0; f < funcs.size(); ++f) {
    accesses[f].reads = funcs[f].inputs;
    accesses[f].reads.insert(accesses[f].reads.end(), funcs[f].accumulates.begin(),
                             funcs[f].accumulates.end());
    accesses[f].writes = funcs[f].outputs;
    accesses[f].random = funcs[f].random;
  }
  return accesses;
}

// A node of the lowered graph: an op func, or the release of a temporary (GC plan).
struct Node {
  int op = -1;   // op func index, or -1 for a release
  int var = -1;  // released var slot (op == -1)
  // A release whose storage goes to this var slot's first write instead (storage_handoff.h):
  // an ordering point with no step.
  int handoff_to = -1;
  // A shared release (gc_plan.h): one of `drops` (>= 2) release nodes of `var`, each on
  // its own stream after that stream's last touch; the last to run frees the storage.
  // 0: the var's only release node.
  int drops = 0;
  int stream = -1;         // stream table index
  std::vector<int> preds;  // node indices, each smaller than this node's
  int segment = -1;        // set by FormSegments
};

// Consecutive nodes of one stream that run as one StepSequence.
struct Segment {
  int stream = -1;  // stream table index
  std::vector<int> nodes;
  int position = 0;  // ordinal among the segments of its stream
};

// What the stream analysis needs to know of a stream, without a VM.
struct StreamInfo {
  Device device;
  // The engine completes its work in order on the host (cpu streams); false for an
  // asynchronous device stream (sim, cuda).
  bool synchronous = true;
  // The worker (host thread) that runs the stream, as a dense id: two synchronous streams
  // of different workers order cross-stream work by a wait on the host.
  int worker = 0;
};

// Whether stream `s` runs on the host, given a per-stream table of StreamInfo::synchronous
// (streams past its end, e.g. with an empty table, do not).
inline bool OnHostStream(const std::vector<bool>& host_stream, int s) {
  return s >= 0 && s < static_cast<int>(host_stream.size()) && host_stream[s];
}

// An instruction of the stream plan, before a back end turns it into VM instructions.
struct StreamItem {
  enum class Kind { kSequence, kStreamWait, kRecordEvent };
  Kind kind = Kind::kSequence;
  int segment = -1;       // kSequence: its segment; kStreamWait: the segment that needs the wait
  int from = -1;          // kStreamWait, kRecordEvent: the producer's stream
  int to = -1;            // kSequence: its stream; kStreamWait: the consumer's stream
  double key = 0;         // list-schedule time; dispatch order is ascending key
  int from_segment = -1;  // kStreamWait: the segment waited for
};

// The stream analysis' result: items, dependences between them, and a dispatch order.
struct StreamPlan {
  std::vector<StreamItem> items;
  std::vector<std::pair<int, int>> edges;  // (from item, to item), from's key < to's key
  std::vector<int> order;  // item indices by ascending key (stable): a topological order
  int stream_waits = 0;
  int record_events = 0;
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_LOWERED_GRAPH_H_
