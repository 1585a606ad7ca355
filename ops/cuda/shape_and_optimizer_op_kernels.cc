// CUDA kernels (OpKernels) of the shape and optimizer family (ops/shape_and_optimizer_ops.cc),
// with the host kernels' operand checks (ops/cpu/shape_and_optimizer_kernels.cc): reshape and
// reshape_grad as device-to-device copies, transpose as a gather over an IndexPlan (every
// dtype), concat, split and concat_grad as one 2-D cudaMemcpyAsync per part, and the sgd and
// adam updates (f32, f64; safe in place).
#include <cuda_runtime.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/cuda_launch.h"
#include "ops/internal/axis_layout.h"

namespace sluice::ops::internal {
namespace {

// reshape, reshape_grad: Out gets the bytes of input 0 (its shape is decided by inference).
auto MakeReshape(absl::string_view op_name, int inputs) {
  return [op = std::string(op_name), inputs](auto) {
    return MakeCudaKernel(op, [op, inputs](const CudaArgs& a) -> absl::Status {
      SLUICE_RETURN_IF_ERROR(CheckCounts(op, a, inputs, 1));
      const HostTensor& x = a.inputs[0];
      const HostTensor& y = a.outputs[0];
      if (x.dtype != y.dtype || x.size != y.size) {
        return OpError(op, absl::StrCat(y.Describe("output", 0), " does not hold the ",
                                        x.Describe("input", 0), "'s elements"));
      }
      return CopyAsync(op, a, y.data, x.data, x.size * SizeOf(x.dtype));
    });
  };
}

template <typename T>
absl::Status RunTranspose(const CudaArgs& a) {
  constexpr absl::string_view kOp = "transpose";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 1, 1));
  SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
  SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, a.attrs->GetInts("perm"));
  const HostTensor& x = a.inputs[0];
  const HostTensor& y = a.outputs[0];
  const int rank = x.shape->rank();
  bool ok = static_cast<int>(perm.size()) == rank && y.shape->rank() == rank;
  absl::InlinedVector<bool, 6> seen(rank, false);
  for (int i = 0; ok && i < rank; ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]] &&
         y.shape->dim(i) == x.shape->dim(static_cast<int>(perm[i]));
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    return OpError(kOp, absl::StrCat("perm [", absl::StrJoin(perm, ", "), "] does not map ",
                                     x.Describe("input", 0), " to ", y.Describe("output", 0)));
  }
  if (x.size == 0) return absl::OkStatus();
  // Output dim i walks input dim perm[i].
  const Shape::Dims in_strides = x.shape->Strides();
  std::vector<PlanDim> dims(rank);
  for (int i = 0; i < rank; ++i) dims[i] = {y.shape->dim(i), false, {in_strides[perm[i]]}};
  SLUICE_ASSIGN_OR_RETURN(const gpu::IndexPlan plan, MakeIndexPlan(kOp, dims, 1));
  const size_t bytes = x.size * sizeof(T);
  if (plan.kept_rank <= 1) return CopyAsync(kOp, a, y.data, x.data, bytes);  // the identity
  const void* in = x.data;
  std::optional<Scratch> copy;
  if (in == y.data) {  // in place (CallInto with X as Out): transpose a copy
    SLUICE_ASSIGN_OR_RETURN(Scratch scratch, Scratch::Allocate(kOp, a, bytes));
    SLUICE_RETURN_IF_ERROR(CopyAsync(kOp, a, scratch.get(), in, bytes));
    in = scratch.get();
    copy.emplace(std::move(scratch));
  }
  return CudaStatus(
      kOp, gpu::LaunchGather(plan, in, y.data, static_cast<int>(sizeof(T)), a.cuda_stream));
}

// Copies between the whole (rows of layout.row bytes) and part i (rows of its chunk):
// into the whole for concat, out of it for split.
absl::Status CopyParts(absl::string_view op, const CudaArgs& a, const AxisLayout& layout,
                       uint8_t* whole, absl::Span<const HostTensor> parts, bool into_whole) {
  size_t offset = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const size_t chunk = layout.chunks[i];
    uint8_t* part = static_cast<uint8_t*>(parts[i].data);
    uint8_t* at = whole + offset;
    offset += chunk;
    if (chunk == 0 || at == part) continue;  // nothing, or the part is the whole (in place)
    const cudaError_t error =
        into_whole ? cudaMemcpy2DAsync(at, layout.row, part, chunk, chunk, layout.outer,
                                       cudaMemcpyDeviceToDevice, a.cuda_stream)
                   : cudaMemcpy2DAsync(part, chunk, at, layout.row, chunk, layout.outer,
                                       cudaMemcpyDeviceToDevice, a.cuda_stream);
    SLUICE_RETURN_IF_ERROR(CudaStatus(op, error, "cudaMemcpy2DAsync"));
  }
  return absl::OkStatus();
}

// concat: X... -> Out.
absl::Status RunConcat(const CudaArgs& a) {
  constexpr absl::string_view kOp = "concat";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, -1, 1));
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, a.attrs->GetInt("axis"));
  SLUICE_ASSIGN_OR_RETURN(AxisLayout layout,
                          LayoutAlong(kOp, axis, a.outputs[0], "output", a.inputs, "input"));
  if (a.outputs[0].size == 0) return absl::OkStatus();
  return CopyParts(kOp, a, layout, static_cast<uint8_t*>(a.outputs[0].data), a.inputs,
                   /*into_whole=*/true);
}

// split (X -> Out...) and concat_grad (OutGrad, X... -> XGrad...): input 0 cut into the
// outputs' shapes along the axis.
auto MakeSplit(absl::string_view op_name, int inputs) {
  return [op = std::string(op_name), inputs](auto) {
    return MakeCudaKernel(op, [op, inputs](const CudaArgs& a) -> absl::Status {
      SLUICE_RETURN_IF_ERROR(CheckCounts(op, a, inputs, -1));
      SLUICE_ASSIGN_OR_RETURN(const int64_t axis, a.attrs->GetInt("axis"));
      SLUICE_ASSIGN_OR_RETURN(AxisLayout layout,
                              LayoutAlong(op, axis, a.inputs[0], "input", a.outputs, "output"));
      if (a.inputs[0].size == 0) return absl::OkStatus();
      return CopyParts(op, a, layout, static_cast<uint8_t*>(a.inputs[0].data), a.outputs,
                       /*into_whole=*/false);
    });
  };
}

// A one-element operand ([1] or a scalar) of an optimizer.
absl::Status CheckOneElement(absl::string_view op, const HostTensor& t, absl::string_view role,
                             int index) {
  if (t.size == 1) return absl::OkStatus();
  return OpError(op, absl::StrCat(t.Describe(role, index), " must hold one element"));
}

absl::Status CheckSameSize(absl::string_view op, const HostTensor& t, absl::string_view role,
                           int index, const HostTensor& param) {
  if (t.size == param.size) return absl::OkStatus();
  return OpError(op, absl::StrCat(t.Describe(role, index), " must have as many elements as ",
                                  param.Describe("input", 0)));
}

template <typename T>
absl::Status RunSgd(const CudaArgs& a) {
  constexpr absl::string_view kOp = "sgd";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 3, 1));
  SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
  SLUICE_RETURN_IF_ERROR(CheckSameSize(kOp, a.inputs[1], "input", 1, a.inputs[0]));
  SLUICE_RETURN_IF_ERROR(CheckOneElement(kOp, a.inputs[2], "input", 2));
  SLUICE_RETURN_IF_ERROR(CheckSameSize(kOp, a.outputs[0], "output", 0, a.inputs[0]));
  return CudaStatus(kOp, gpu::LaunchSgd<T>(a.inputs[0].as<const T>(), a.inputs[1].as<const T>(),
                                           a.inputs[2].as<const T>(), a.outputs[0].as<T>(),
                                           a.inputs[0].size, a.cuda_stream));
}

template <typename T>
absl::Status RunAdam(const CudaArgs& a) {
  constexpr absl::string_view kOp = "adam";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 7, 5));
  SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
  const HostTensor& param = a.inputs[0];
  for (int i : {1, 3, 4}) {
    SLUICE_RETURN_IF_ERROR(CheckSameSize(kOp, a.inputs[i], "input", i, param));
  }
  for (int i : {2, 5, 6}) SLUICE_RETURN_IF_ERROR(CheckOneElement(kOp, a.inputs[i], "input", i));
  for (int i : {0, 1, 2}) {
    SLUICE_RETURN_IF_ERROR(CheckSameSize(kOp, a.outputs[i], "output", i, param));
  }
  for (int i : {3, 4}) SLUICE_RETURN_IF_ERROR(CheckOneElement(kOp, a.outputs[i], "output", i));
  SLUICE_ASSIGN_OR_RETURN(const double beta1, a.attrs->GetFloat("beta1"));
  SLUICE_ASSIGN_OR_RETURN(const double beta2, a.attrs->GetFloat("beta2"));
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, a.attrs->GetFloat("epsilon"));
  const gpu::AdamOperands<T> o{
      a.inputs[0].as<const T>(), a.inputs[1].as<const T>(), a.inputs[2].as<const T>(),
      a.inputs[3].as<const T>(), a.inputs[4].as<const T>(), a.inputs[5].as<const T>(),
      a.inputs[6].as<const T>(), a.outputs[0].as<T>(),      a.outputs[1].as<T>(),
      a.outputs[2].as<T>(),      a.outputs[3].as<T>(),      a.outputs[4].as<T>()};
  return CudaStatus(kOp, gpu::LaunchAdam<T>(o, param.size, beta1, beta2, epsilon, a.cuda_stream));
}

}  // namespace

absl::Status RegisterShapeAndOptimizerCudaKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "reshape", MakeReshape("reshape", 1))));
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "reshape_grad", MakeReshape("reshape_grad", 2))));
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "transpose", [](auto tag) {
        return MakeCudaKernel("transpose", RunTranspose<typename decltype(tag)::type>);
      })));
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "concat", [](auto) { return MakeCudaKernel("concat", RunConcat); })));
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "split", MakeSplit("split", 1))));
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "concat_grad", MakeSplit("concat_grad", -1))));
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double>(registry, "sgd", [](auto tag) {
    return MakeCudaKernel("sgd", RunSgd<typename decltype(tag)::type>);
  })));
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double>(registry, "adam", [](auto tag) {
    return MakeCudaKernel("adam", RunAdam<typename decltype(tag)::type>);
  })));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
