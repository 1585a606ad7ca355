// OpRegistry: op schemas by name and kernels by (op, device type, dtype). Owned by whoever
// embeds Sluice next to its Runtime (the framework's eager context, the CLI, a test); no
// global registry and no static registration — RegisterStandardOps(&registry) adds the
// built-in set explicitly.
//
// The dtype a kernel is chosen by is its op's *key dtype*: the dtype of the first input, or
// of the first output for ops without inputs (fill_constant, the random ops). The replayer
// uses the same rule (vm/replayer.h).
#ifndef SLUICE_OPS_OP_REGISTRY_H_
#define SLUICE_OPS_OP_REGISTRY_H_

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/device.h"
#include "ops/op_schema.h"
#include "vm/kernel.h"

namespace sluice::ops {

// Thread-compatible while registering; thread-safe for lookups afterwards (the usual life:
// register everything at start-up, then only look up).
class OpRegistry {
 public:
  OpRegistry() = default;
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;

  // AlreadyExists for a second schema of one name; the schema's Validate() error.
  absl::Status RegisterSchema(OpSchema schema);
  // NotFound when the op has no schema; AlreadyExists for a second kernel of one key. The
  // kernel's name() must be the op's name (InvalidArgument otherwise): recordings name
  // kernels by it.
  absl::Status RegisterKernel(absl::string_view op, DeviceType device, DataType dtype,
                              std::unique_ptr<vm::OpKernel> kernel);
  // One kernel object serving several keys (cpu and sim share host kernels).
  absl::Status RegisterKernel(absl::string_view op, std::vector<DeviceType> devices, DataType dtype,
                              std::shared_ptr<const vm::OpKernel> kernel);

  // NotFound naming the op (and suggesting nothing: the list of ops is long).
  absl::StatusOr<const OpSchema*> FindSchema(absl::string_view op) const;
  // NotFound naming op, device type and dtype, and listing the (device, dtype) pairs the op
  // does have kernels for.
  absl::StatusOr<const vm::OpKernel*> FindKernel(absl::string_view op, DeviceType device,
                                                 DataType dtype) const;
  bool HasKernel(absl::string_view op, DeviceType device, DataType dtype) const;

  std::vector<std::string> op_names() const;  // sorted
  int64_t kernel_count() const { return static_cast<int64_t>(kernels_.size()); }

 private:
  using KernelKey = std::tuple<std::string, DeviceType, DataType>;
  absl::flat_hash_map<std::string, std::unique_ptr<OpSchema>> schemas_;
  absl::flat_hash_map<KernelKey, std::shared_ptr<const vm::OpKernel>> kernels_;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_OP_REGISTRY_H_
