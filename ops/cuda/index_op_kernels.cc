// CUDA kernels (OpKernels) of the index family (ops/index_ops.cc) for the dtypes of its host
// kernels, with the same operand checks (ops/internal/index_operands.h); the device code is in
// ops/cuda/index_kernels.cu. gather's indices are read on the device: one out of range is an
// error of the run, as on the host, reported through a DeviceErrorRecord (the output holds
// zeros at its slices). Thread-safe (no mutable state), as CudaKernel says.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/device_error_record.h"
#include "ops/cuda/index_launch.h"
#include "ops/internal/index_operands.h"
#include "ops/internal/index_rules.h"

namespace sluice::ops::internal {
namespace {

constexpr DataType kEveryDtype[] = {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64,
                                    DataType::kBool};

gpu::GatherGeometry GeometryOf(const index::GatherDims& d) {
  gpu::GatherGeometry g;
  g.outer = d.outer;
  g.size = d.size;
  g.inner = d.inner;
  g.count = d.count;
  return g;
}

// The run-time check of gather's indices, after the kernel that fills `record`.
absl::Status CheckIndicesAfter(absl::string_view op, const CudaArgs& a, DeviceErrorRecord& record,
                               const index::GatherDims& d) {
  return record.ReportAfter(
      op, a,
      [op = std::string(op), size = d.size, axis = d.axis](uint64_t position, uint64_t value) {
        return OpError(op, index::BadIndexMessage(static_cast<int64_t>(position),
                                                  static_cast<int64_t>(value), size, axis));
      });
}

// gather for any dtype (registered per key dtype); its grad for f32 and f64.
class GatherCudaKernel final : public CudaKernel {
 public:
  GatherCudaKernel(bool grad, DataType key)
      : CudaKernel(grad ? "gather_grad" : "gather"), grad_(grad), key_(key) {}

 protected:
  absl::Status Run(const CudaArgs& a) const override {
    const absl::string_view op = name();
    SLUICE_ASSIGN_OR_RETURN(const index::GatherDims d,
                            index::CheckGatherOperands(op, a, grad_, key_));
    if (a.outputs[0].size == 0) return absl::OkStatus();
    const HostTensor& index = a.inputs[1];
    const bool i64 = index.dtype == DataType::kI64;
    SLUICE_ASSIGN_OR_RETURN(DeviceErrorRecord record, DeviceErrorRecord::Create(op, a));
    cudaError_t error = cudaSuccess;
    if (!grad_) {
      error = gpu::LaunchGatherRows(a.inputs[0].data, index.data, i64, a.outputs[0].data,
                                    static_cast<int>(SizeOf(key_)), GeometryOf(d), record.words(),
                                    a.cuda_stream);
    } else if (key_ == DataType::kF32) {
      error = gpu::LaunchGatherRowsGrad<float>(index.data, i64, a.inputs[2].as<const float>(),
                                               a.outputs[0].as<float>(), GeometryOf(d),
                                               record.words(), a.cuda_stream);
    } else {
      error = gpu::LaunchGatherRowsGrad<double>(index.data, i64, a.inputs[2].as<const double>(),
                                                a.outputs[0].as<double>(), GeometryOf(d),
                                                record.words(), a.cuda_stream);
    }
    SLUICE_RETURN_IF_ERROR(CudaStatus(op, error));
    return CheckIndicesAfter(op, a, record, d);
  }

 private:
  const bool grad_;
  const DataType key_;
};

// slice's walk over X (ops/cuda/index_launch.h): dims of size 1 dropped, neighbours merged.
absl::StatusOr<gpu::SliceGeometry> SliceGeometryOf(absl::string_view op, const Shape& x,
                                                   const index::SliceDims& d) {
  const Shape::Dims x_strides = x.Strides();
  gpu::SliceGeometry s;
  s.count = d.out.NumElements();
  std::vector<std::pair<int64_t, int64_t>> dims;  // (size, stride)
  for (int i = 0; i < x.rank(); ++i) {
    s.base += d.first[i] * x_strides[i];
    const int64_t size = d.out.dim(i);
    const int64_t stride = d.step[i] * x_strides[i];
    if (size == 1) continue;
    if (!dims.empty() && dims.back().second == stride * size) {
      dims.back() = {dims.back().first * size, stride};
    } else {
      dims.push_back({size, stride});
    }
  }
  if (dims.size() > static_cast<size_t>(gpu::kMaxDims)) {
    return OpError(
        op, absl::StrCat("the slice of X ", x.ToString(), " needs ", dims.size(),
                         " dims after merging; the CUDA kernel handles at most ", gpu::kMaxDims));
  }
  s.rank = static_cast<int>(dims.size());
  for (int i = 0; i < s.rank; ++i) {
    s.dims[i] = dims[i].first;
    s.strides[i] = dims[i].second;
  }
  return s;
}

class SliceCudaKernel final : public CudaKernel {
 public:
  SliceCudaKernel(bool grad, DataType key)
      : CudaKernel(grad ? "slice_grad" : "slice"), grad_(grad), key_(key) {}

 protected:
  absl::Status Run(const CudaArgs& a) const override {
    const absl::string_view op = name();
    SLUICE_ASSIGN_OR_RETURN(const index::SliceDims d,
                            index::CheckSliceOperands(op, a, grad_, key_));
    if (a.outputs[0].size == 0) return absl::OkStatus();
    SLUICE_ASSIGN_OR_RETURN(const gpu::SliceGeometry s, SliceGeometryOf(op, *a.inputs[0].shape, d));
    cudaError_t error = cudaSuccess;
    if (!grad_) {
      error = gpu::LaunchSlice(a.inputs[0].data, a.outputs[0].data, static_cast<int>(SizeOf(key_)),
                               s, a.cuda_stream);
    } else if (key_ == DataType::kF32) {
      error = gpu::LaunchSliceGrad<float>(a.inputs[1].as<const float>(), a.outputs[0].as<float>(),
                                          a.outputs[0].size, s, a.cuda_stream);
    } else {
      error =
          gpu::LaunchSliceGrad<double>(a.inputs[1].as<const double>(), a.outputs[0].as<double>(),
                                       a.outputs[0].size, s, a.cuda_stream);
    }
    return CudaStatus(op, error);
  }

 private:
  const bool grad_;
  const DataType key_;
};

// where: Cond, X, Y -> Out under Cond's bool, for X and Y of every dtype.
absl::Status RunWhere(const CudaArgs& a) {
  constexpr absl::string_view kOp = "where";
  SLUICE_ASSIGN_OR_RETURN(const Shape shape, index::CheckWhereOperands(kOp, a));
  if (a.outputs[0].size == 0) return absl::OkStatus();
  const Shape::Dims sc = BroadcastStrides(*a.inputs[0].shape, shape);
  const Shape::Dims sx = BroadcastStrides(*a.inputs[1].shape, shape);
  const Shape::Dims sy = BroadcastStrides(*a.inputs[2].shape, shape);
  std::vector<PlanDim> dims(shape.rank());
  for (int d = 0; d < shape.rank(); ++d) dims[d] = {shape.dim(d), false, {sc[d], sx[d], sy[d]}};
  SLUICE_ASSIGN_OR_RETURN(const gpu::IndexPlan plan, MakeIndexPlan(kOp, dims, 3));
  return CudaStatus(kOp,
                    gpu::LaunchWhere(plan, a.inputs[0].as<const uint8_t>(), a.inputs[1].data,
                                     a.inputs[2].data, a.outputs[0].data,
                                     static_cast<int>(SizeOf(a.inputs[1].dtype)), a.cuda_stream));
}

// where_grad: OutGrad, Cond, X, Y -> XGrad, YGrad; each target a map or a sum over the dims
// where its input was broadcast.
template <typename T>
absl::Status RunWhereGrad(const CudaArgs& a) {
  constexpr absl::string_view kOp = "where_grad";
  SLUICE_ASSIGN_OR_RETURN(const Shape shape,
                          index::CheckWhereGradOperands(kOp, a, DataTypeOf<T>()));
  const Shape::Dims sg = shape.Strides();
  const Shape::Dims sc = BroadcastStrides(*a.inputs[1].shape, shape);
  for (int target = 0; target < 2; ++target) {
    const HostTensor& out = a.outputs[target];
    if (out.size == 0) continue;
    const Shape::Dims st = BroadcastStrides(*a.inputs[2 + target].shape, shape);
    std::vector<PlanDim> dims(shape.rank());
    for (int d = 0; d < shape.rank(); ++d) dims[d] = {shape.dim(d), st[d] == 0, {sg[d], sc[d], 0}};
    SLUICE_ASSIGN_OR_RETURN(const gpu::IndexPlan plan, MakeIndexPlan(kOp, dims, 2));
    SLUICE_RETURN_IF_ERROR(CudaStatus(
        kOp,
        gpu::LaunchWhereGrad<T>(plan, a.inputs[0].as<const T>(), a.inputs[1].as<const uint8_t>(),
                                /*take_true=*/target == 0, out.as<T>(), a.cuda_stream)));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status RunErf(const CudaArgs& a, bool grad) {
  const absl::string_view op = grad ? "erf_grad" : "erf";
  SLUICE_RETURN_IF_ERROR(index::CheckErfOperands(op, a, grad, DataTypeOf<T>()));
  const int64_t n = a.outputs[0].size;
  const T* x = a.inputs[0].as<const T>();
  T* out = a.outputs[0].as<T>();
  return CudaStatus(
      op, grad ? gpu::LaunchErfGrad<T>(x, a.inputs[1].as<const T>(), out, n, a.cuda_stream)
               : gpu::LaunchErf<T>(x, out, n, a.cuda_stream));
}

absl::Status RegisterCuda(OpRegistry* registry, absl::string_view op, DataType dtype,
                          std::shared_ptr<const vm::OpKernel> kernel) {
  return registry->RegisterKernel(op, {DeviceType::kCuda}, dtype, std::move(kernel));
}

template <typename T>
absl::Status RegisterFloatIndexCudaKernels(OpRegistry* registry) {
  const DataType dtype = DataTypeOf<T>();
  SLUICE_RETURN_IF_ERROR(RegisterCuda(registry, "gather_grad", dtype,
                                      std::make_shared<GatherCudaKernel>(true, dtype)));
  SLUICE_RETURN_IF_ERROR(
      RegisterCuda(registry, "slice_grad", dtype, std::make_shared<SliceCudaKernel>(true, dtype)));
  SLUICE_RETURN_IF_ERROR(
      RegisterCuda(registry, "where_grad", dtype, MakeCudaKernel("where_grad", RunWhereGrad<T>)));
  SLUICE_RETURN_IF_ERROR(
      RegisterCuda(registry, "erf", dtype,
                   MakeCudaKernel("erf", [](const CudaArgs& a) { return RunErf<T>(a, false); })));
  return RegisterCuda(
      registry, "erf_grad", dtype,
      MakeCudaKernel("erf_grad", [](const CudaArgs& a) { return RunErf<T>(a, true); }));
}

}  // namespace

absl::Status RegisterIndexCudaKernels(OpRegistry* registry) {
  for (DataType dtype : kEveryDtype) {
    SLUICE_RETURN_IF_ERROR(
        RegisterCuda(registry, "gather", dtype, std::make_shared<GatherCudaKernel>(false, dtype)));
    SLUICE_RETURN_IF_ERROR(
        RegisterCuda(registry, "slice", dtype, std::make_shared<SliceCudaKernel>(false, dtype)));
  }
  SLUICE_RETURN_IF_ERROR(
      RegisterCuda(registry, "where", DataType::kBool, MakeCudaKernel("where", RunWhere)));
  SLUICE_RETURN_IF_ERROR(RegisterFloatIndexCudaKernels<float>(registry));
  return RegisterFloatIndexCudaKernels<double>(registry);
}

}  // namespace sluice::ops::internal
