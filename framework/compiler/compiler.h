// Compiler: compiles subgraphs (subgraph.h) for a device type and caches the results
// (docs/design.md, "Subgraph compilation"). Owned by whoever embeds the engine — an
// Executor owns one unless given one to share, a test or a tool makes its own — never a
// process-wide singleton.
//
// The cache key is the subgraph's content (Subgraph::CacheText: ops, constants, input dtypes
// and shapes) and the device type; statistics print its 64-bit content hash. A cold key is
// compiled once even when several threads ask for it at once: the first inserts a pending
// entry and compiles outside the lock, the others wait for it. A failed compile is cached
// too (the same key fails again without retrying) and counted; the caller then runs the ops
// unfused.
//
// Back ends: cpu and sim compile to a TileProgram (cpu/tile_program.h) run as host work on
// the stream (on sim, in the sim stream's order, so multi-stream behaviour of compiled
// subgraphs is tested on sim); cuda generates CUDA C++ (cuda/cuda_source.h), compiles it to
// PTX with NVRTC at compile time and loads it on a device at its first launch there
// (cuda/ptx_subgraph_kernel.h); without the toolkit that compile is Unimplemented and the
// group runs unfused.
//
// Thread-safe.
#ifndef SLUICE_FRAMEWORK_COMPILER_COMPILER_H_
#define SLUICE_FRAMEWORK_COMPILER_COMPILER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/device.h"
#include "framework/compiler/subgraph.h"
#include "vm/kernel.h"

namespace sluice::framework::compiler {

namespace cpu {
class TileProgram;
}  // namespace cpu

// What a back end produced: a tile program (cpu, sim) or PTX and its entry point (cuda).
struct CompiledCode {
  std::unique_ptr<const cpu::TileProgram> program;
  std::string ptx;
  std::string entry;
};

// A compiled subgraph: immutable; shared by every graph that uses it and by the cache.
class CompiledSubgraph {
 public:
  CompiledSubgraph(Subgraph graph, DeviceType device, uint64_t hash, int64_t compile_ns,
                   CompiledCode code);
  ~CompiledSubgraph();

  const Subgraph& graph() const { return graph_; }
  DeviceType device_type() const { return device_; }
  uint64_t content_hash() const { return hash_; }
  int64_t compile_ns() const { return compile_ns_; }
  // The kernel that runs it: inputs and outputs as the subgraph's, in order.
  const vm::OpKernel* kernel() const { return kernel_.get(); }
  // The cpu/sim back end's program (null for other devices).
  const cpu::TileProgram* tile_program() const { return program_.get(); }
  // The cuda back end's PTX (empty for other devices).
  const std::string& ptx() const { return ptx_; }

 private:
  const Subgraph graph_;
  const DeviceType device_;
  const uint64_t hash_;
  const int64_t compile_ns_;
  const std::unique_ptr<const cpu::TileProgram> program_;
  const std::string ptx_;
  std::unique_ptr<const vm::OpKernel> kernel_;
};

struct CompilerStats {
  int64_t hits = 0;        // lookups that found a compiled (or failed) entry
  int64_t misses = 0;      // lookups that compiled
  int64_t failures = 0;    // compiles that failed (the group runs unfused)
  int64_t compile_ns = 0;  // total time compiling
  int64_t entries = 0;     // keys cached
};

// A cache key: the subgraph's CacheText and the device type, with its content hash. Made once
// per subgraph (MakeKey), so that a cache hit costs a hash-map lookup.
struct CompileKey {
  std::string text;  // CacheText + "@" + device type name
  uint64_t content_hash = 0;
  DeviceType device = DeviceType::kCpu;
};

// What one Compile call did.
struct CompileCall {
  bool hit = false;        // found in the cache (compiled, or being compiled, by another call)
  int64_t compile_ns = 0;  // this call's compile time (0 on a hit)
};

struct CompilerOptions {
  // A subgraph with more nodes fails to compile (ResourceExhausted) and runs unfused: a
  // bound on one kernel's size (generated source, registers, compile time).
  int max_nodes = 256;
};

class Compiler {
 public:
  static CompileKey MakeKey(const Subgraph& graph, DeviceType device);
  explicit Compiler(CompilerOptions options = {}) : options_(options) {}
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  // The compiled form of `graph` for `device`, from the cache or compiled now (then cached).
  // Errors: InvalidArgument for an invalid subgraph, Unimplemented for an op or device the
  // back ends do not cover, ResourceExhausted past max_nodes, Internal should a back end
  // throw; cached like successes. `call` (optional): what this call did, for per-build
  // statistics that other users of a shared compiler do not disturb.
  absl::StatusOr<std::shared_ptr<const CompiledSubgraph>> Compile(const Subgraph& graph,
                                                                  DeviceType device,
                                                                  CompileCall* call = nullptr);
  // The same with a key made by MakeKey(graph, device).
  absl::StatusOr<std::shared_ptr<const CompiledSubgraph>> Compile(const CompileKey& key,
                                                                  const Subgraph& graph,
                                                                  CompileCall* call = nullptr);
  CompilerStats stats() const;
  // Every subgraph compiled successfully so far (finished entries), in no particular order.
  std::vector<std::shared_ptr<const CompiledSubgraph>> Compiled() const;

 private:
  struct Entry {
    absl::Notification done;
    absl::StatusOr<std::shared_ptr<const CompiledSubgraph>> result;  // written before done
  };
  absl::StatusOr<std::shared_ptr<const CompiledSubgraph>> Build(const Subgraph& graph,
                                                                DeviceType device,
                                                                uint64_t hash) const;

  const CompilerOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> cache_ ABSL_GUARDED_BY(mu_);
  // Relaxed counters: statistics only.
  std::atomic<int64_t> hits_{0};
  std::atomic<int64_t> misses_{0};
  std::atomic<int64_t> failures_{0};
  std::atomic<int64_t> compile_ns_{0};
};

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_COMPILER_H_
