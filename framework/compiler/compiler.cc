#include "framework/compiler/compiler.h"

#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ep/cuda/ptx_compiler.h"
#include "framework/compiler/compiled_kernel.h"
#include "framework/compiler/cpu/tile_program.h"
#include "framework/compiler/cuda/cuda_source.h"
#include "framework/compiler/cuda/ptx_subgraph_kernel.h"

namespace sluice::framework::compiler {

CompiledSubgraph::CompiledSubgraph(Subgraph graph, DeviceType device, uint64_t hash,
                                   int64_t compile_ns, CompiledCode code)
    : graph_(std::move(graph)),
      device_(device),
      hash_(hash),
      compile_ns_(compile_ns),
      program_(std::move(code.program)),
      ptx_(std::move(code.ptx)) {
  if (program_ != nullptr) {
    kernel_ = std::make_unique<TileProgramKernel>(&graph_, program_.get());
  } else if (!ptx_.empty()) {
    kernel_ = std::make_unique<PtxSubgraphKernel>(&graph_, ptx_, std::move(code.entry));
  }
}

CompiledSubgraph::~CompiledSubgraph() = default;

absl::StatusOr<std::shared_ptr<const CompiledSubgraph>> Compiler::Build(const Subgraph& graph,
                                                                        DeviceType device,
                                                                        uint64_t hash) const {
  SLUICE_RETURN_IF_ERROR(graph.Validate());
  if (static_cast<int>(graph.nodes.size()) > options_.max_nodes) {
    return absl::ResourceExhaustedError(absl::StrCat(graph.KernelName(), ": ", graph.nodes.size(),
                                                     " nodes, more than the compiler's limit of ",
                                                     options_.max_nodes));
  }
  const auto start = std::chrono::steady_clock::now();
  CompiledCode code;
  switch (device) {
    case DeviceType::kCpu:
    case DeviceType::kSim: {
      SLUICE_ASSIGN_OR_RETURN(cpu::TileProgram compiled, cpu::TileProgram::Compile(graph));
      code.program = std::make_unique<const cpu::TileProgram>(std::move(compiled));
      break;
    }
    case DeviceType::kCuda: {
      SLUICE_ASSIGN_OR_RETURN(CudaSource source, GenerateCudaSource(graph));
      SLUICE_ASSIGN_OR_RETURN(code.ptx, ep::CompileToPtx(source.source, source.entry + ".cu"));
      code.entry = std::move(source.entry);
      break;
    }
    default:
      return absl::UnimplementedError(
          absl::StrCat("no subgraph compiler back end for ", DeviceTypeName(device), " devices"));
  }
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  return std::make_shared<const CompiledSubgraph>(graph, device, hash, ns, std::move(code));
}

CompileKey Compiler::MakeKey(const Subgraph& graph, DeviceType device) {
  CompileKey key;
  key.text = graph.CacheText();
  key.content_hash = ContentHash(key.text);
  absl::StrAppend(&key.text, "@", DeviceTypeName(device));
  key.device = device;
  return key;
}

absl::StatusOr<std::shared_ptr<const CompiledSubgraph>> Compiler::Compile(const Subgraph& graph,
                                                                          DeviceType device,
                                                                          CompileCall* call) {
  return Compile(MakeKey(graph, device), graph, call);
}

absl::StatusOr<std::shared_ptr<const CompiledSubgraph>> Compiler::Compile(const CompileKey& key,
                                                                          const Subgraph& graph,
                                                                          CompileCall* call) {
  const DeviceType device = key.device;
  const uint64_t hash = key.content_hash;
  std::shared_ptr<Entry> entry;
  bool compile = false;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Entry>& slot = cache_[key.text];
    if (slot == nullptr) {
      slot = std::make_shared<Entry>();
      compile = true;
    }
    entry = slot;
  }
  if (call != nullptr) *call = CompileCall{!compile, 0};
  if (!compile) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    entry->done.WaitForNotification();
    return entry->result;
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  const auto start = std::chrono::steady_clock::now();
  // Waiters block until Notify: nothing thrown may skip it.
  try {
    entry->result = Build(graph, device, hash);
  } catch (const std::exception& e) {
    entry->result = absl::InternalError(
        absl::StrCat(graph.KernelName(), ": compile failed with an exception: ", e.what()));
  } catch (...) {
    entry->result =
        absl::InternalError(absl::StrCat(graph.KernelName(), ": compile failed with an exception"));
  }
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  compile_ns_.fetch_add(ns, std::memory_order_relaxed);
  if (call != nullptr) call->compile_ns = ns;
  if (!entry->result.ok()) failures_.fetch_add(1, std::memory_order_relaxed);
  entry->done.Notify();
  return entry->result;
}

std::vector<std::shared_ptr<const CompiledSubgraph>> Compiler::Compiled() const {
  std::vector<std::shared_ptr<const CompiledSubgraph>> compiled;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, entry] : cache_) {
    if (entry->done.HasBeenNotified() && entry->result.ok()) compiled.push_back(*entry->result);
  }
  return compiled;
}

CompilerStats Compiler::stats() const {
  CompilerStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.failures = failures_.load(std::memory_order_relaxed);
  s.compile_ns = compile_ns_.load(std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  s.entries = static_cast<int64_t>(cache_.size());
  return s;
}

}  // namespace sluice::framework::compiler
