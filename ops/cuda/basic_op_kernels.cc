// CUDA kernels (OpKernels) of the basic family (ops/basic_ops.cc), for the dtypes the host
// kernels take: fill_constant, fill_zeros_like, assign, cast and cast_grad, memcpy_h2d and
// memcpy_d2h for every dtype; sum also for i32 and i64; scale and the random ops for f32 and
// f64. Copies and zero fills are cudaMemcpyAsync / cudaMemsetAsync on the kernel's stream:
// memcpy_h2d runs on the cuda device's h2d stream and reads host memory, memcpy_d2h on its
// d2h stream and writes host memory (a pageable host buffer makes the CUDA runtime complete
// that copy before cudaMemcpyAsync returns). The random ops use the counter-based generator
// of ops/internal/counter_rng.h: uniform_random matches the host bit for bit; gaussian_random
// to within a few ulps (CUDA's log and cos are not the host's).
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/cuda_launch.h"
#include "ops/internal/counted_copy_kernel.h"

namespace sluice::ops::internal {
namespace {

// Copies X's bytes into Out: assign (device to device), memcpy_h2d (X in host memory),
// memcpy_d2h (Out in host memory). Same dtype and size, as the host kernels check.
auto MakeCopy(absl::string_view op_name, cudaMemcpyKind kind) {
  return [op = std::string(op_name), kind](auto) {
    return MakeCudaKernel(op, [op, kind](const CudaArgs& a) -> absl::Status {
      if (a.inputs.size() != 1 || a.outputs.size() != 1 ||
          a.inputs[0].dtype != a.outputs[0].dtype || a.inputs[0].size != a.outputs[0].size) {
        return OpError(op, "needs one input and one output of one dtype and size");
      }
      const bool in_on_host = a.inputs[0].blob->device().type() == DeviceType::kCpu;
      const bool out_on_host = a.outputs[0].blob->device().type() == DeviceType::kCpu;
      if (in_on_host != (kind == cudaMemcpyHostToDevice) ||
          out_on_host != (kind == cudaMemcpyDeviceToHost)) {
        return OpError(op, absl::StrCat("cannot copy ", a.inputs[0].Describe("input", 0), " on ",
                                        a.inputs[0].blob->device().ToString(), " to ",
                                        a.outputs[0].Describe("output", 0), " on ",
                                        a.outputs[0].blob->device().ToString()));
      }
      const size_t bytes = a.inputs[0].size * SizeOf(a.inputs[0].dtype);
      return CopyAsync(op, a, a.outputs[0].data, a.inputs[0].data, bytes, kind);
    });
  };
}

// cast, cast_grad: input 0 (key dtype In) converted element by element to output 0's dtype.
template <typename In>
absl::Status RunCast(absl::string_view op, const CudaArgs& a, int inputs) {
  SLUICE_RETURN_IF_ERROR(CheckCounts(op, a, inputs, 1));
  const HostTensor& x = a.inputs[0];
  const HostTensor& y = a.outputs[0];
  SLUICE_RETURN_IF_ERROR(CheckDtype(op, x, DataTypeOf<In>(), "input", 0));
  if (x.size != y.size) {
    return OpError(op, absl::StrCat(y.Describe("output", 0), " must have as many elements as ",
                                    x.Describe("input", 0)));
  }
  if (y.dtype == x.dtype) return CopyAsync(op, a, y.data, x.data, x.size * SizeOf(x.dtype));
  return VisitDtype(y.dtype, [&](auto tag) {
    using Out = typename decltype(tag)::type;
    return CudaStatus(
        op, gpu::LaunchCast<In, Out>(x.as<const In>(), y.as<Out>(), x.size, a.cuda_stream));
  });
}

template <typename T>
absl::Status RunSum(const CudaArgs& a) {
  constexpr absl::string_view kOp = "sum";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, -1, 1));
  SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
  const HostTensor& out = a.outputs[0];
  std::vector<const T*> xs;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (a.inputs[i].size != out.size) {
      return OpError(kOp,
                     absl::StrCat(a.inputs[i].Describe("input", static_cast<int>(i)),
                                  " must have as many elements as ", out.Describe("output", 0)));
    }
    xs.push_back(a.inputs[i].as<const T>());
  }
  if (out.size == 0) return absl::OkStatus();
  // Later passes add to Out: an input they read must not be Out itself.
  bool late_alias = false;
  for (size_t i = gpu::kSumInputsPerPass; i < xs.size(); ++i) late_alias |= xs[i] == out.data;
  if (!late_alias) {
    return CudaStatus(kOp, gpu::LaunchSum<T>(xs.data(), static_cast<int>(xs.size()), out.as<T>(),
                                             out.size, a.cuda_stream));
  }
  const size_t bytes = out.size * sizeof(T);
  SLUICE_ASSIGN_OR_RETURN(Scratch acc, Scratch::Allocate(kOp, a, bytes));
  SLUICE_RETURN_IF_ERROR(CudaStatus(kOp, gpu::LaunchSum<T>(xs.data(), static_cast<int>(xs.size()),
                                                           acc.as<T>(), out.size, a.cuda_stream)));
  return CopyAsync(kOp, a, out.data, acc.get(), bytes);
}

template <typename T>
absl::Status RunFill(const CudaArgs& a) {
  constexpr absl::string_view kOp = "fill_constant";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 0, 1));
  SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
  SLUICE_ASSIGN_OR_RETURN(const double value, a.attrs->GetFloat("value"));
  return CudaStatus(kOp, gpu::LaunchFill<T>(a.outputs[0].as<T>(), a.outputs[0].size,
                                            static_cast<T>(value), a.cuda_stream));
}

absl::Status RunFillZeros(const CudaArgs& a) {
  constexpr absl::string_view kOp = "fill_zeros_like";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 1, 1));
  const size_t bytes = a.outputs[0].size * SizeOf(a.outputs[0].dtype);
  if (bytes == 0) return absl::OkStatus();
  return CudaStatus(kOp, cudaMemsetAsync(a.outputs[0].data, 0, bytes, a.cuda_stream),
                    "cudaMemsetAsync");
}

template <typename T>
absl::Status RunScale(const CudaArgs& a) {
  constexpr absl::string_view kOp = "scale";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 1, 1));
  SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
  if (a.inputs[0].size != a.outputs[0].size) {
    return OpError(
        kOp, absl::StrCat(a.outputs[0].Describe("output", 0), " must have as many elements as ",
                          a.inputs[0].Describe("input", 0)));
  }
  SLUICE_ASSIGN_OR_RETURN(const double scale, a.attrs->GetFloat("scale"));
  SLUICE_ASSIGN_OR_RETURN(const double bias, a.attrs->GetFloat("bias"));
  return CudaStatus(
      kOp, gpu::LaunchScale<T>(a.inputs[0].as<const T>(), a.outputs[0].as<T>(), a.outputs[0].size,
                               static_cast<T>(scale), static_cast<T>(bias), a.cuda_stream));
}

template <typename T>
absl::Status RunUniform(const CudaArgs& a) {
  constexpr absl::string_view kOp = "uniform_random";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 0, 1));
  SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
  SLUICE_ASSIGN_OR_RETURN(const double lo, a.attrs->GetFloat("min"));
  SLUICE_ASSIGN_OR_RETURN(const double hi, a.attrs->GetFloat("max"));
  SLUICE_ASSIGN_OR_RETURN(const int64_t seed, a.attrs->GetInt("seed"));
  if (!(lo <= hi)) return OpError(kOp, absl::StrCat("min ", lo, " > max ", hi));
  return CudaStatus(kOp, gpu::LaunchUniform<T>(a.outputs[0].as<T>(), a.outputs[0].size, lo, hi,
                                               static_cast<uint64_t>(seed), a.cuda_stream));
}

template <typename T>
absl::Status RunGaussian(const CudaArgs& a) {
  constexpr absl::string_view kOp = "gaussian_random";
  SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 0, 1));
  SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
  SLUICE_ASSIGN_OR_RETURN(const double mean, a.attrs->GetFloat("mean"));
  SLUICE_ASSIGN_OR_RETURN(const double std, a.attrs->GetFloat("std"));
  SLUICE_ASSIGN_OR_RETURN(const int64_t seed, a.attrs->GetInt("seed"));
  if (!(std >= 0)) return OpError(kOp, absl::StrCat("std ", std, " is negative"));
  return CudaStatus(kOp, gpu::LaunchGaussian<T>(a.outputs[0].as<T>(), a.outputs[0].size, mean, std,
                                                static_cast<uint64_t>(seed), a.cuda_stream));
}

}  // namespace

absl::Status RegisterBasicCudaKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "fill_constant", [](auto tag) {
        using T = typename decltype(tag)::type;
        return MakeCudaKernel("fill_constant", RunFill<T>);
      })));
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "fill_zeros_like",
      [](auto) { return MakeCudaKernel("fill_zeros_like", RunFillZeros); })));
  const std::pair<const char*, cudaMemcpyKind> copies[] = {
      {"assign", cudaMemcpyDeviceToDevice},
      {"memcpy_h2d", cudaMemcpyHostToDevice},
      {"memcpy_d2h", cudaMemcpyDeviceToHost},
  };
  for (const auto& [op, kind] : copies) {
    // Copies through host memory are counted (counted_copy_kernel.h); assign is not.
    SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
        registry, op, [make = MakeCopy(op, kind), kind = kind](auto tag) {
          std::shared_ptr<const vm::OpKernel> kernel = make(tag);
          if (kind == cudaMemcpyDeviceToDevice) return kernel;
          return CountHostCopies(std::move(kernel), kind == cudaMemcpyHostToDevice);
        })));
  }
  for (const auto& [op, inputs] : {std::pair<const char*, int>{"cast", 1}, {"cast_grad", 2}}) {
    SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t, bool>(
        registry, op, [op = std::string(op), inputs = inputs](auto tag) {
          using In = typename decltype(tag)::type;
          return MakeCudaKernel(
              op, [op, inputs](const CudaArgs& a) { return RunCast<In>(op, a, inputs); });
        })));
  }
  SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double>(registry, "scale", [](auto tag) {
    return MakeCudaKernel("scale", RunScale<typename decltype(tag)::type>);
  })));
  SLUICE_RETURN_IF_ERROR(
      (RegisterCudaKernelsFor<float, double, int32_t, int64_t>(registry, "sum", [](auto tag) {
        return MakeCudaKernel("sum", RunSum<typename decltype(tag)::type>);
      })));
  SLUICE_RETURN_IF_ERROR(
      (RegisterCudaKernelsFor<float, double>(registry, "uniform_random", [](auto tag) {
        return MakeCudaKernel("uniform_random", RunUniform<typename decltype(tag)::type>);
      })));
  SLUICE_RETURN_IF_ERROR(
      (RegisterCudaKernelsFor<float, double>(registry, "gaussian_random", [](auto tag) {
        return MakeCudaKernel("gaussian_random", RunGaussian<typename decltype(tag)::type>);
      })));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
