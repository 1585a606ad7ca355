// CUDA kernels (OpKernels) of the conv family (ops/conv_ops.cc), f32 and f64, with the
// operand checks of the host kernels (ops/internal/conv_geometry.h) and the direct kernels of
// ops/cuda/conv_kernels.cu (no cuDNN).
#include <string>

#include "core/status.h"
#include "ops/cuda/conv_launch.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/internal/conv_geometry.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace {

gpu::WindowDims WindowOf(const conv::WindowAxis& a) {
  gpu::WindowDims w;
  w.in = a.in;
  w.kernel = a.kernel;
  w.stride = a.stride;
  w.pad_begin = a.pad_begin;
  w.pad_end = a.pad_end;
  w.dilation = a.dilation;
  w.out = a.out;
  return w;
}

absl::StatusOr<gpu::ConvDims> SetupConv(absl::string_view op, const CudaArgs& a) {
  SLUICE_ASSIGN_OR_RETURN(
      conv::Conv2dDims d,
      InOp(op, conv::Conv2dShapes(MetaOf(a.inputs[0]), MetaOf(a.inputs[1]), *a.attrs)));
  gpu::ConvDims g;
  g.n = d.n;
  g.c = d.c;
  g.m = d.m;
  g.groups = d.groups;
  g.h = WindowOf(d.h);
  g.w = WindowOf(d.w);
  return g;
}

Shape ConvOut(const gpu::ConvDims& d) { return Shape({d.n, d.m, d.h.out, d.w.out}); }

template <typename T>
absl::Status RunConv(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  SLUICE_ASSIGN_OR_RETURN(gpu::ConvDims d, SetupConv(op, a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {DataTypeOf<T>(), ConvOut(d)}));
  return CudaStatus(op,
                    gpu::LaunchConv2d<T>(d, a.inputs[0].as<const T>(), a.inputs[1].as<const T>(),
                                         a.outputs[0].as<T>(), a.cuda_stream));
}

template <typename T>
absl::Status RunConvGrad(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 3, 3, 2));
  SLUICE_ASSIGN_OR_RETURN(gpu::ConvDims d, SetupConv(op, a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[2], "input", 2, {DataTypeOf<T>(), ConvOut(d)}));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[1], "output", 1, MetaOf(a.inputs[1])));
  const T* x = a.inputs[0].as<const T>();
  const T* w = a.inputs[1].as<const T>();
  const T* g = a.inputs[2].as<const T>();
  SLUICE_RETURN_IF_ERROR(
      CudaStatus(op, gpu::LaunchConv2dGradX<T>(d, w, g, a.outputs[0].as<T>(), a.cuda_stream)));
  return CudaStatus(op, gpu::LaunchConv2dGradW<T>(d, x, g, a.outputs[1].as<T>(), a.cuda_stream));
}

absl::StatusOr<gpu::PoolDims> SetupPool(absl::string_view op, const CudaArgs& a, bool average) {
  SLUICE_ASSIGN_OR_RETURN(conv::Pool2dDims d,
                          InOp(op, conv::Pool2dShapes(MetaOf(a.inputs[0]), *a.attrs, average)));
  gpu::PoolDims g;
  g.planes = d.n * d.c;
  g.h = WindowOf(d.h);
  g.w = WindowOf(d.w);
  g.average = average;
  g.count_include_pad = d.count_include_pad;
  return g;
}

Shape PoolOut(const CudaArgs& a, const gpu::PoolDims& d) {
  const Shape& x = *a.inputs[0].shape;
  return Shape({x.dim(0), x.dim(1), d.h.out, d.w.out});
}

template <typename T, bool kAverage>
absl::Status RunPool(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 1, 1, 1));
  SLUICE_ASSIGN_OR_RETURN(gpu::PoolDims d, SetupPool(op, a, kAverage));
  SLUICE_RETURN_IF_ERROR(
      CheckMeta(op, a.outputs[0], "output", 0, {DataTypeOf<T>(), PoolOut(a, d)}));
  return CudaStatus(
      op, gpu::LaunchPool2d<T>(d, a.inputs[0].as<const T>(), a.outputs[0].as<T>(), a.cuda_stream));
}

template <typename T, bool kAverage>
absl::Status RunPoolGrad(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  SLUICE_ASSIGN_OR_RETURN(gpu::PoolDims d, SetupPool(op, a, kAverage));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[1], "input", 1, {DataTypeOf<T>(), PoolOut(a, d)}));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  return CudaStatus(
      op, gpu::LaunchPool2dGrad<T>(d, a.inputs[0].as<const T>(), a.inputs[1].as<const T>(),
                                   a.outputs[0].as<T>(), a.cuda_stream));
}

using RunFn = absl::Status (*)(absl::string_view, const CudaArgs&);

// Registers run_f32 / run_f64 as the cuda kernels of `op`.
absl::Status RegisterFloat(OpRegistry* registry, const std::string& op, RunFn run_f32,
                           RunFn run_f64) {
  SLUICE_RETURN_IF_ERROR(registry->RegisterKernel(
      op, {DeviceType::kCuda}, DataType::kF32,
      MakeCudaKernel(op, [op, run_f32](const CudaArgs& a) { return run_f32(op, a); })));
  return registry->RegisterKernel(
      op, {DeviceType::kCuda}, DataType::kF64,
      MakeCudaKernel(op, [op, run_f64](const CudaArgs& a) { return run_f64(op, a); }));
}

}  // namespace

absl::Status RegisterConvCudaKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "conv2d", RunConv<float>, RunConv<double>));
  SLUICE_RETURN_IF_ERROR(
      RegisterFloat(registry, "conv2d_grad", RunConvGrad<float>, RunConvGrad<double>));
  SLUICE_RETURN_IF_ERROR(
      RegisterFloat(registry, "max_pool2d", RunPool<float, false>, RunPool<double, false>));
  SLUICE_RETURN_IF_ERROR(
      RegisterFloat(registry, "avg_pool2d", RunPool<float, true>, RunPool<double, true>));
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "max_pool2d_grad", RunPoolGrad<float, false>,
                                       RunPoolGrad<double, false>));
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "avg_pool2d_grad", RunPoolGrad<float, true>,
                                       RunPoolGrad<double, true>));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
