// PtxKernel: a kernel compiled at run time (PTX from ep/cuda/ptx_compiler.h), loaded with the
// CUDA driver API into a device's primary context (the context the CUDA runtime and the cuda
// provider use, so its launches go on the provider's streams) and launched on a stream.
//
// The driver library (libcuda) ships with the GPU driver, not with the toolkit, so Sluice does
// not link it: its entry points are looked up through the CUDA runtime when a kernel is loaded,
// and a machine without a driver or a GPU gets FailedPrecondition instead of a binary that does
// not start. Without the CUDA toolkit LoadPtxKernel returns Unimplemented("built without
// CUDA").
#ifndef SLUICE_EP_CUDA_PTX_KERNEL_H_
#define SLUICE_EP_CUDA_PTX_KERNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sluice::ep {

// One entry point of a loaded PTX module; owns the module and a reference to the primary
// context. Thread-safe: Launch may be called from any thread at once.
class PtxKernel {
 public:
  virtual ~PtxKernel() = default;

  // The entry point's name (the extern "C" __global__ function).
  virtual const std::string& entry() const = 0;

  // Enqueues one launch of `grid_size` blocks of `block_size` threads (one-dimensional) on
  // `stream`: a cudaStream_t of this kernel's device, as ep::Stream::native_handle() returns
  // for a cuda stream, or nullptr for the default stream. `args` holds a pointer to each
  // argument in the kernel's parameter order (cuLaunchKernel's kernelParams); their values are
  // copied when this returns, so they may be temporaries. InvalidArgument for a zero size, the
  // driver's error (Internal) otherwise; a fault inside the kernel surfaces at the stream's
  // next synchronization, as for any kernel.
  virtual absl::Status Launch(void* stream, unsigned grid_size, unsigned block_size,
                              absl::Span<void* const> args) const = 0;

 protected:
  PtxKernel() = default;
};

// Loads `ptx` into cuda:`device_index`'s primary context and looks up `entry`.
// Errors: FailedPrecondition when there is no CUDA driver, no GPU or no such device;
// InvalidArgument when the driver rejects the PTX; NotFound when it has no `entry`; Internal
// for other driver failures; Unimplemented without CUDA.
// Destroying the kernel unloads the module: every launch of it must have completed by then
// (synchronize the streams it was launched on).
absl::StatusOr<std::unique_ptr<PtxKernel>> LoadPtxKernel(int device_index, const std::string& ptx,
                                                         const std::string& entry);

}  // namespace sluice::ep

#endif  // SLUICE_EP_CUDA_PTX_KERNEL_H_
