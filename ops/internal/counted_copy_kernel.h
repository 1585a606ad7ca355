// CountedCopyKernel: the kernel of a copy whose bytes cross between host memory and a device
// (memcpy_h2d, memcpy_d2h), wrapped so that each launch counts in the VM's copy counters
// (KernelContext::CountHostCopy; VmStats::host_to_device_copies / device_to_host_copies).
// The host (cpu, sim) and cuda registrations wrap their copy kernels in it, so the count
// does not depend on the provider, and I/O binding can prove that a run copied nothing
// through the host.
#ifndef SLUICE_OPS_INTERNAL_COUNTED_COPY_KERNEL_H_
#define SLUICE_OPS_INTERNAL_COUNTED_COPY_KERNEL_H_

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "vm/kernel.h"

namespace sluice::ops::internal {

// Thread-safe as the wrapped kernel is (no state of its own).
class CountedCopyKernel final : public vm::OpKernel {
 public:
  // `to_device`: host bytes into a device blob (memcpy_h2d); else the reverse.
  CountedCopyKernel(std::shared_ptr<const vm::OpKernel> copy, bool to_device)
      : copy_(std::move(copy)), to_device_(to_device) {}

  absl::string_view name() const override { return copy_->name(); }
  // Counts a launch the wrapped kernel accepted (one that refused its operands copied
  // nothing), then returns what it returned.
  absl::Status Launch(vm::KernelContext& ctx) const override {
    absl::Status status = copy_->Launch(ctx);
    if (status.ok()) ctx.CountHostCopy(to_device_);
    return status;
  }
  bool handles_poison() const override { return copy_->handles_poison(); }
  bool checks_own_steps() const override { return copy_->checks_own_steps(); }
  bool logs_own_steps() const override { return copy_->logs_own_steps(); }

 private:
  const std::shared_ptr<const vm::OpKernel> copy_;
  const bool to_device_;
};

// `copy` wrapped, for the registry.
inline std::shared_ptr<const vm::OpKernel> CountHostCopies(std::shared_ptr<const vm::OpKernel> copy,
                                                           bool to_device) {
  return std::make_shared<CountedCopyKernel>(std::move(copy), to_device);
}

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_COUNTED_COPY_KERNEL_H_
