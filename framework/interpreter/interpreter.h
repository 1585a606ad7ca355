// Interpreter: a Program analysed once and lowered into a reusable instruction graph (seed
// 001 §2, with the difference that Sluice's interpreter schedules nothing itself: every run
// hands the same PrecomputedBatch to the VM). Build does, in order:
//  1. op func list: each op's schema, normalized attributes, inferred shapes checked against
//     the program's variables, kernel for (op, device type, dtype), device placement, and
//     inserted `memcpy_h2d` / `memcpy_d2h` where a value crosses devices (feeds live on cpu;
//     fetched values are copied back to cpu);
//  2. variable binding: feeds get host blobs, persistables live in the root scope (created
//     lazily on the device when absent), temporaries get lazy blobs the interpreter owns;
//  3. dependences (dependency_builder.h), then stream placement: an op's "stream" attribute
//     ("compute:1"), else compute stream 0, or — with compute_streams > 1 — a list
//     schedule over that many compute streams that prices cross-stream edges;
//  4. GC plan: each temporary (not fed, fetched or persistable) gets a Release after every
//     op that touches it, on the stream that first writes it (the stream that allocates it);
//  5. fusion: consecutive nodes of one stream whose other-stream dependences come only
//     into the first node and out of the last become one OpSequence instruction;
//  6. stream analysis: an edge between streams of one asynchronous device becomes a
//     StreamWait, from an asynchronous stream to another device a RecordEvent; a wait
//     already implied by earlier waits (vector clocks per stream) is not emitted;
//  7. lane mode, when every stream is a cpu stream of its own worker: each stream's
//     segments become one OpSequence and each StreamWait a wait step inside it.
// Errors (unknown op, bad attribute, shape mismatch, a variable read before anything writes
// it, an unknown feed or fetch) name the op and variable and are returned before anything is
// created in the scope.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_INTERPRETER_H_
#define SLUICE_FRAMEWORK_INTERPRETER_INTERPRETER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/device.h"
#include "framework/interpreter/dependency_builder.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"
#include "vm/blob.h"
#include "vm/op_sequence.h"
#include "vm/precomputed_batch.h"
#include "vm/virtual_machine.h"

namespace sluice::framework {

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
  // Fuse same-stream runs into OpSequences. Off: one instruction per op (for comparison).
  bool fuse = true;
  // When every stream is a cpu stream with a worker of its own (checked: no two streams
  // share a ThreadCtx), fuse is on, and the VM has no sync checker or recorder attached:
  // run each stream's work as one sequence with cross-sequence waits (vm/op_sequence.h)
  // instead of one instruction per fused segment and StreamWait. Off: the
  // instruction-level lowering (for comparison).
  bool lane_sequences = true;
  // Testing only: turn cross-stream edges into plain edges with no StreamWait/RecordEvent,
  // so the sync checker can show that the stream analysis is what makes runs correct.
  bool skip_stream_analysis = false;
};

// What Build produced. Value type.
struct LoweringStats {
  int64_t ops = 0;  // op funcs, inserted copies included
  int64_t inserted_copies = 0;
  int64_t instructions = 0;  // batch nodes per run
  int64_t op_sequences = 0;
  int64_t lane_sequences = 0;  // streams run as one sequence each (0: not lane mode)
  int64_t stream_waits = 0;
  int64_t record_events = 0;
  int64_t releases = 0;
  int64_t edges = 0;  // batch edges
  int64_t streams = 0;
  DependencyStats dependencies;
};

// Checks a feed value against its declaration: dtype, shape and byte count. InvalidArgument
// naming the feed. (The executor checks feeds before it builds; StageFeeds on every run.)
absl::Status CheckFeed(absl::string_view name, const HostTensor& value, DataType dtype,
                       const Shape& shape);

// Thread-compatible: the Executor serializes runs of one interpreter. The registry, VM and
// scope must outlive it; no run may be in flight when it is destroyed.
class Interpreter {
 public:
  static absl::StatusOr<std::unique_ptr<Interpreter>> Build(
      const ir::ProgramDesc& program, const ops::OpRegistry* registry, vm::VirtualMachine* vm,
      Scope* scope, const std::vector<std::string>& feed_names,
      const std::vector<std::string>& fetch_names, InterpreterOptions options = {});
  ~Interpreter();

  // --- One run, in this order; no other run of this interpreter may be in flight. ---
  // Checks every feed (a known feed name, dtype and shape as declared; every declared feed
  // given) and copies the bytes into the feed blobs. InvalidArgument naming the feed.
  absl::Status StageFeeds(const std::vector<std::pair<std::string, HostTensor>>& feeds);
  // FailedPrecondition naming the first persistable the program reads before writing (or
  // fetches without writing) that has no value yet (the startup program has not run,
  // nothing was loaded), or whose value an earlier failed run left poisoned (the message
  // carries that failure; re-run the startup program or load the variable to recover).
  absl::Status CheckInitialized() const;
  // True while every persistable this graph was built on is still the variable `scope`
  // (or its ancestors) holds under that name: the graph binds blobs, so a variable replaced
  // or erased since — or another scope at a reused address — needs a new build.
  bool BindingsMatch(const Scope& scope) const;
  // Hands the lowered graph to the VM (clearing the cancel flag).
  absl::Status Submit();
  // After the run completed: the fetched values, in fetch order.
  absl::StatusOr<std::vector<HostTensor>> ReadFetches() const;

  // Request that the submitted run stop early (ops not yet started are skipped).
  void Cancel() { cancel_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancel_.load(std::memory_order_relaxed); }
  // OpCall steps launched since construction.
  int64_t ops_run() const { return ops_run_.load(std::memory_order_relaxed); }

  const LoweringStats& lowering() const { return lowering_; }
  const std::vector<std::string>& feed_names() const { return feed_names_; }
  const std::vector<std::string>& fetch_names() const { return fetch_names_; }
  // The devices whose allocators the run uses (for per-run peak bytes).
  const std::vector<Device>& devices() const { return devices_; }

 private:
  Interpreter() = default;
  struct Builder;
  friend struct Builder;

  vm::VirtualMachine* vm_ = nullptr;
  std::vector<std::string> feed_names_;
  std::vector<std::string> fetch_names_;
  std::vector<vm::BlobRef> feed_blobs_;   // parallel to feed_names_, on cpu
  std::vector<vm::BlobRef> fetch_blobs_;  // parallel to fetch_names_, on cpu
  std::vector<std::pair<std::string, vm::BlobRef>> must_be_initialized_;
  std::vector<std::pair<std::string, vm::BlobRef>> persistables_;  // every one bound
  std::vector<vm::BlobRef> blobs_;  // every blob the graph uses: keeps them alive
  std::vector<std::unique_ptr<vm::OpSequence>> sequences_;
  vm::PrecomputedBatch batch_;
  std::vector<Device> devices_;
  LoweringStats lowering_;
  std::atomic<bool> cancel_{false};
  std::atomic<int64_t> ops_run_{0};
  std::atomic<uint32_t> run_number_{0};  // incremented by each Submit
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_INTERPRETER_H_
