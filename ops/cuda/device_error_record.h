// DeviceErrorRecord: how a CUDA kernel that meets bad data it cannot refuse before it runs (a
// zero integer divisor, an index out of range) makes it an error of the run, as the host
// kernels do from their work.
// The kernel writes two 64-bit words of device memory (set to all ones first); after it, the
// record is copied to pinned host memory on the same stream and a host task, in stream order,
// turns a written record into an error naming the op (the stream's error: VirtualMachine::
// Sync reports it). The outputs are not poisoned, unlike the host's: later ops consume them.
// softmax_with_cross_entropy's label check (ops/cuda/nn_op_kernels.cc) works the same way.
//
// Host-only. Move-only; one record serves one launch, from the VM worker that runs it.
#ifndef SLUICE_OPS_CUDA_DEVICE_ERROR_RECORD_H_
#define SLUICE_OPS_CUDA_DEVICE_ERROR_RECORD_H_

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/cuda/cuda_kernel.h"

namespace sluice::ops::internal {

class DeviceErrorRecord {
 public:
  // Word 0 as the kernels leave it when they found nothing.
  static constexpr uint64_t kNone = ~uint64_t{0};

  // Two device words, set to all ones on the kernel's stream.
  static absl::StatusOr<DeviceErrorRecord> Create(absl::string_view op, const CudaArgs& args);

  DeviceErrorRecord(DeviceErrorRecord&&) = default;
  DeviceErrorRecord& operator=(DeviceErrorRecord&&) = delete;

  // The two device words the kernels write.
  uint64_t* words() const { return words_.as<uint64_t>(); }

  // After the kernels that write the record: enqueues its copy to pinned host memory and a
  // host task that returns `describe(word0, word1)` when word 0 is not kNone, else OK.
  absl::Status ReportAfter(absl::string_view op, const CudaArgs& args,
                           absl::AnyInvocable<absl::Status(uint64_t, uint64_t) &&> describe);

 private:
  explicit DeviceErrorRecord(Scratch words) : words_(std::move(words)) {}
  Scratch words_;
};

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_CUDA_DEVICE_ERROR_RECORD_H_
