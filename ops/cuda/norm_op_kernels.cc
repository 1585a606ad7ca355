// CUDA kernels (OpKernels) of the norm family (ops/norm_ops.cc), f32 and f64, with the
// operand checks of the host kernels (the shape rules of ops/internal/norm_shapes.h, the
// same messages) before anything is enqueued on the device (ops/cuda/norm_kernels.cu).
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/norm_launch.h"
#include "ops/internal/norm_shapes.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace norm_cuda {
namespace {

absl::Status AsOpError(absl::string_view op, const absl::Status& status) {
  return status.ok() ? status : OpError(op, status.message());
}

gpu::ChannelView ViewOf(const norm::BatchNormDims& d) {
  gpu::ChannelView v;
  v.outer = d.outer;
  v.channels = d.channels;
  v.inner = d.inner;
  return v;
}

// X and the per-channel operands (input i named names[i], for i >= 1 and < count).
absl::StatusOr<norm::BatchNormDims> CheckBatchNorm(absl::string_view op, const CudaArgs& a,
                                                   const char* const* names, int count) {
  const TensorMeta x = MetaOf(a.inputs[0]);
  SLUICE_ASSIGN_OR_RETURN(const norm::BatchNormDims d, InOp(op, norm::BatchNormShapes(x)));
  for (int i = 1; i < count; ++i) {
    SLUICE_RETURN_IF_ERROR(
        AsOpError(op, norm::CheckChannelOperand(names[i], MetaOf(a.inputs[i]), x, d)));
  }
  return d;
}

template <typename T>
absl::Status RunBatchNorm(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 5, 5, 1));
  const char* const names[] = {"X", "Scale", "Bias", "Mean", "Var"};
  SLUICE_ASSIGN_OR_RETURN(const norm::BatchNormDims d, CheckBatchNorm(op, a, names, 5));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, InOp(op, a.attrs->GetFloat("epsilon")));
  return CudaStatus(
      op, gpu::LaunchBatchNorm<T>(a.inputs[0].as<const T>(), a.inputs[1].as<const T>(),
                                  a.inputs[2].as<const T>(), a.inputs[3].as<const T>(),
                                  a.inputs[4].as<const T>(), a.outputs[0].as<T>(), ViewOf(d),
                                  static_cast<T>(epsilon), a.cuda_stream));
}

template <typename T>
absl::Status RunBatchNormGrad(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 5, 5, 5));
  const char* const names[] = {"X", "Scale", "Mean", "Var"};
  SLUICE_ASSIGN_OR_RETURN(const norm::BatchNormDims d, CheckBatchNorm(op, a, names, 4));
  const TensorMeta x = MetaOf(a.inputs[0]);
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[4], "input", 4, x));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, x));
  for (int o = 1; o < 5; ++o) {
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[o], "output", o, MetaOf(a.inputs[1])));
  }
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, InOp(op, a.attrs->GetFloat("epsilon")));
  return CudaStatus(
      op, gpu::LaunchBatchNormGrad<T>(
              a.inputs[0].as<const T>(), a.inputs[1].as<const T>(), a.inputs[2].as<const T>(),
              a.inputs[3].as<const T>(), a.inputs[4].as<const T>(), a.outputs[0].as<T>(),
              a.outputs[1].as<T>(), a.outputs[2].as<T>(), a.outputs[3].as<T>(),
              a.outputs[4].as<T>(), ViewOf(d), static_cast<T>(epsilon), a.cuda_stream));
}

absl::StatusOr<norm::LayerNormDims> LayerNormDimsOf(absl::string_view op, const CudaArgs& a) {
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(op, a.attrs->GetInt("axis")));
  const TensorMeta x = MetaOf(a.inputs[0]);
  SLUICE_ASSIGN_OR_RETURN(norm::LayerNormDims d, InOp(op, norm::LayerNormShapes(x, axis)));
  SLUICE_RETURN_IF_ERROR(AsOpError(op, norm::CheckScale(MetaOf(a.inputs[1]), x, d)));
  return d;
}

template <typename T>
absl::Status RunLayerNorm(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 3, 3));
  SLUICE_ASSIGN_OR_RETURN(const norm::LayerNormDims d, LayerNormDimsOf(op, a));
  const bool has_bias = a.inputs.size() == 3;
  if (has_bias) {
    SLUICE_RETURN_IF_ERROR(AsOpError(
        op, norm::RequireMeta("Bias", MetaOf(a.inputs[2]), MetaOf(a.inputs[1]), "Scale's")));
  }
  const TensorMeta x = MetaOf(a.inputs[0]);
  const TensorMeta stats{x.dtype, d.stats};
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, x));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[1], "output", 1, stats));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[2], "output", 2, stats));
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, InOp(op, a.attrs->GetFloat("epsilon")));
  return CudaStatus(
      op, gpu::LaunchLayerNorm<T>(a.inputs[0].as<const T>(), a.inputs[1].as<const T>(),
                                  has_bias ? a.inputs[2].as<const T>() : nullptr,
                                  a.outputs[0].as<T>(), a.outputs[1].as<T>(), a.outputs[2].as<T>(),
                                  d.rows, d.cols, epsilon, a.cuda_stream));
}

template <typename T>
absl::Status RunLayerNormGrad(absl::string_view op, const CudaArgs& a) {
  const int outputs = static_cast<int>(a.outputs.size());
  if (outputs != 2 && outputs != 3) {
    return OpError(
        op, absl::StrCat("takes 2 or 3 outputs (XGrad, ScaleGrad, BiasGrad), got ", outputs));
  }
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 5, 5, outputs));
  SLUICE_ASSIGN_OR_RETURN(const norm::LayerNormDims d, LayerNormDimsOf(op, a));
  const TensorMeta x = MetaOf(a.inputs[0]);
  const TensorMeta stats{x.dtype, d.stats};
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[2], "input", 2, stats));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[3], "input", 3, stats));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[4], "input", 4, x));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, x));
  for (int o = 1; o < outputs; ++o) {
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[o], "output", o, MetaOf(a.inputs[1])));
  }
  return CudaStatus(
      op, gpu::LaunchLayerNormGrad<T>(
              a.inputs[0].as<const T>(), a.inputs[1].as<const T>(), a.inputs[2].as<const T>(),
              a.inputs[3].as<const T>(), a.inputs[4].as<const T>(), a.outputs[0].as<T>(),
              a.outputs[1].as<T>(), outputs == 3 ? a.outputs[2].as<T>() : nullptr, d.rows, d.cols,
              a.cuda_stream));
}

using RunFn = absl::Status (*)(absl::string_view, const CudaArgs&);

// Registers run<float> / run<double> as the cuda kernels of `op`.
absl::Status RegisterNorm(OpRegistry* registry, const char* op, RunFn run_f32, RunFn run_f64) {
  return RegisterCudaKernelsFor<float, double>(registry, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const RunFn run = std::is_same_v<T, float> ? run_f32 : run_f64;
    return MakeCudaKernel(op, [op, run](const CudaArgs& a) { return run(op, a); });
  });
}

}  // namespace
}  // namespace norm_cuda

absl::Status RegisterNormCudaKernels(OpRegistry* registry) {
  namespace nc = norm_cuda;
  SLUICE_RETURN_IF_ERROR(nc::RegisterNorm(registry, "batch_norm_infer", nc::RunBatchNorm<float>,
                                          nc::RunBatchNorm<double>));
  SLUICE_RETURN_IF_ERROR(nc::RegisterNorm(registry, "batch_norm_infer_grad",
                                          nc::RunBatchNormGrad<float>,
                                          nc::RunBatchNormGrad<double>));
  SLUICE_RETURN_IF_ERROR(
      nc::RegisterNorm(registry, "layer_norm", nc::RunLayerNorm<float>, nc::RunLayerNorm<double>));
  return nc::RegisterNorm(registry, "layer_norm_grad", nc::RunLayerNormGrad<float>,
                          nc::RunLayerNormGrad<double>);
}

}  // namespace sluice::ops::internal
