// CUDA kernels (OpKernels) of the compare family (ops/compare_ops.cc), for the dtypes of its
// host kernels (ops/cpu/compare_kernels.cc) and with their operand checks: the comparisons
// (f32, f64, i32, i64 -> bool) and the binary logical ops (bool) as maps over the output's
// IndexPlan, logical_not (bool) and increment (f32, f64, i32, i64) as flat loops. The kernels
// are thread-safe (no mutable state), as CudaKernel says.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/cuda_launch.h"
#include "ops/internal/op_families.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace {

// Inputs X, Y of `dtype` and output bool of their broadcast shape: the output's map plan.
absl::StatusOr<gpu::IndexPlan> BroadcastPlan(absl::string_view op, const CudaArgs& a,
                                             DataType dtype) {
  SLUICE_RETURN_IF_ERROR(CheckCounts(op, a, 2, 1));
  SLUICE_RETURN_IF_ERROR(CheckDtype(op, a.inputs[0], dtype, "input", 0));
  SLUICE_RETURN_IF_ERROR(CheckDtype(op, a.inputs[1], dtype, "input", 1));
  SLUICE_RETURN_IF_ERROR(CheckDtype(op, a.outputs[0], DataType::kBool, "output", 0));
  const HostTensor& x = a.inputs[0];
  const HostTensor& y = a.inputs[1];
  const Shape& shape = *a.outputs[0].shape;
  SLUICE_RETURN_IF_ERROR(CheckBroadcastOutput(op, a, a.outputs[0]).status());
  const Shape::Dims sx = BroadcastStrides(*x.shape, shape);
  const Shape::Dims sy = BroadcastStrides(*y.shape, shape);
  std::vector<PlanDim> dims(shape.rank());
  for (int d = 0; d < shape.rank(); ++d) dims[d] = {shape.dim(d), false, {sx[d], sy[d], 0}};
  return MakeIndexPlan(op, dims, 2);
}

// X, Y -> Out bool: a comparison (dtype f32, f64, i32 or i64) or a logical op (dtype bool).
class BoolBinaryKernel final : public CudaKernel {
 public:
  BoolBinaryKernel(std::string op, DataType dtype, gpu::CompareOp compare)
      : CudaKernel(std::move(op)), dtype_(dtype), compare_(compare) {}
  BoolBinaryKernel(std::string op, gpu::LogicalOp logical)
      : CudaKernel(std::move(op)), dtype_(DataType::kBool), logical_(logical) {}

 protected:
  absl::Status Run(const CudaArgs& a) const override {
    const absl::string_view op = name();
    SLUICE_ASSIGN_OR_RETURN(const gpu::IndexPlan plan, BroadcastPlan(op, a, dtype_));
    if (a.outputs[0].size == 0) return absl::OkStatus();
    const void* x = a.inputs[0].data;
    const void* y = a.inputs[1].data;
    bool* out = a.outputs[0].as<bool>();
    return CudaStatus(
        op, VisitDtype(dtype_, [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_same_v<T, bool>) {
            return gpu::LaunchLogical(logical_, plan, static_cast<const uint8_t*>(x),
                                      static_cast<const uint8_t*>(y), out, a.cuda_stream);
          } else {
            return gpu::LaunchCompare<T>(compare_, plan, static_cast<const T*>(x),
                                         static_cast<const T*>(y), out, a.cuda_stream);
          }
        }));
  }

 private:
  const DataType dtype_;
  const gpu::CompareOp compare_ = gpu::CompareOp::kLess;
  const gpu::LogicalOp logical_ = gpu::LogicalOp::kAnd;
};

// X -> Out of X's dtype and shape.
absl::Status CheckUnary(absl::string_view op, const CudaArgs& a, DataType dtype) {
  SLUICE_RETURN_IF_ERROR(CheckCounts(op, a, 1, 1));
  SLUICE_RETURN_IF_ERROR(CheckDtypes(op, a, dtype));
  if (*a.outputs[0].shape == *a.inputs[0].shape) return absl::OkStatus();
  return OpError(op, absl::StrCat(a.outputs[0].Describe("output", 0), " must have the shape of ",
                                  a.inputs[0].Describe("input", 0)));
}

// increment for dtype T.
template <typename T>
absl::Status RunIncrement(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckUnary(op, a, DataTypeOf<T>()));
  SLUICE_ASSIGN_OR_RETURN(const double value, a.attrs->GetFloat("value"));
  SLUICE_RETURN_IF_ERROR(CheckIncrementValue(op, DataTypeOf<T>(), value));
  return CudaStatus(
      op, gpu::LaunchIncrement<T>(a.inputs[0].as<const T>(), a.outputs[0].as<T>(),
                                  a.outputs[0].size, static_cast<T>(value), a.cuda_stream));
}

}  // namespace

absl::Status RegisterCompareCudaKernels(OpRegistry* registry) {
  const std::pair<const char*, gpu::CompareOp> compare[] = {
      {"less_than", gpu::CompareOp::kLess},       {"less_equal", gpu::CompareOp::kLessEqual},
      {"greater_than", gpu::CompareOp::kGreater}, {"greater_equal", gpu::CompareOp::kGreaterEqual},
      {"equal", gpu::CompareOp::kEqual},          {"not_equal", gpu::CompareOp::kNotEqual},
  };
  for (const auto& [op, fn] : compare) {
    SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double, int32_t, int64_t>(
        registry, op, [op = op, fn = fn](auto tag) {
          using T = typename decltype(tag)::type;
          return std::make_shared<BoolBinaryKernel>(op, DataTypeOf<T>(), fn);
        })));
  }
  const std::pair<const char*, gpu::LogicalOp> logical[] = {
      {"logical_and", gpu::LogicalOp::kAnd},
      {"logical_or", gpu::LogicalOp::kOr},
      {"logical_xor", gpu::LogicalOp::kXor},
  };
  for (const auto& [op, fn] : logical) {
    SLUICE_RETURN_IF_ERROR(registry->RegisterKernel(op, {DeviceType::kCuda}, DataType::kBool,
                                                    std::make_shared<BoolBinaryKernel>(op, fn)));
  }
  SLUICE_RETURN_IF_ERROR(registry->RegisterKernel(
      "logical_not", {DeviceType::kCuda}, DataType::kBool,
      MakeCudaKernel("logical_not", [](const CudaArgs& a) -> absl::Status {
        SLUICE_RETURN_IF_ERROR(CheckUnary("logical_not", a, DataType::kBool));
        return CudaStatus("logical_not", gpu::LaunchLogicalNot(a.inputs[0].as<const uint8_t>(),
                                                               a.outputs[0].as<bool>(),
                                                               a.outputs[0].size, a.cuda_stream));
      })));
  return RegisterCudaKernelsFor<float, double, int32_t, int64_t>(
      registry, "increment", [](auto tag) {
        using T = typename decltype(tag)::type;
        return MakeCudaKernel("increment",
                              [](const CudaArgs& a) { return RunIncrement<T>("increment", a); });
      });
}

}  // namespace sluice::ops::internal
