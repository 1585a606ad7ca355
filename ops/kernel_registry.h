// KernelRegistry: kernels by op name, owned by whoever builds the registry (a Runtime-level
// object in the framework, the CLI, a test). No global registry and no static
// registration: kernels are added by explicit calls such as RegisterStressKernels(&registry).
#ifndef SLUICE_OPS_KERNEL_REGISTRY_H_
#define SLUICE_OPS_KERNEL_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "vm/kernel.h"

namespace sluice::ops {

// Thread-compatible while kernels are registered; thread-safe for lookups afterwards.
class KernelRegistry {
 public:
  KernelRegistry() = default;
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // AlreadyExists when a kernel of that name is registered.
  absl::Status Register(std::unique_ptr<vm::OpKernel> kernel);
  // NotFound naming the op and listing the registered ones.
  absl::StatusOr<const vm::OpKernel*> Find(absl::string_view name) const;
  std::vector<std::string> names() const;

 private:
  absl::flat_hash_map<std::string, std::unique_ptr<vm::OpKernel>> kernels_;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_KERNEL_REGISTRY_H_
