#include "ops/stress_kernels.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::ops {
namespace {

using vm::Blob;
using vm::KernelContext;

absl::Status CheckArity(const KernelContext& ctx, absl::string_view op, size_t inputs,
                        size_t outputs) {
  if (ctx.inputs().size() != inputs || ctx.outputs().size() != outputs) {
    return absl::InvalidArgumentError(absl::StrCat(op, " takes ", inputs, " input(s) and ", outputs,
                                                   " output(s), got ", ctx.inputs().size(), " and ",
                                                   ctx.outputs().size()));
  }
  return absl::OkStatus();
}

absl::Status CheckF32(const Blob* blob, absl::string_view role) {
  if (blob->dtype() != DataType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(role, " ", blob->DebugName(), " is ",
                                                   DataTypeName(blob->dtype()),
                                                   "; only f32 is supported"));
  }
  if (blob->raw_storage() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(role, " ", blob->DebugName(), " was released"));
  }
  return absl::OkStatus();
}

absl::Status CheckSameShape(const Blob* a, const Blob* b) {
  if (!(a->shape() == b->shape())) {
    return absl::InvalidArgumentError(absl::StrCat("shape mismatch: ", a->DebugName(), " is ",
                                                   a->shape().ToString(), ", ", b->DebugName(),
                                                   " is ", b->shape().ToString()));
  }
  return absl::OkStatus();
}

float* F32(const Blob* blob) { return static_cast<float*>(blob->raw_storage()->data()); }
int64_t Count(const Blob* blob) { return static_cast<int64_t>(blob->bytes() / sizeof(float)); }

class NoopKernel final : public vm::OpKernel {
 public:
  absl::string_view name() const override { return "noop"; }
  absl::Status Launch(KernelContext&) const override { return absl::OkStatus(); }
};

class FillKernel final : public vm::OpKernel {
 public:
  absl::string_view name() const override { return "fill"; }
  absl::Status Launch(KernelContext& ctx) const override {
    SLUICE_RETURN_IF_ERROR(CheckArity(ctx, "fill", 0, 1));
    Blob* y = ctx.outputs()[0];
    SLUICE_RETURN_IF_ERROR(CheckF32(y, "output"));
    SLUICE_ASSIGN_OR_RETURN(const double value, ctx.attrs().GetFloat("value"));
    float* out = F32(y);
    const int64_t n = Count(y);
    const float v = static_cast<float>(value);
    return ctx.LaunchHostWork([out, n, v]() {
      for (int64_t i = 0; i < n; ++i) out[i] = v;
      return absl::OkStatus();
    });
  }
};

template <typename Op>
class BinaryKernel final : public vm::OpKernel {
 public:
  explicit BinaryKernel(absl::string_view name) : name_(name) {}
  absl::string_view name() const override { return name_; }
  absl::Status Launch(KernelContext& ctx) const override {
    SLUICE_RETURN_IF_ERROR(CheckArity(ctx, name_, 2, 1));
    Blob* a = ctx.inputs()[0];
    Blob* b = ctx.inputs()[1];
    Blob* y = ctx.outputs()[0];
    SLUICE_RETURN_IF_ERROR(CheckF32(a, "input"));
    SLUICE_RETURN_IF_ERROR(CheckF32(b, "input"));
    SLUICE_RETURN_IF_ERROR(CheckF32(y, "output"));
    SLUICE_RETURN_IF_ERROR(CheckSameShape(a, b));
    SLUICE_RETURN_IF_ERROR(CheckSameShape(a, y));
    const float* pa = F32(a);
    const float* pb = F32(b);
    float* py = F32(y);
    const int64_t n = Count(y);
    return ctx.LaunchHostWork([pa, pb, py, n]() {
      Op op;
      for (int64_t i = 0; i < n; ++i) py[i] = op(pa[i], pb[i]);
      return absl::OkStatus();
    });
  }

 private:
  const absl::string_view name_;
};

struct AddOp {
  float operator()(float a, float b) const { return a + b; }
};
struct MulOp {
  float operator()(float a, float b) const { return a * b; }
};

class ScaleKernel final : public vm::OpKernel {
 public:
  absl::string_view name() const override { return "scale"; }
  absl::Status Launch(KernelContext& ctx) const override {
    SLUICE_RETURN_IF_ERROR(CheckArity(ctx, "scale", 1, 1));
    Blob* x = ctx.inputs()[0];
    Blob* y = ctx.outputs()[0];
    SLUICE_RETURN_IF_ERROR(CheckF32(x, "input"));
    SLUICE_RETURN_IF_ERROR(CheckF32(y, "output"));
    SLUICE_RETURN_IF_ERROR(CheckSameShape(x, y));
    SLUICE_ASSIGN_OR_RETURN(const double alpha, ctx.attrs().GetFloat("alpha"));
    absl::StatusOr<double> beta = ctx.attrs().GetFloat("beta");
    const float a = static_cast<float>(alpha);
    const float b = beta.ok() ? static_cast<float>(*beta) : 0.0f;
    const float* px = F32(x);
    float* py = F32(y);
    const int64_t n = Count(y);
    return ctx.LaunchHostWork([px, py, n, a, b]() {
      for (int64_t i = 0; i < n; ++i) py[i] = a * px[i] + b;
      return absl::OkStatus();
    });
  }
};

class CopyKernel final : public vm::OpKernel {
 public:
  absl::string_view name() const override { return "copy"; }
  absl::Status Launch(KernelContext& ctx) const override {
    SLUICE_RETURN_IF_ERROR(CheckArity(ctx, "copy", 1, 1));
    Blob* x = ctx.inputs()[0];
    Blob* y = ctx.outputs()[0];
    SLUICE_RETURN_IF_ERROR(CheckF32(x, "input"));
    SLUICE_RETURN_IF_ERROR(CheckF32(y, "output"));
    SLUICE_RETURN_IF_ERROR(CheckSameShape(x, y));
    if (x->device().type() == DeviceType::kCuda || y->device().type() == DeviceType::kCuda) {
      return absl::UnimplementedError("copy: cuda memory is not host-addressable");
    }
    const void* src = x->raw_storage()->data();
    void* dst = y->raw_storage()->data();
    const size_t bytes = y->bytes();
    return ctx.LaunchHostWork([src, dst, bytes]() {
      if (src != dst) std::memmove(dst, src, bytes);
      return absl::OkStatus();
    });
  }
};

}  // namespace

absl::Status RegisterStressKernels(KernelRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->Register(std::make_unique<NoopKernel>()));
  SLUICE_RETURN_IF_ERROR(registry->Register(std::make_unique<FillKernel>()));
  SLUICE_RETURN_IF_ERROR(registry->Register(std::make_unique<BinaryKernel<AddOp>>("add")));
  SLUICE_RETURN_IF_ERROR(registry->Register(std::make_unique<BinaryKernel<MulOp>>("mul")));
  SLUICE_RETURN_IF_ERROR(registry->Register(std::make_unique<ScaleKernel>()));
  SLUICE_RETURN_IF_ERROR(registry->Register(std::make_unique<CopyKernel>()));
  return absl::OkStatus();
}

}  // namespace sluice::ops
