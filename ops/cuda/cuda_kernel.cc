// CudaKernel's launch path, the helpers shared by the CUDA kernels of every op family, and
// RegisterCudaKernels, the entry point RegisterStandardOps calls (ops/internal/op_families.h).
#include "ops/cuda/cuda_kernel.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/tensor_storage.h"
#include "ep/device.h"
#include "ops/internal/op_families.h"

namespace sluice::ops::internal {

absl::Status CudaKernel::Launch(vm::KernelContext& ctx) const {
  CudaArgs args;
  args.attrs = &ctx.attrs();
  args.stream = ctx.stream();
  const sluice::Device device = args.stream->device()->id();
  args.cuda_stream = static_cast<cudaStream_t>(args.stream->native_handle());
  if (device.type() != DeviceType::kCuda || args.cuda_stream == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("op '", op_, "': the CUDA kernel cannot run on stream ",
                     args.stream->key().ToString(), ", which is not a CUDA stream"));
  }
  int i = 0;
  for (const vm::Blob* blob : ctx.inputs()) {
    SLUICE_ASSIGN_OR_RETURN(HostTensor t, ViewBlob(blob, "input", i++, op_));
    args.inputs.push_back(t);
  }
  i = 0;
  for (const vm::Blob* blob : ctx.outputs()) {
    SLUICE_ASSIGN_OR_RETURN(HostTensor t, ViewBlob(blob, "output", i++, op_));
    args.outputs.push_back(t);
  }
  // VM workers serve streams of several devices: launch on the stream's own.
  SLUICE_RETURN_IF_ERROR(CudaStatus(op_, cudaSetDevice(device.index()),
                                    absl::StrCat("cudaSetDevice(", device.index(), ")")));
  return Run(args);
}

absl::Status CudaStatus(absl::string_view op, cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("op '", op, "': ", what, " failed: ", cudaGetErrorString(error)));
}

absl::Status CheckCounts(absl::string_view op, const CudaArgs& args, int inputs, int outputs) {
  const int n_in = static_cast<int>(args.inputs.size());
  const int n_out = static_cast<int>(args.outputs.size());
  const bool in_ok = inputs < 0 ? n_in >= 1 : n_in == inputs;
  const bool out_ok = outputs < 0 ? n_out >= 1 : n_out == outputs;
  if (in_ok && out_ok) return absl::OkStatus();
  auto want = [](int n) { return n < 0 ? std::string("one or more") : absl::StrCat(n); };
  return OpError(op, absl::StrCat("takes ", want(inputs), " input(s) and ", want(outputs),
                                  " output(s), got ", n_in, " and ", n_out));
}

absl::Status CheckDtype(absl::string_view op, const HostTensor& t, DataType dtype,
                        absl::string_view role, int index) {
  if (t.dtype == dtype) return absl::OkStatus();
  return OpError(op, absl::StrCat(t.Describe(role, index), " must be ", DataTypeName(dtype)));
}

absl::Status CheckDtypes(absl::string_view op, const CudaArgs& args, DataType dtype) {
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    SLUICE_RETURN_IF_ERROR(CheckDtype(op, args.inputs[i], dtype, "input", static_cast<int>(i)));
  }
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    SLUICE_RETURN_IF_ERROR(CheckDtype(op, args.outputs[i], dtype, "output", static_cast<int>(i)));
  }
  return absl::OkStatus();
}

absl::Status CopyAsync(absl::string_view op, const CudaArgs& args, void* dst, const void* src,
                       size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0 || dst == src) return absl::OkStatus();
  return CudaStatus(op, cudaMemcpyAsync(dst, src, bytes, kind, args.cuda_stream),
                    "cudaMemcpyAsync");
}

absl::StatusOr<Scratch> Scratch::Allocate(absl::string_view op, const CudaArgs& args,
                                          size_t bytes) {
  absl::StatusOr<void*> ptr = args.stream->device()->allocator().Allocate(bytes, args.stream->id());
  if (!ptr.ok()) {
    return absl::Status(ptr.status().code(),
                        absl::StrCat("op '", op, "': scratch memory: ", ptr.status().message()));
  }
  return Scratch(args.stream, *ptr);
}

Scratch::~Scratch() {
  if (ptr_ != nullptr) stream_->device()->allocator().Deallocate(ptr_);
}

absl::StatusOr<gpu::IndexPlan> MakeIndexPlan(absl::string_view op, absl::Span<const PlanDim> dims,
                                             int operands) {
  // Merges `dim` into the innermost dim of `group` when every operand allows, else appends.
  auto add = [operands](absl::InlinedVector<PlanDim, 8>& group, const PlanDim& dim) {
    if (!group.empty()) {
      PlanDim& last = group.back();
      bool mergeable = true;
      for (int k = 0; k < operands; ++k) {
        mergeable = mergeable && last.strides[k] == dim.strides[k] * dim.size;
      }
      if (mergeable) {
        last.size *= dim.size;
        for (int k = 0; k < operands; ++k) last.strides[k] = dim.strides[k];
        return;
      }
    }
    group.push_back(dim);
  };
  absl::InlinedVector<PlanDim, 8> kept, reduced;
  for (const PlanDim& dim : dims) {
    if (dim.size == 1) continue;
    add(dim.reduced ? reduced : kept, dim);
  }
  if (kept.size() > gpu::kMaxDims || reduced.size() > gpu::kMaxDims) {
    return OpError(
        op, absl::StrCat("the operands' layout needs ", kept.size(), " kept and ", reduced.size(),
                         " reduced dims after merging; the CUDA "
                         "kernels handle at most ",
                         gpu::kMaxDims, " of each"));
  }
  gpu::IndexPlan plan;
  plan.kept_rank = static_cast<int>(kept.size());
  plan.red_rank = static_cast<int>(reduced.size());
  for (int d = 0; d < plan.kept_rank; ++d) {
    plan.kept_dims[d] = kept[d].size;
    plan.kept_count *= kept[d].size;
    for (int k = 0; k < operands; ++k) plan.kept_strides[k][d] = kept[d].strides[k];
  }
  for (int d = 0; d < plan.red_rank; ++d) {
    plan.red_dims[d] = reduced[d].size;
    plan.red_count *= reduced[d].size;
    for (int k = 0; k < operands; ++k) plan.red_strides[k][d] = reduced[d].strides[k];
  }
  return plan;
}

absl::Status RegisterCudaKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(RegisterBasicCudaKernels(registry));
  SLUICE_RETURN_IF_ERROR(RegisterElementwiseCudaKernels(registry));
  SLUICE_RETURN_IF_ERROR(RegisterNnCudaKernels(registry));
  SLUICE_RETURN_IF_ERROR(RegisterShapeAndOptimizerCudaKernels(registry));
  SLUICE_RETURN_IF_ERROR(RegisterCompareCudaKernels(registry));
  SLUICE_RETURN_IF_ERROR(RegisterRowCudaKernels(registry));
  SLUICE_RETURN_IF_ERROR(RegisterNormCudaKernels(registry));
  SLUICE_RETURN_IF_ERROR(RegisterIndexCudaKernels(registry));
  SLUICE_RETURN_IF_ERROR(RegisterConvCudaKernels(registry));
  SLUICE_RETURN_IF_ERROR(RegisterUnaryMathCudaKernels(registry));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
