// The interpreter's build options, its I/O binding and the statistics of what a build
// produced (interpreter.h). Value types.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_INTERPRETER_OPTIONS_H_
#define SLUICE_FRAMEWORK_INTERPRETER_INTERPRETER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "framework/interpreter/dependency_builder.h"

namespace sluice::framework {

namespace compiler {
class Compiler;
}  // namespace compiler

struct InterpreterOptions {
  Device device{DeviceType::kCpu, 0};  // where ops run
  // Ops without a "stream" attribute run on compute stream 0, or — when > 1 — are spread
  // over compute streams 0..n-1 by a list schedule (unit cost per op).
  int compute_streams = 1;
  // The list schedule's price of an edge between two compute streams, in ops: the consumer
  // starts that much after its producer ends, and the choice of stream counts it once more
  // per such input. Higher keeps chains of dependent ops on one stream (fewer syncs and
  // longer fused sequences); 0 balances the streams by start time alone.
  double cross_stream_cost = 2.0;
  // Free temporaries after their last use (the GC plan). Off: they keep their storage
  // between runs (less allocator traffic, more memory).
  bool release_temporaries = true;
  // With the GC plan on: a released temporary's storage goes straight to the next
  // same-shaped temporary first written on its stream (storage_handoff.h). Off: every
  // release frees and every first write allocates (for comparison).
  bool hand_off_storage = true;
  // With the GC plan on: an op writes its output into an input that dies at it, where its
  // schema declares the pair in place (inplace_pass.h; Paddle's `inplace` pass). Runs before
  // the storage hand-offs. Off: every such output gets storage of its own (for comparison,
  // and `sluice run --no-inplace`).
  bool inplace = true;
  // A gradient that several ops contribute to is accumulated in one buffer: the first
  // contributor writes it, the later ones add into it, and the `sum` op goes (addto_pass.h;
  // Paddle's `addto` pass, BuildStrategy::enable_addto). Off by default, as in Paddle, until
  // it lowers the measured peaks (docs/benchmarks.md, "Memory"); `sluice run --addto`.
  bool addto = false;
  // Fuse same-stream runs into StepSequences. Off: one instruction per op (for comparison).
  bool fuse = true;
  // When every stream is a cpu stream with a worker of its own (VirtualMachine::CanRunLanes)
  // and fuse is on: run each stream's work as one sequence with cross-sequence waits
  // (vm/step_sequence.h) instead of one instruction per fused segment and StreamWait. Off: the
  // instruction-level lowering (for comparison).
  bool lane_sequences = true;
  // Where lanes would be used (above): the streams' workers share one graph of the block's
  // tasks, each worker taking whatever task is ready (graph_lowering.h, vm/step_graph.h),
  // instead of each running its own stream's steps in order. A worker that loses its core
  // then holds up one task instead of a lane. Lanes are still used with a recorder attached
  // or a pipelined loop. Off: lanes (for comparison).
  bool work_sharing = true;
  // Subgraph compilation (framework/compiler/, docs/design.md "Subgraph compilation"):
  // groups of fusible elementwise ops run as one compiled kernel each. Needs `compiler`
  // (the Executor passes its own); without one nothing is compiled.
  bool compile_subgraphs = true;
  compiler::Compiler* compiler = nullptr;  // not owned; must outlive the interpreter
  // Testing only: turn cross-stream edges into plain edges with no StreamWait/RecordEvent,
  // so the sync checker can show that the stream analysis is what makes runs correct.
  bool skip_stream_analysis = false;
};

// I/O binding (docs/design.md, "I/O binding"): which feeds and fetches of a build stay on
// the device the program runs on, so that a run moves no bytes through the host for them.
// Part of the build (it changes where variables live and which copies placement inserts)
// and so of the executor's cache key. Value type.
//  - A device-resident feed's variable lives on InterpreterOptions::device (a host feed's
//    lives on cpu): no memcpy_h2d follows it. Each run fills it with an `assign` from the
//    caller's blob (Interpreter::StageFeeds).
//  - A device-resident fetch stays where its variable lives: no memcpy_d2h copies it back.
//    After the run it is copied with an `assign` into a new blob on that device for the
//    caller (Interpreter::CopyOutDeviceFetches).
struct IoBinding {
  std::vector<std::string> device_feeds;    // each also a feed of the build
  std::vector<std::string> device_fetches;  // each also a fetch of the build
};

// What Build produced. Value type.
struct LoweringStats {
  int64_t ops = 0;  // op funcs, inserted copies included
  int64_t inserted_copies = 0;
  int64_t instructions = 0;  // batch nodes per run
  int64_t op_sequences = 0;
  int64_t lane_sequences = 0;  // streams run as one sequence each (0: not lane mode)
  int64_t graph_tasks = 0;     // tasks of the shared step graph (0: not graph mode)
  // while loops whose iterations overlap across lanes (parallel_iterations > 1; each lane
  // but the loop's runs a helper step)
  int64_t pipelined_loops = 0;
  int64_t stream_waits = 0;
  int64_t record_events = 0;
  int64_t releases = 0;          // release steps per run (shared releases' drops included)
  int64_t shared_releases = 0;   // of which drops of shared releases (gc_plan.h)
  int64_t storage_handoffs = 0;  // releases that hand their storage on instead (no step)
  int64_t inplace_reuses = 0;    // outputs written into a dying input's storage (inplace_pass.h)
  int64_t addto_sums = 0;        // `sum` ops the add-to pass removed (addto_pass.h)
  int64_t addto_writes = 0;      // contributions that add into their sum's output instead
  // The most bytes of temporaries held at once, the nodes taken in order (PeakTemporaryBytes:
  // a bound from the plan, not a measurement).
  int64_t peak_temporary_bytes = 0;
  int64_t edges = 0;  // batch edges
  // Subgraph compilation (InterpreterOptions::compile_subgraphs).
  int64_t compiled_subgraphs = 0;  // groups run as one compiled kernel
  int64_t fused_ops = 0;           // ops inside them
  int64_t compile_fallbacks = 0;   // groups whose compile failed (run unfused)
  int64_t compile_cache_hits = 0;
  int64_t compile_ns = 0;  // spent compiling in this build
  int64_t streams = 0;
  DependencyStats dependencies;
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_INTERPRETER_OPTIONS_H_
