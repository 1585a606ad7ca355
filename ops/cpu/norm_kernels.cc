// Host kernels (cpu and sim) of the norm family (ops/norm_ops.cc), f32 and f64. Each kernel
// re-checks its operands with the schema's shape rules (ops/internal/norm_shapes.h) before it
// returns work. Sums are taken in double, each over its elements in index order, whatever
// the split across the intra-op threads (a split is by rows, channels or columns, each sum
// done by one thread), so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/norm_shapes.h"
#include "ops/internal/op_families.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace norm_kernels {
namespace {

// Rows (or channels, or columns) per chunk of a parallel split, aiming at >= 32k elements.
int64_t GrainFor(int64_t per_item) {
  constexpr int64_t kChunkElements = int64_t{1} << 15;
  return per_item <= 0 ? kChunkElements : std::max<int64_t>(1, kChunkElements / per_item);
}

// The attribute as the kernels read it: InvalidArgument naming the op when absent or mistyped.
absl::StatusOr<double> EpsilonOf(absl::string_view op, const HostArgs& a) {
  return InOp(op, a.attrs->GetFloat("epsilon"));
}

// ---------------------------------------------------------------------------------------
// batch_norm_infer: X, Scale, Bias, Mean, Var -> Out

template <typename T>
absl::StatusOr<HostWork> PrepareBatchNorm(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 5, 5, 1));
  const TensorMeta x = MetaOf(a.inputs[0]);
  SLUICE_ASSIGN_OR_RETURN(const norm::BatchNormDims d, InOp(op, norm::BatchNormShapes(x)));
  const char* names[] = {"X", "Scale", "Bias", "Mean", "Var"};
  for (int i = 1; i < 5; ++i) {
    const absl::Status checked = norm::CheckChannelOperand(names[i], MetaOf(a.inputs[i]), x, d);
    if (!checked.ok()) return OpError(op, checked.message());
  }
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, x));
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, EpsilonOf(op, a));
  if (a.outputs[0].size == 0) return HostWork(nullptr);
  return HostWork([d, eps = static_cast<T>(epsilon), x = a.inputs[0].as<const T>(),
                   scale = a.inputs[1].as<const T>(), bias = a.inputs[2].as<const T>(),
                   mean = a.inputs[3].as<const T>(), var = a.inputs[4].as<const T>(),
                   out = a.outputs[0].as<T>(), parallel = a.parallel()] {
    std::vector<T> stddev(static_cast<size_t>(d.channels));
    for (int64_t c = 0; c < d.channels; ++c) stddev[c] = std::sqrt(var[c] + eps);
    return parallel.For(d.outer * d.channels, GrainFor(d.inner), [&](int64_t begin, int64_t end) {
      for (int64_t oc = begin; oc < end; ++oc) {
        const int64_t c = oc % d.channels;
        const T m = mean[c], s = stddev[c], k = scale[c], b = bias[c];
        const T* xr = x + oc * d.inner;
        T* yr = out + oc * d.inner;
        for (int64_t i = 0; i < d.inner; ++i) yr[i] = (xr[i] - m) / s * k + b;
      }
    });
  });
}

// batch_norm_infer_grad: X, Scale, Mean, Var, OutGrad -> XGrad, ScaleGrad, BiasGrad, MeanGrad,
// VarGrad. Per channel, sum(g) and sum(g (x - mean)) over n then the inner dims.
template <typename T>
absl::StatusOr<HostWork> PrepareBatchNormGrad(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 5, 5, 5));
  const TensorMeta x = MetaOf(a.inputs[0]);
  SLUICE_ASSIGN_OR_RETURN(const norm::BatchNormDims d, InOp(op, norm::BatchNormShapes(x)));
  const char* names[] = {"X", "Scale", "Mean", "Var"};
  for (int i = 1; i < 4; ++i) {
    const absl::Status checked = norm::CheckChannelOperand(names[i], MetaOf(a.inputs[i]), x, d);
    if (!checked.ok()) return OpError(op, checked.message());
  }
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[4], "input", 4, x));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, x));
  for (int o = 1; o < 5; ++o) {
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[o], "output", o, MetaOf(a.inputs[1])));
  }
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, EpsilonOf(op, a));
  if (d.channels == 0) return HostWork(nullptr);
  return HostWork([d, eps = static_cast<T>(epsilon), x = a.inputs[0].as<const T>(),
                   scale = a.inputs[1].as<const T>(), mean = a.inputs[2].as<const T>(),
                   var = a.inputs[3].as<const T>(), g = a.inputs[4].as<const T>(),
                   dx = a.outputs[0].as<T>(), dscale = a.outputs[1].as<T>(),
                   dbias = a.outputs[2].as<T>(), dmean = a.outputs[3].as<T>(),
                   dvar = a.outputs[4].as<T>(), parallel = a.parallel()] {
    // By channel: each thread owns whole channels, so every sum runs in index order.
    return parallel.For(d.channels, GrainFor(d.outer * d.inner), [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        // The forward op's sqrt(Var + epsilon) in T, then in double for the gradients.
        const double s = static_cast<double>(std::sqrt(var[c] + eps));
        const double k = scale[c];
        const T m = mean[c];
        double sum_g = 0, sum_gx = 0;
        for (int64_t n = 0; n < d.outer; ++n) {
          const int64_t base = (n * d.channels + c) * d.inner;
          for (int64_t i = 0; i < d.inner; ++i) {
            const double gi = g[base + i];
            sum_g += gi;
            sum_gx += gi * static_cast<double>(x[base + i] - m);
          }
        }
        const double factor = k / s;
        for (int64_t n = 0; n < d.outer; ++n) {
          const int64_t base = (n * d.channels + c) * d.inner;
          for (int64_t i = 0; i < d.inner; ++i) {
            dx[base + i] = static_cast<T>(static_cast<double>(g[base + i]) * factor);
          }
        }
        dscale[c] = static_cast<T>(sum_gx / s);
        dbias[c] = static_cast<T>(sum_g);
        dmean[c] = static_cast<T>(-sum_g * factor);
        dvar[c] = static_cast<T>(-0.5 * k * sum_gx / (s * s * s));
      }
    });
  });
}

// ---------------------------------------------------------------------------------------
// layer_norm: X, Scale, Bias (optional) -> Out, Mean, InvStdDev

absl::StatusOr<norm::LayerNormDims> LayerNormDimsOf(absl::string_view op, const HostArgs& a) {
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(op, a.attrs->GetInt("axis")));
  const TensorMeta x = MetaOf(a.inputs[0]);
  SLUICE_ASSIGN_OR_RETURN(norm::LayerNormDims d, InOp(op, norm::LayerNormShapes(x, axis)));
  const absl::Status scale = norm::CheckScale(MetaOf(a.inputs[1]), x, d);
  if (!scale.ok()) return OpError(op, scale.message());
  return d;
}

template <typename T>
absl::StatusOr<HostWork> PrepareLayerNorm(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 3, 3));
  SLUICE_ASSIGN_OR_RETURN(const norm::LayerNormDims d, LayerNormDimsOf(op, a));
  const bool has_bias = a.inputs.size() == 3;
  if (has_bias) {
    const absl::Status bias =
        norm::RequireMeta("Bias", MetaOf(a.inputs[2]), MetaOf(a.inputs[1]), "Scale's");
    if (!bias.ok()) return OpError(op, bias.message());
  }
  const TensorMeta x = MetaOf(a.inputs[0]);
  const TensorMeta stats{x.dtype, d.stats};
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, x));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[1], "output", 1, stats));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[2], "output", 2, stats));
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, EpsilonOf(op, a));
  if (d.rows == 0) return HostWork(nullptr);
  return HostWork([d, epsilon, x = a.inputs[0].as<const T>(), scale = a.inputs[1].as<const T>(),
                   bias = has_bias ? a.inputs[2].as<const T>() : nullptr,
                   out = a.outputs[0].as<T>(), mean_out = a.outputs[1].as<T>(),
                   inv_out = a.outputs[2].as<T>(), parallel = a.parallel()] {
    return parallel.For(d.rows, GrainFor(d.cols), [&](int64_t begin, int64_t end) {
      const double n = static_cast<double>(d.cols);
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = x + r * d.cols;
        T* yr = out + r * d.cols;
        double sum = 0;
        for (int64_t j = 0; j < d.cols; ++j) sum += xr[j];
        const double mean = sum / n;
        double sq = 0;
        for (int64_t j = 0; j < d.cols; ++j) {
          const double diff = xr[j] - mean;
          sq += diff * diff;
        }
        const T m = static_cast<T>(mean);
        const T inv = static_cast<T>(1.0 / std::sqrt(sq / n + epsilon));
        if (bias != nullptr) {
          for (int64_t j = 0; j < d.cols; ++j) yr[j] = (xr[j] - m) * inv * scale[j] + bias[j];
        } else {
          for (int64_t j = 0; j < d.cols; ++j) yr[j] = (xr[j] - m) * inv * scale[j];
        }
        mean_out[r] = m;
        inv_out[r] = inv;
      }
    });
  });
}

// layer_norm_grad: X, Scale, Mean, InvStdDev, OutGrad -> XGrad, ScaleGrad (, BiasGrad).
template <typename T>
absl::StatusOr<HostWork> PrepareLayerNormGrad(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 5, 5, static_cast<int>(a.outputs.size())));
  if (a.outputs.size() != 2 && a.outputs.size() != 3) {
    return OpError(op, absl::StrCat("takes 2 or 3 outputs (XGrad, ScaleGrad, BiasGrad), got ",
                                    a.outputs.size()));
  }
  SLUICE_ASSIGN_OR_RETURN(const norm::LayerNormDims d, LayerNormDimsOf(op, a));
  const TensorMeta x = MetaOf(a.inputs[0]);
  const TensorMeta stats{x.dtype, d.stats};
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[2], "input", 2, stats));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[3], "input", 3, stats));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[4], "input", 4, x));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, x));
  for (size_t o = 1; o < a.outputs.size(); ++o) {
    SLUICE_RETURN_IF_ERROR(
        CheckMeta(op, a.outputs[o], "output", static_cast<int>(o), MetaOf(a.inputs[1])));
  }
  const bool has_bias = a.outputs.size() == 3;
  return HostWork([d, x = a.inputs[0].as<const T>(), scale = a.inputs[1].as<const T>(),
                   mean = a.inputs[2].as<const T>(), inv = a.inputs[3].as<const T>(),
                   g = a.inputs[4].as<const T>(), dx = a.outputs[0].as<T>(),
                   dscale = a.outputs[1].as<T>(), dbias = has_bias ? a.outputs[2].as<T>() : nullptr,
                   parallel = a.parallel()]() -> absl::Status {
    // ScaleGrad and BiasGrad by column (each sum over the rows in order), then XGrad by row.
    SLUICE_RETURN_IF_ERROR(parallel.For(d.cols, GrainFor(d.rows), [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        double sum_gx = 0, sum_g = 0;
        for (int64_t r = 0; r < d.rows; ++r) {
          const int64_t i = r * d.cols + j;
          const double xhat = static_cast<double>(x[i] - mean[r]) * static_cast<double>(inv[r]);
          sum_gx += static_cast<double>(g[i]) * xhat;
          sum_g += g[i];
        }
        dscale[j] = static_cast<T>(sum_gx);
        if (dbias != nullptr) dbias[j] = static_cast<T>(sum_g);
      }
    }));
    return parallel.For(d.rows, GrainFor(d.cols), [&](int64_t begin, int64_t end) {
      const double n = static_cast<double>(d.cols);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t base = r * d.cols;
        const double m = mean[r], s = inv[r];
        double sum_d = 0, sum_dx = 0;
        for (int64_t j = 0; j < d.cols; ++j) {
          const double dj = static_cast<double>(g[base + j]) * static_cast<double>(scale[j]);
          sum_d += dj;
          sum_dx += dj * ((static_cast<double>(x[base + j]) - m) * s);
        }
        const double mean_d = sum_d / n, mean_dx = sum_dx / n;
        for (int64_t j = 0; j < d.cols; ++j) {
          const double dj = static_cast<double>(g[base + j]) * static_cast<double>(scale[j]);
          const double xhat = (static_cast<double>(x[base + j]) - m) * s;
          dx[base + j] = static_cast<T>(s * (dj - mean_d - xhat * mean_dx));
        }
      }
    });
  });
}

// ---------------------------------------------------------------------------------------

// Registers prepare<float> / prepare<double> as the cpu and sim kernels of `op`.
template <template <typename> class Prepare>
absl::Status RegisterFloat(OpRegistry* registry, const std::string& op) {
  return RegisterStressKernelsFor<float, double>(registry, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return MakeHostKernel(op, [op](const HostArgs& a) { return Prepare<T>::Run(op, a); });
  });
}

template <typename T>
struct BatchNorm {
  static absl::StatusOr<HostWork> Run(const std::string& op, const HostArgs& a) {
    return PrepareBatchNorm<T>(op, a);
  }
};
template <typename T>
struct BatchNormGrad {
  static absl::StatusOr<HostWork> Run(const std::string& op, const HostArgs& a) {
    return PrepareBatchNormGrad<T>(op, a);
  }
};
template <typename T>
struct LayerNorm {
  static absl::StatusOr<HostWork> Run(const std::string& op, const HostArgs& a) {
    return PrepareLayerNorm<T>(op, a);
  }
};
template <typename T>
struct LayerNormGrad {
  static absl::StatusOr<HostWork> Run(const std::string& op, const HostArgs& a) {
    return PrepareLayerNormGrad<T>(op, a);
  }
};

}  // namespace
}  // namespace norm_kernels

absl::Status RegisterNormHostKernels(OpRegistry* registry) {
  using norm_kernels::RegisterFloat;
  SLUICE_RETURN_IF_ERROR(RegisterFloat<norm_kernels::BatchNorm>(registry, "batch_norm_infer"));
  SLUICE_RETURN_IF_ERROR(
      RegisterFloat<norm_kernels::BatchNormGrad>(registry, "batch_norm_infer_grad"));
  SLUICE_RETURN_IF_ERROR(RegisterFloat<norm_kernels::LayerNorm>(registry, "layer_norm"));
  return RegisterFloat<norm_kernels::LayerNormGrad>(registry, "layer_norm_grad");
}

}  // namespace sluice::ops::internal
