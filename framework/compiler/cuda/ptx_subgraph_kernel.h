// The kernel that runs a compiled subgraph on a cuda device: the generated source
// (cuda_source.h) compiled to PTX once at compile time (ep/cuda/ptx_compiler.h), loaded into
// a device's context at its first launch there (ep/cuda/ptx_kernel.h), and launched on the
// instruction's stream with the operands' device pointers. Checks operands as the cpu kernel
// does (counts, dtypes, shapes). Thread-safe: the per-device modules are loaded under a lock.
#ifndef SLUICE_FRAMEWORK_COMPILER_CUDA_PTX_SUBGRAPH_KERNEL_H_
#define SLUICE_FRAMEWORK_COMPILER_CUDA_PTX_SUBGRAPH_KERNEL_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "ep/cuda/ptx_kernel.h"
#include "framework/compiler/subgraph.h"
#include "vm/kernel.h"

namespace sluice::framework::compiler {

class PtxSubgraphKernel final : public vm::OpKernel {
 public:
  // `graph` outlives the kernel.
  PtxSubgraphKernel(const Subgraph* graph, std::string ptx, std::string entry)
      : graph_(graph), name_(graph->KernelName()), ptx_(std::move(ptx)), entry_(std::move(entry)) {}
  absl::string_view name() const override { return name_; }
  absl::Status Launch(vm::KernelContext& ctx) const override;
  const std::string& ptx() const { return ptx_; }

 private:
  absl::StatusOr<const ep::PtxKernel*> LoadedOn(int device_index) const;

  const Subgraph* const graph_;
  const std::string name_;
  const std::string ptx_;
  const std::string entry_;
  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<int, std::unique_ptr<ep::PtxKernel>> loaded_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_CUDA_PTX_SUBGRAPH_KERNEL_H_
