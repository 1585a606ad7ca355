#include "ops/kernel_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::ops {

absl::Status KernelRegistry::Register(std::unique_ptr<vm::OpKernel> kernel) {
  std::string name(kernel->name());
  if (kernels_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("kernel '", name, "' is already registered"));
  }
  kernels_.emplace(std::move(name), std::move(kernel));
  return absl::OkStatus();
}

absl::StatusOr<const vm::OpKernel*> KernelRegistry::Find(absl::string_view name) const {
  auto it = kernels_.find(name);
  if (it == kernels_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no kernel '", name, "'; registered: ", absl::StrJoin(names(), ", ")));
  }
  return it->second.get();
}

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> result;
  for (const auto& [name, kernel] : kernels_) result.push_back(name);
  std::sort(result.begin(), result.end());
  return result;
}

}  // namespace sluice::ops
