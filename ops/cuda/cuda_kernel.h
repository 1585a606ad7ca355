// CudaKernel: the base of the ops' CUDA kernels (ops/cuda/*_op_kernels.cc). Launch runs on the
// VM worker: it views the operands, makes the stream's device current and calls Run, which
// validates the operands as the op's host kernel does (InvalidArgument naming the op and the
// operand) and enqueues the work on the stream's cudaStream_t through the launchers of
// ops/cuda/cuda_launch.h. Nothing here waits for the device. Also the helpers the families
// share: operand checks, the status of a failed launch, stream-ordered scratch memory, and
// MakeIndexPlan, which builds the loop nests of the map and reduce kernels.
//
// Host-only (abseil, vm): the .cu files never include it.
#ifndef SLUICE_OPS_CUDA_CUDA_KERNEL_H_
#define SLUICE_OPS_CUDA_CUDA_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "ep/stream.h"
#include "ops/cpu/host_kernel.h"
#include "ops/cuda/cuda_launch.h"
#include "ops/op_registry.h"
#include "vm/attrs.h"
#include "vm/kernel.h"

namespace sluice::ops::internal {

// The operands of one launch. Views are HostTensor (ops/cpu/host_kernel.h), a plain view
// type; here `data` is device memory, except memcpy_h2d's input and memcpy_d2h's output,
// which are host memory. Valid during Run; the engine keeps the storage alive until the
// instruction retires.
struct CudaArgs {
  absl::InlinedVector<HostTensor, 4> inputs;
  absl::InlinedVector<HostTensor, 2> outputs;
  const vm::AttrMap* attrs = nullptr;
  ep::Stream* stream = nullptr;
  cudaStream_t cuda_stream = nullptr;
};

// Thread-safe (no mutable state).
class CudaKernel : public vm::OpKernel {
 public:
  explicit CudaKernel(std::string op) : op_(std::move(op)) {}
  absl::string_view name() const final { return op_; }
  // FailedPrecondition for a released operand or a stream that is not a CUDA stream;
  // Internal when the device cannot be made current; else what Run returns.
  absl::Status Launch(vm::KernelContext& ctx) const final;

 protected:
  // Validates the operands and enqueues the work (nothing for empty tensors).
  virtual absl::Status Run(const CudaArgs& args) const = 0;

 private:
  const std::string op_;
};

// A CudaKernel from a function: `run(const CudaArgs&) -> absl::Status` is called as Run.
template <typename Fn>
class FnCudaKernel final : public CudaKernel {
 public:
  FnCudaKernel(std::string op, Fn run) : CudaKernel(std::move(op)), run_(std::move(run)) {}

 protected:
  absl::Status Run(const CudaArgs& args) const override { return run_(args); }

 private:
  Fn run_;
};

template <typename Fn>
std::shared_ptr<const vm::OpKernel> MakeCudaKernel(std::string op, Fn run) {
  return std::make_shared<FnCudaKernel<Fn>>(std::move(op), std::move(run));
}

// Registers make(TypeTag<T>{}) (a shared_ptr<const vm::OpKernel>) as the cuda kernel of `op`
// for each T in Ts.
template <typename... Ts, typename Make>
absl::Status RegisterCudaKernelsFor(OpRegistry* registry, absl::string_view op, Make make) {
  absl::Status status;
  (
      [&] {
        if (!status.ok()) return;
        status = registry->RegisterKernel(op, {DeviceType::kCuda}, DataTypeOf<Ts>(),
                                          make(TypeTag<Ts>{}));
      }(),
      ...);
  return status;
}

// OK for cudaSuccess, else Internal "op 'add': <what> failed: <CUDA's message>".
absl::Status CudaStatus(absl::string_view op, cudaError_t error,
                        absl::string_view what = "CUDA kernel launch");
// Operand counts (-1: one or more).
absl::Status CheckCounts(absl::string_view op, const CudaArgs& args, int inputs, int outputs);
// One operand's dtype; every operand's dtype.
absl::Status CheckDtype(absl::string_view op, const HostTensor& t, DataType dtype,
                        absl::string_view role, int index);
absl::Status CheckDtypes(absl::string_view op, const CudaArgs& args, DataType dtype);
// A byte copy of `bytes` on the kernel's stream (nothing for 0 bytes or dst == src).
absl::Status CopyAsync(absl::string_view op, const CudaArgs& args, void* dst, const void* src,
                       size_t bytes, cudaMemcpyKind kind = cudaMemcpyDeviceToDevice);

// Device memory for intermediate results, from the stream's device allocator for use on the
// kernel's stream. Returned when the Scratch is destroyed, which may happen as soon as the
// work using it is enqueued: the allocator orders reuse after the stream's earlier work.
// Move-only.
class Scratch {
 public:
  static absl::StatusOr<Scratch> Allocate(absl::string_view op, const CudaArgs& args, size_t bytes);
  Scratch(Scratch&& other) noexcept : stream_(other.stream_), ptr_(other.ptr_) {
    other.ptr_ = nullptr;
  }
  Scratch& operator=(Scratch&&) = delete;
  ~Scratch();

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  Scratch(ep::Stream* stream, void* ptr) : stream_(stream), ptr_(ptr) {}
  ep::Stream* stream_;
  void* ptr_;
};

// One dimension of the index space of a map or reduce kernel: its size, whether it is
// summed away, and each operand's stride along it (in elements).
struct PlanDim {
  int64_t size = 1;
  bool reduced = false;
  int64_t strides[gpu::kMaxOperands] = {0, 0, 0};
};

// The IndexPlan of `dims` (outermost first): unit dims dropped, then kept and reduced dims
// taken in order, each group merging neighbours where every operand's strides allow. The
// output is contiguous over the kept dims. InvalidArgument naming the op when a group keeps
// more than gpu::kMaxDims dims.
absl::StatusOr<gpu::IndexPlan> MakeIndexPlan(absl::string_view op, absl::Span<const PlanDim> dims,
                                             int operands);

// The families' registrations (ops/cuda/*_op_kernels.cc); RegisterCudaKernels calls them all.
absl::Status RegisterBasicCudaKernels(OpRegistry* registry);
absl::Status RegisterElementwiseCudaKernels(OpRegistry* registry);
absl::Status RegisterNnCudaKernels(OpRegistry* registry);
absl::Status RegisterShapeAndOptimizerCudaKernels(OpRegistry* registry);
absl::Status RegisterCompareCudaKernels(OpRegistry* registry);
absl::Status RegisterRowCudaKernels(OpRegistry* registry);
absl::Status RegisterNormCudaKernels(OpRegistry* registry);
// The i32 and i64 add, sub, mul, div, neg, abs and relu (ops/cuda/integer_arith_op_kernels.cc);
// RegisterElementwiseCudaKernels calls it.
absl::Status RegisterIntegerArithCudaKernels(OpRegistry* registry);
absl::Status RegisterIndexCudaKernels(OpRegistry* registry);
absl::Status RegisterConvCudaKernels(OpRegistry* registry);
absl::Status RegisterUnaryMathCudaKernels(OpRegistry* registry);

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_CUDA_CUDA_KERNEL_H_
