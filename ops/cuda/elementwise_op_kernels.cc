// CUDA kernels (OpKernels) of the elementwise family (ops/elementwise_ops.cc), f32 and f64
// (and i32 and i64 for max and min; the other integer kernels are in
// ops/cuda/integer_arith_op_kernels.cc), with the host kernels' operand checks
// (ops/cpu/elementwise_kernels.cc). A binary op runs as a map over the output's IndexPlan; a
// binary grad op computes each input's gradient as a map (the input was not broadcast) or as
// sums over the broadcast dims, reading from copies of any input that is also an output
// (in-place use), as the host kernels do.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/cuda_launch.h"
#include "ops/internal/clip_bounds.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace {

absl::Status CheckOperands(absl::string_view op, const CudaArgs& a, int inputs, int outputs,
                           DataType dtype) {
  SLUICE_RETURN_IF_ERROR(CheckCounts(op, a, inputs, outputs));
  return CheckDtypes(op, a, dtype);
}

// The broadcast of inputs 0 and 1 must be `out`'s shape (output 0, or OutGrad: input 2).
absl::Status CheckBroadcast(absl::string_view op, const CudaArgs& a, const HostTensor& out,
                            absl::string_view out_role, int out_index) {
  return CheckBroadcastOutput(op, a, out, out_role, out_index).status();
}

class BinaryKernel final : public CudaKernel {
 public:
  BinaryKernel(std::string op, DataType dtype, gpu::BinaryOp fn)
      : CudaKernel(std::move(op)), dtype_(dtype), fn_(fn) {}

 protected:
  absl::Status Run(const CudaArgs& a) const override {
    const absl::string_view op = name();
    SLUICE_RETURN_IF_ERROR(CheckOperands(op, a, 2, 1, dtype_));
    const HostTensor& out = a.outputs[0];
    SLUICE_RETURN_IF_ERROR(CheckBroadcast(op, a, out, "output", 0));
    if (out.size == 0) return absl::OkStatus();
    const Shape& shape = *out.shape;
    const Shape::Dims sx = BroadcastStrides(*a.inputs[0].shape, shape);
    const Shape::Dims sy = BroadcastStrides(*a.inputs[1].shape, shape);
    std::vector<PlanDim> dims(shape.rank());
    for (int d = 0; d < shape.rank(); ++d) dims[d] = {shape.dim(d), false, {sx[d], sy[d], 0}};
    SLUICE_ASSIGN_OR_RETURN(const gpu::IndexPlan plan, MakeIndexPlan(op, dims, 2));
    switch (dtype_) {
      case DataType::kF32:
        return Launch<float>(a, plan);
      case DataType::kF64:
        return Launch<double>(a, plan);
      case DataType::kI32:
        return Launch<int32_t>(a, plan);
      case DataType::kI64:
        return Launch<int64_t>(a, plan);
      case DataType::kBool:
        break;
    }
    return OpError(op, absl::StrCat("no cuda kernel for ", DataTypeName(dtype_)));
  }

 private:
  template <typename T>
  absl::Status Launch(const CudaArgs& a, const gpu::IndexPlan& plan) const {
    return CudaStatus(name(), gpu::LaunchBinary<T>(fn_, plan, a.inputs[0].as<const T>(),
                                                   a.inputs[1].as<const T>(), a.outputs[0].as<T>(),
                                                   a.cuda_stream));
  }

  const DataType dtype_;
  const gpu::BinaryOp fn_;
};

// X, Y, OutGrad -> XGrad, YGrad.
class BinaryGradKernel final : public CudaKernel {
 public:
  BinaryGradKernel(std::string op, DataType dtype, gpu::BinaryGradOp grad_x,
                   gpu::BinaryGradOp grad_y)
      : CudaKernel(std::move(op)), dtype_(dtype), grad_x_(grad_x), grad_y_(grad_y) {}

 protected:
  absl::Status Run(const CudaArgs& a) const override {
    const absl::string_view op = name();
    SLUICE_RETURN_IF_ERROR(CheckOperands(op, a, 3, 2, dtype_));
    SLUICE_RETURN_IF_ERROR(CheckBroadcast(op, a, a.inputs[2], "input", 2));
    SLUICE_RETURN_IF_ERROR(CheckSameShape(op, a.outputs[0], "output", 0, a.inputs[0], "input", 0));
    SLUICE_RETURN_IF_ERROR(CheckSameShape(op, a.outputs[1], "output", 1, a.inputs[1], "input", 1));
    if (a.outputs[0].size == 0 && a.outputs[1].size == 0) return absl::OkStatus();

    // An input that is also an output would be overwritten by the first pass while the
    // second reads it: read such inputs from a copy.
    const void* in[3];
    std::vector<Scratch> copies;
    for (int i = 0; i < 3; ++i) {
      in[i] = a.inputs[i].data;
      if (in[i] == a.outputs[0].data || in[i] == a.outputs[1].data) {
        const size_t bytes = a.inputs[i].size * SizeOf(dtype_);
        SLUICE_ASSIGN_OR_RETURN(Scratch copy, Scratch::Allocate(op, a, bytes));
        SLUICE_RETURN_IF_ERROR(CopyAsync(op, a, copy.get(), in[i], bytes));
        in[i] = copy.get();
        copies.push_back(std::move(copy));
      }
    }
    const Shape& shape = *a.inputs[2].shape;
    const Shape::Dims sx = BroadcastStrides(*a.inputs[0].shape, shape);
    const Shape::Dims sy = BroadcastStrides(*a.inputs[1].shape, shape);
    const Shape::Dims sg = shape.Strides();
    for (int target = 0; target < 2; ++target) {
      const HostTensor& out = a.outputs[target];
      if (out.size == 0) continue;
      const Shape::Dims& st = target == 0 ? sx : sy;
      std::vector<PlanDim> dims(shape.rank());
      for (int d = 0; d < shape.rank(); ++d) {
        dims[d] = {shape.dim(d), st[d] == 0, {sx[d], sy[d], sg[d]}};
      }
      SLUICE_ASSIGN_OR_RETURN(const gpu::IndexPlan plan, MakeIndexPlan(op, dims, 3));
      const gpu::BinaryGradOp fn = target == 0 ? grad_x_ : grad_y_;
      const cudaError_t error =
          dtype_ == DataType::kF32
              ? gpu::LaunchBinaryGrad<float>(
                    fn, plan, static_cast<const float*>(in[0]), static_cast<const float*>(in[1]),
                    static_cast<const float*>(in[2]), out.as<float>(), a.cuda_stream)
              : gpu::LaunchBinaryGrad<double>(
                    fn, plan, static_cast<const double*>(in[0]), static_cast<const double*>(in[1]),
                    static_cast<const double*>(in[2]), out.as<double>(), a.cuda_stream);
      SLUICE_RETURN_IF_ERROR(CudaStatus(op, error));
    }
    return absl::OkStatus();
  }

 private:
  const DataType dtype_;
  const gpu::BinaryGradOp grad_x_;
  const gpu::BinaryGradOp grad_y_;
};

// X -> Out (grad false), or V, OutGrad -> XGrad (grad true).
class UnaryKernel final : public CudaKernel {
 public:
  UnaryKernel(std::string op, DataType dtype, gpu::UnaryOp fn, bool grad)
      : CudaKernel(std::move(op)), dtype_(dtype), fn_(fn), grad_(grad) {}

 protected:
  absl::Status Run(const CudaArgs& a) const override {
    const absl::string_view op = name();
    SLUICE_RETURN_IF_ERROR(CheckOperands(op, a, grad_ ? 2 : 1, 1, dtype_));
    SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(op, a, grad_));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return absl::OkStatus();
    cudaError_t error;
    if (dtype_ == DataType::kF32) {
      error = grad_ ? gpu::LaunchUnaryGrad<float>(fn_, a.inputs[0].as<const float>(),
                                                  a.inputs[1].as<const float>(),
                                                  a.outputs[0].as<float>(), n, a.cuda_stream)
                    : gpu::LaunchUnary<float>(fn_, a.inputs[0].as<const float>(),
                                              a.outputs[0].as<float>(), n, a.cuda_stream);
    } else {
      error = grad_ ? gpu::LaunchUnaryGrad<double>(fn_, a.inputs[0].as<const double>(),
                                                   a.inputs[1].as<const double>(),
                                                   a.outputs[0].as<double>(), n, a.cuda_stream)
                    : gpu::LaunchUnary<double>(fn_, a.inputs[0].as<const double>(),
                                               a.outputs[0].as<double>(), n, a.cuda_stream);
    }
    return CudaStatus(op, error);
  }

 private:
  const DataType dtype_;
  const gpu::UnaryOp fn_;
  const bool grad_;
};

// clip (X -> Out) and clip_grad (X, OutGrad -> XGrad), with the bounds converted as the
// host kernels convert them (ops/internal/clip_bounds.h).
template <typename T>
absl::Status RunClip(absl::string_view op, const CudaArgs& a, bool grad) {
  SLUICE_RETURN_IF_ERROR(CheckOperands(op, a, grad ? 2 : 1, 1, DataTypeOf<T>()));
  SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(op, a, grad));
  SLUICE_ASSIGN_OR_RETURN(const double lo, a.attrs->GetFloat("min"));
  SLUICE_ASSIGN_OR_RETURN(const double hi, a.attrs->GetFloat("max"));
  SLUICE_ASSIGN_OR_RETURN(const ClipBounds<T> b, MakeClipBounds<T>(op, lo, hi));
  const int64_t n = a.outputs[0].size;
  if (grad) {
    if constexpr (std::is_floating_point_v<T>) {
      return CudaStatus(op,
                        gpu::LaunchClipGrad<T>(a.inputs[0].as<const T>(), a.inputs[1].as<const T>(),
                                               a.outputs[0].as<T>(), n, b.lo, b.hi, a.cuda_stream));
    } else {
      return OpError(op, "has no integer kernel");  // not registered for integers
    }
  }
  return CudaStatus(op, gpu::LaunchClip<T>(a.inputs[0].as<const T>(), a.outputs[0].as<T>(), n, b.lo,
                                           b.hi, a.cuda_stream));
}

// pow and pow_grad (attribute factor), f32 and f64.
template <typename T>
absl::Status RunPow(absl::string_view op, const CudaArgs& a, bool grad) {
  SLUICE_RETURN_IF_ERROR(CheckOperands(op, a, grad ? 2 : 1, 1, DataTypeOf<T>()));
  SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(op, a, grad));
  SLUICE_ASSIGN_OR_RETURN(const double factor, a.attrs->GetFloat("factor"));
  const int64_t n = a.outputs[0].size;
  const T f = static_cast<T>(factor);
  if (grad) {
    return CudaStatus(op,
                      gpu::LaunchPowGrad<T>(a.inputs[0].as<const T>(), a.inputs[1].as<const T>(),
                                            a.outputs[0].as<T>(), n, f, a.cuda_stream));
  }
  return CudaStatus(
      op, gpu::LaunchPow<T>(a.inputs[0].as<const T>(), a.outputs[0].as<T>(), n, f, a.cuda_stream));
}

// Registers make(op, dtype) for f32 and f64, and also for i32 and i64 when `integers`.
template <typename Make>
absl::Status RegisterFor(OpRegistry* registry, const std::string& op, Make make,
                         bool integers = false) {
  for (DataType dtype : {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64}) {
    if (!integers && !IsFloating(dtype)) continue;
    SLUICE_RETURN_IF_ERROR(registry->RegisterKernel(
        op, {DeviceType::kCuda}, dtype, std::shared_ptr<const vm::OpKernel>(make(dtype))));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterElementwiseCudaKernels(OpRegistry* registry) {
  using gpu::BinaryGradOp;
  struct Binary {
    const char* op;
    gpu::BinaryOp fn;
    BinaryGradOp grad_x;
    BinaryGradOp grad_y;
  };
  const Binary binary[] = {
      {"add", gpu::BinaryOp::kAdd, BinaryGradOp::kG, BinaryGradOp::kG},
      {"sub", gpu::BinaryOp::kSub, BinaryGradOp::kG, BinaryGradOp::kNegG},
      {"mul", gpu::BinaryOp::kMul, BinaryGradOp::kMulX, BinaryGradOp::kMulY},
      {"div", gpu::BinaryOp::kDiv, BinaryGradOp::kDivX, BinaryGradOp::kDivY},
      {"max", gpu::BinaryOp::kMax, BinaryGradOp::kMaxX, BinaryGradOp::kMaxY},
      {"min", gpu::BinaryOp::kMin, BinaryGradOp::kMinX, BinaryGradOp::kMinY},
  };
  for (const Binary& b : binary) {
    // max and min also take i32 and i64 (as their schemas and host kernels do).
    const bool integers = b.fn == gpu::BinaryOp::kMax || b.fn == gpu::BinaryOp::kMin;
    SLUICE_RETURN_IF_ERROR(RegisterFor(
        registry, b.op,
        [&](DataType dtype) { return std::make_shared<BinaryKernel>(b.op, dtype, b.fn); },
        integers));
    const std::string grad = absl::StrCat(b.op, "_grad");
    SLUICE_RETURN_IF_ERROR(RegisterFor(registry, grad, [&](DataType dtype) {
      return std::make_shared<BinaryGradKernel>(grad, dtype, b.grad_x, b.grad_y);
    }));
  }
  const std::pair<const char*, gpu::UnaryOp> unary[] = {
      {"relu", gpu::UnaryOp::kRelu},     {"sigmoid", gpu::UnaryOp::kSigmoid},
      {"tanh", gpu::UnaryOp::kTanh},     {"exp", gpu::UnaryOp::kExp},
      {"log", gpu::UnaryOp::kLog},       {"sqrt", gpu::UnaryOp::kSqrt},
      {"square", gpu::UnaryOp::kSquare}, {"abs", gpu::UnaryOp::kAbs},
      {"neg", gpu::UnaryOp::kNeg},
  };
  for (const auto& [op, fn] : unary) {
    for (const bool grad : {false, true}) {
      if (grad && fn == gpu::UnaryOp::kNeg) continue;  // neg's gradient is a neg
      const std::string name = grad ? absl::StrCat(op, "_grad") : std::string(op);
      SLUICE_RETURN_IF_ERROR(RegisterFor(registry, name, [&](DataType dtype) {
        return std::make_shared<UnaryKernel>(name, dtype, fn, grad);
      }));
    }
  }
  for (const bool grad : {false, true}) {
    const char* name = grad ? "pow_grad" : "pow";
    const auto make = [&](auto tag) {
      using T = typename decltype(tag)::type;
      return MakeCudaKernel(name,
                            [name, grad](const CudaArgs& a) { return RunPow<T>(name, a, grad); });
    };
    SLUICE_RETURN_IF_ERROR((RegisterCudaKernelsFor<float, double>(registry, name, make)));
  }
  // clip takes i32 and i64 as max and min do; clip_grad is f32 and f64 only.
  SLUICE_RETURN_IF_ERROR(
      (RegisterCudaKernelsFor<float, double, int32_t, int64_t>(registry, "clip", [](auto tag) {
        using T = typename decltype(tag)::type;
        return MakeCudaKernel("clip",
                              [](const CudaArgs& a) { return RunClip<T>("clip", a, false); });
      })));
  SLUICE_RETURN_IF_ERROR(
      (RegisterCudaKernelsFor<float, double>(registry, "clip_grad", [](auto tag) {
        using T = typename decltype(tag)::type;
        return MakeCudaKernel("clip_grad",
                              [](const CudaArgs& a) { return RunClip<T>("clip_grad", a, true); });
      })));
  // add, sub, mul, div, neg, abs and relu on i32 and i64 (their own element functions).
  return RegisterIntegerArithCudaKernels(registry);
}

}  // namespace sluice::ops::internal
