// Host kernels (cpu and sim) of the basic family (ops/basic_ops.cc).
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/counted_copy_kernel.h"
#include "ops/internal/counter_rng.h"
#include "ops/internal/op_families.h"

namespace sluice::ops::internal {
namespace {

// Out = In converted element by element to Out's dtype (cast, cast_grad: key dtype In).
template <typename In>
absl::StatusOr<HostWork> PrepareCast(const HostTensor& x, const HostTensor& y) {
  const In* in = x.as<const In>();
  const int64_t n = x.size;
  void* out = y.data;
  return VisitDtype(y.dtype, [in, n, out](auto tag) -> absl::StatusOr<HostWork> {
    using Out = typename decltype(tag)::type;
    return HostWork([in, n, out = static_cast<Out*>(out)] {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(in[i]);
      return absl::OkStatus();
    });
  });
}

// A kernel that copies X's bytes into Out (assign, memcpy_*): same dtype and size.
auto MakeCopy(absl::string_view op) {
  return [op = std::string(op)](auto) {
    return MakeHostKernel(op, [op](const HostArgs& a) -> absl::StatusOr<HostWork> {
      if (a.inputs.size() != 1 || a.outputs.size() != 1 ||
          a.inputs[0].dtype != a.outputs[0].dtype || a.inputs[0].size != a.outputs[0].size) {
        return absl::InvalidArgumentError(
            absl::StrCat("op '", op, "': needs one input and one output of one dtype and size"));
      }
      const void* src = a.inputs[0].data;
      void* dst = a.outputs[0].data;
      const size_t bytes = a.inputs[0].size * SizeOf(a.inputs[0].dtype);
      if (bytes == 0 || src == dst) return HostWork(nullptr);
      return HostWork([src, dst, bytes] {
        std::memcpy(dst, src, bytes);
        return absl::OkStatus();
      });
    });
  };
}

// fill_constant, fill_zeros_like, assign, the host-device copies, cast and cast_grad.
absl::Status RegisterFillCopyAndCastKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "fill_constant", [](auto tag) {
        using T = typename decltype(tag)::type;
        return MakeHostKernel("fill_constant", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
          SLUICE_ASSIGN_OR_RETURN(const double value, a.attrs->GetFloat("value"));
          T* out = a.outputs[0].as<T>();
          const int64_t n = a.outputs[0].size;
          const T v = static_cast<T>(value);
          return HostWork([out, n, v] {
            for (int64_t i = 0; i < n; ++i) out[i] = v;
            return absl::OkStatus();
          });
        });
      })));
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "fill_zeros_like", [](auto) {
        return MakeHostKernel("fill_zeros_like", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
          void* out = a.outputs[0].data;
          const size_t bytes = a.outputs[0].size * SizeOf(a.outputs[0].dtype);
          return HostWork([out, bytes] {
            if (bytes > 0) std::memset(out, 0, bytes);
            return absl::OkStatus();
          });
        });
      })));
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "assign", MakeCopy("assign"))));
  // Copies through host memory: counted (counted_copy_kernel.h).
  for (const auto& [op, to_device] : {std::pair<const char*, bool>{"memcpy_h2d", true},
                                      std::pair<const char*, bool>{"memcpy_d2h", false}}) {
    SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
        registry, op, [make = MakeCopy(op), to_device = to_device](auto tag) {
          return CountHostCopies(make(tag), to_device);
        })));
  }
  for (const char* op : {"cast", "cast_grad"}) {
    SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
        registry, op, [op](auto tag) {
          using In = typename decltype(tag)::type;
          return MakeHostKernel(
              op, [](const HostArgs& a) { return PrepareCast<In>(a.inputs[0], a.outputs[0]); });
        })));
  }
  return absl::OkStatus();
}

// scale, sum and the random sources.
absl::Status RegisterScaleSumAndRandomKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double>(registry, "scale", [](auto tag) {
    using T = typename decltype(tag)::type;
    return MakeHostKernel("scale", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
      SLUICE_ASSIGN_OR_RETURN(const double scale, a.attrs->GetFloat("scale"));
      SLUICE_ASSIGN_OR_RETURN(const double bias, a.attrs->GetFloat("bias"));
      const T* x = a.inputs[0].as<const T>();
      T* out = a.outputs[0].as<T>();
      const int64_t n = a.outputs[0].size;
      return HostWork([x, out, n, s = static_cast<T>(scale), b = static_cast<T>(bias)] {
        for (int64_t i = 0; i < n; ++i) out[i] = s * x[i] + b;
        return absl::OkStatus();
      });
    });
  })));
  SLUICE_RETURN_IF_ERROR(
      (RegisterStressKernelsFor<float, double, int32_t, int64_t>(registry, "sum", [](auto tag) {
        using T = typename decltype(tag)::type;
        return MakeHostKernel("sum", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
          absl::InlinedVector<const T*, 4> xs;
          for (const HostTensor& x : a.inputs) xs.push_back(x.as<const T>());
          T* out = a.outputs[0].as<T>();
          const int64_t n = a.outputs[0].size;
          return HostWork([xs = std::move(xs), out, n] {
            // Accumulate into a local first: `out` may alias an input.
            for (int64_t i = 0; i < n; ++i) {
              T acc = xs[0][i];
              for (size_t k = 1; k < xs.size(); ++k) acc += xs[k][i];
              out[i] = acc;
            }
            return absl::OkStatus();
          });
        });
      })));
  SLUICE_RETURN_IF_ERROR(
      (RegisterStressKernelsFor<float, double>(registry, "uniform_random", [](auto tag) {
        using T = typename decltype(tag)::type;
        return MakeHostKernel("uniform_random", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
          SLUICE_ASSIGN_OR_RETURN(const double lo, a.attrs->GetFloat("min"));
          SLUICE_ASSIGN_OR_RETURN(const double hi, a.attrs->GetFloat("max"));
          SLUICE_ASSIGN_OR_RETURN(const int64_t seed, a.attrs->GetInt("seed"));
          if (!(lo <= hi)) {
            return absl::InvalidArgumentError(
                absl::StrCat("op 'uniform_random': min ", lo, " > max ", hi));
          }
          T* out = a.outputs[0].as<T>();
          const int64_t n = a.outputs[0].size;
          return HostWork([out, n, lo, hi, seed] {
            for (int64_t i = 0; i < n; ++i) {
              out[i] = static_cast<T>(lo + (hi - lo) * CounterUniform(seed, i));
            }
            return absl::OkStatus();
          });
        });
      })));
  SLUICE_RETURN_IF_ERROR(
      (RegisterStressKernelsFor<float, double>(registry, "gaussian_random", [](auto tag) {
        using T = typename decltype(tag)::type;
        return MakeHostKernel("gaussian_random", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
          SLUICE_ASSIGN_OR_RETURN(const double mean, a.attrs->GetFloat("mean"));
          SLUICE_ASSIGN_OR_RETURN(const double std, a.attrs->GetFloat("std"));
          SLUICE_ASSIGN_OR_RETURN(const int64_t seed, a.attrs->GetInt("seed"));
          if (!(std >= 0)) {
            return absl::InvalidArgumentError(
                absl::StrCat("op 'gaussian_random': std ", std, " is negative"));
          }
          T* out = a.outputs[0].as<T>();
          const int64_t n = a.outputs[0].size;
          return HostWork([out, n, mean, std, seed] {
            for (int64_t i = 0; i < n; ++i) {
              out[i] = static_cast<T>(mean + std * CounterNormal(seed, i));
            }
            return absl::OkStatus();
          });
        });
      })));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterBasicHostKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(RegisterFillCopyAndCastKernels(registry));
  return RegisterScaleSumAndRandomKernels(registry);
}

}  // namespace sluice::ops::internal
