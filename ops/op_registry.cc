#include "ops/op_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"

namespace sluice::ops {

absl::Status OpRegistry::RegisterSchema(OpSchema schema) {
  SLUICE_RETURN_IF_ERROR(schema.Validate());
  const std::string name = schema.name();
  auto [it, inserted] = schemas_.try_emplace(name, nullptr);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("op '", name, "' is already registered"));
  }
  it->second = std::make_unique<OpSchema>(std::move(schema));
  return absl::OkStatus();
}

absl::Status OpRegistry::RegisterKernel(absl::string_view op, DeviceType device, DataType dtype,
                                        std::unique_ptr<vm::OpKernel> kernel) {
  return RegisterKernel(op, std::vector<DeviceType>{device}, dtype,
                        std::shared_ptr<const vm::OpKernel>(std::move(kernel)));
}

absl::Status OpRegistry::RegisterKernel(absl::string_view op, std::vector<DeviceType> devices,
                                        DataType dtype,
                                        std::shared_ptr<const vm::OpKernel> kernel) {
  if (kernel == nullptr) return absl::InvalidArgumentError("RegisterKernel: null kernel");
  if (!schemas_.contains(op)) {
    return absl::NotFoundError(absl::StrCat("kernel for op '", op, "', which has no schema"));
  }
  if (kernel->name() != op) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel named '", kernel->name(), "' registered for op '", op, "'"));
  }
  for (DeviceType device : devices) {
    KernelKey key(std::string(op), device, dtype);
    if (kernels_.contains(key)) {
      return absl::AlreadyExistsError(absl::StrCat("op '", op, "' already has a ",
                                                   DeviceTypeName(device), " ", DataTypeName(dtype),
                                                   " kernel"));
    }
  }
  // The kernel carries its op's in-place contract (vm::InPlaceContract) for the sync
  // checker and the sim's poisoning. Set here, before any lookup can hand the kernel out;
  // the object was made mutable by whoever registered it (the const is the registry's
  // promise to lookups), and a kernel serves one op, so a second registration sets the same.
  const_cast<vm::OpKernel*>(kernel.get())
      ->set_in_place(schemas_.find(op)->second->InPlaceContractOf());
  for (DeviceType device : devices) {
    kernels_.emplace(KernelKey(std::string(op), device, dtype), kernel);
  }
  return absl::OkStatus();
}

absl::StatusOr<const OpSchema*> OpRegistry::FindSchema(absl::string_view op) const {
  auto it = schemas_.find(op);
  if (it == schemas_.end()) return absl::NotFoundError(absl::StrCat("unknown op '", op, "'"));
  return it->second.get();
}

absl::StatusOr<const vm::OpKernel*> OpRegistry::FindKernel(absl::string_view op, DeviceType device,
                                                           DataType dtype) const {
  auto it = kernels_.find(KernelKey(std::string(op), device, dtype));
  if (it != kernels_.end()) return it->second.get();
  if (!schemas_.contains(op)) return absl::NotFoundError(absl::StrCat("unknown op '", op, "'"));
  std::vector<std::string> have;
  for (const auto& [key, kernel] : kernels_) {
    if (std::get<0>(key) == op) {
      have.push_back(
          absl::StrCat(DeviceTypeName(std::get<1>(key)), "/", DataTypeName(std::get<2>(key))));
    }
  }
  std::sort(have.begin(), have.end());
  return absl::NotFoundError(
      absl::StrCat("op '", op, "' has no ", DeviceTypeName(device), " ", DataTypeName(dtype),
                   " kernel (it has: ", have.empty() ? "none" : absl::StrJoin(have, ", "), ")"));
}

bool OpRegistry::HasKernel(absl::string_view op, DeviceType device, DataType dtype) const {
  return kernels_.contains(KernelKey(std::string(op), device, dtype));
}

std::vector<std::string> OpRegistry::op_names() const {
  std::vector<std::string> names;
  for (const auto& [name, schema] : schemas_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace sluice::ops
