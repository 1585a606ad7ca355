// Host kernels (cpu and sim) of the elementwise family (ops/elementwise_ops.cc), f32 and f64,
// and i32 and i64 for max, min and clip (and, from ops/cpu/integer_arith_kernels.cc, for add,
// sub, mul, div, neg, abs and relu).
// The loops live in ops/cpu/elementwise_loops.h: same shapes run as one contiguous row, a
// broadcast scalar as one row against a constant, and other broadcasts as rows of the
// collapsed output with the innermost dimension contiguous. An output may be an input's
// tensor (in-place use, through OpDispatcher::CallInto).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/elementwise_functions.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/clip_bounds.h"
#include "ops/internal/op_families.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace {

// Elementwise loops of at least this many elements split across the device's intra-op
// threads (HostArgs::parallel), in chunks of at least kParallelGrain: each element is
// computed alone, so the split cannot change a value.
constexpr int64_t kParallelElements = int64_t{1} << 17;
constexpr int64_t kParallelGrain = int64_t{1} << 15;

// The scope a loop of `n` elements captures: none below the threshold, so that small ops do
// not look it up (and run on their thread).
ParallelScope ScopeFor(const HostArgs& a, int64_t n) {
  return n < kParallelElements ? ParallelScope() : a.parallel();
}

// body(begin, end) over [0, n): split across `parallel` (ScopeFor's), or at once without a pool.
template <typename Body>
absl::Status SplitElements(const ParallelScope& parallel, int64_t n, Body body) {
  if (parallel.pool() == nullptr) {
    body(int64_t{0}, n);
    return absl::OkStatus();
  }
  return parallel.For(n, kParallelGrain, body, "elementwise loop");
}

using elementwise::BroadcastPlan;
// The element functions (elementwise_functions.h).
using namespace elementwise;  // NOLINT(build/namespaces): dozens of functor names

// A list of element types to register a kernel for.
template <typename... Ts>
struct TypeList {};

// ---- Kernels ----

// Operand checks shared by the kernels of the family.
template <typename T>
class ElementwiseKernel : public HostKernel {
 public:
  using HostKernel::HostKernel;

 protected:
  absl::Status CheckOperands(const HostArgs& a, int inputs, int outputs) const {
    SLUICE_RETURN_IF_ERROR(CheckArity(a, inputs, outputs));
    for (int i = 0; i < inputs; ++i) {
      SLUICE_RETURN_IF_ERROR(CheckDtype(a.inputs[i], DataTypeOf<T>(), "input", i));
    }
    for (int i = 0; i < outputs; ++i) {
      SLUICE_RETURN_IF_ERROR(CheckDtype(a.outputs[i], DataTypeOf<T>(), "output", i));
    }
    return absl::OkStatus();
  }
  absl::Status CheckSameShape(const HostTensor& t, absl::string_view role, int index,
                              const HostTensor& like, absl::string_view like_role,
                              int like_index) const {
    return internal::CheckSameShape(this->name(), t, role, index, like, like_role, like_index);
  }
  // The broadcast of inputs 0 and 1 must be `out`'s shape (output 0, or OutGrad: input 2).
  absl::StatusOr<BroadcastPlan> Plan(const HostArgs& a, const HostTensor& out,
                                     absl::string_view out_role, int out_index) const {
    SLUICE_RETURN_IF_ERROR(CheckBroadcastOutput(name(), a, out, out_role, out_index).status());
    return elementwise::MakeBroadcastPlan(*a.inputs[0].shape, *a.inputs[1].shape, *out.shape);
  }
};

// X, Y -> Out.
template <typename T, typename Fn>
class BinaryKernel final : public ElementwiseKernel<T> {
 public:
  using ElementwiseKernel<T>::ElementwiseKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a, 2, 1));
    if (*a.inputs[0].shape == *a.outputs[0].shape && *a.inputs[1].shape == *a.outputs[0].shape) {
      // No broadcasting (the common eager case): skip building a plan.
      const int64_t n = a.outputs[0].size;
      if (n == 0) return HostWork(nullptr);
      const T* x = a.inputs[0].template as<const T>();
      const T* y = a.inputs[1].template as<const T>();
      T* out = a.outputs[0].template as<T>();
      return HostWork([x, y, out, n, parallel = ScopeFor(a, n)] {
        return SplitElements(parallel, n, [&](int64_t b, int64_t e) {
          elementwise::RunBinarySameShape(x + b, y + b, out + b, e - b, Fn{});
        });
      });
    }
    SLUICE_ASSIGN_OR_RETURN(BroadcastPlan plan, this->Plan(a, a.outputs[0], "output", 0));
    if (plan.size == 0) return HostWork(nullptr);
    const T* x = a.inputs[0].template as<const T>();
    const T* y = a.inputs[1].template as<const T>();
    T* out = a.outputs[0].template as<T>();
    return HostWork([plan = std::move(plan), x, y, out] {
      elementwise::RunBinary(plan, x, y, out, Fn{});
      return absl::OkStatus();
    });
  }
  absl::Status RunNow(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a, 2, 1));
    if (*a.inputs[0].shape == *a.outputs[0].shape && *a.inputs[1].shape == *a.outputs[0].shape) {
      // As Prepare's common case, done here: no work object to build.
      const T* x = a.inputs[0].template as<const T>();
      const T* y = a.inputs[1].template as<const T>();
      T* out = a.outputs[0].template as<T>();
      return SplitElements(ScopeFor(a, a.outputs[0].size), a.outputs[0].size,
                           [&](int64_t b, int64_t e) {
                             elementwise::RunBinarySameShape(x + b, y + b, out + b, e - b, Fn{});
                           });
    }
    return HostKernel::RunNow(a);
  }
};

// X, Y, OutGrad -> XGrad, YGrad. add_grad and sub_grad read only X's and Y's shapes
// (ReadsShapeOnly): their data pointers are null, and the passes get OutGrad in their place
// (in bounds: an input of a broadcast is never larger than its output; the contributions
// never use those values).
template <typename T, typename GradX, typename GradY>
class BinaryGradKernel final : public ElementwiseKernel<T> {
 public:
  using ElementwiseKernel<T>::ElementwiseKernel;
  static constexpr bool kShapeOnlyXY =
      std::is_same_v<GradX, GradG> &&
      (std::is_same_v<GradY, GradG> || std::is_same_v<GradY, GradNegG>);
  bool ReadsShapeOnly(int input) const override { return kShapeOnlyXY && input < 2; }
  // Either gradient can be added into its output (vm::kAddToAttr): it is computed as
  // without the bit, into a buffer that lives only during the kernel, then added, so the
  // result is the sum op's bit for bit (a broadcast input's gradient is itself a sum).
  bool CanAddTo(int output) const override { return output == 0 || output == 1; }

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a, 3, 2));
    SLUICE_ASSIGN_OR_RETURN(BroadcastPlan plan, this->Plan(a, a.inputs[2], "input", 2));
    SLUICE_RETURN_IF_ERROR(
        this->CheckSameShape(a.outputs[0], "output", 0, a.inputs[0], "input", 0));
    SLUICE_RETURN_IF_ERROR(
        this->CheckSameShape(a.outputs[1], "output", 1, a.inputs[1], "input", 1));
    if (a.outputs[0].size == 0 && a.outputs[1].size == 0) return HostWork(nullptr);
    struct Operands {
      const T* in[3];  // X, Y, OutGrad
      int64_t in_size[3];
      T* dx;
      T* dy;
      int64_t dx_size;
      int64_t dy_size;
    };
    Operands ops;
    for (int i = 0; i < 3; ++i) {
      ops.in[i] = a.inputs[i].template as<const T>();
      ops.in_size[i] = a.inputs[i].size;
    }
    ops.dx = a.outputs[0].template as<T>();
    ops.dy = a.outputs[1].template as<T>();
    ops.dx_size = a.outputs[0].size;
    ops.dy_size = a.outputs[1].size;
    const int64_t adds = AddToBits(a);
    // No element to stand in with (X may be [1] while Out is [0]): every sum is empty.
    const bool empty_stand_in = kShapeOnlyXY && ops.in_size[2] == 0;
    if (kShapeOnlyXY) ops.in[0] = ops.in[1] = ops.in[2];
    return HostWork(
        [plan = std::move(plan), ops, adds, empty_stand_in, outs = a.outputs]() -> absl::Status {
          SLUICE_RETURN_IF_ERROR(AddedIntoPoison(outs, adds));
          AddedOutput<T> dx(ops.dx, ops.dx_size, (adds & 1) != 0);
          AddedOutput<T> dy(ops.dy, ops.dy_size, (adds & 2) != 0);
          if (empty_stand_in) {
            std::fill(dx.target(), dx.target() + ops.dx_size, T(0));
            std::fill(dy.target(), dy.target() + ops.dy_size, T(0));
          } else {
            // An output may be an input's tensor (in-place use). The XGrad pass would then
            // overwrite what the YGrad pass reads: read such inputs from a copy.
            std::vector<T> copies[3];
            const T* in[3];
            for (int i = 0; i < 3; ++i) {
              in[i] = ops.in[i];
              if (in[i] == ops.dx || in[i] == ops.dy) {
                copies[i].assign(in[i], in[i] + ops.in_size[i]);
                in[i] = copies[i].data();
              }
            }
            elementwise::RunGradPass<true>(plan, in[0], in[1], in[2], dx.target(), ops.dx_size,
                                           GradX{});
            elementwise::RunGradPass<false>(plan, in[0], in[1], in[2], dy.target(), ops.dy_size,
                                            GradY{});
          }
          dx.AddInto();
          dy.AddInto();
          return absl::OkStatus();
        });
  }
};

// X -> Out.
template <typename T, typename Fn>
class UnaryKernel final : public ElementwiseKernel<T> {
 public:
  using ElementwiseKernel<T>::ElementwiseKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a, 1, 1));
    SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(this->name(), a, /*grad=*/false));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    const T* x = a.inputs[0].template as<const T>();
    T* out = a.outputs[0].template as<T>();
    return HostWork([x, out, n, parallel = ScopeFor(a, n)] {
      return SplitElements(parallel, n, [&](int64_t b, int64_t e) {
        if constexpr (std::is_same_v<Fn, SqrtFn>) {
          elementwise::RunSqrt(x + b, out + b, e - b);
        } else {
          elementwise::RunUnary(x + b, out + b, e - b, Fn{});
        }
      });
    });
  }
};

// V (X or Out), OutGrad -> XGrad; with vm::kAddToAttr bit 0, XGrad += the gradient (an
// XGrad that aliases an input is refused then: it would be read after it was written).
template <typename T, typename Fn>
class UnaryGradKernel final : public ElementwiseKernel<T> {
 public:
  using ElementwiseKernel<T>::ElementwiseKernel;
  bool CanAddTo(int output) const override { return output == 0; }

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a, 2, 1));
    SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(this->name(), a, /*grad=*/true));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    const T* v = a.inputs[0].template as<const T>();
    const T* g = a.inputs[1].template as<const T>();
    T* dx = a.outputs[0].template as<T>();
    const bool add = (AddToBits(a) & 1) != 0;
    if (add && (dx == v || dx == g)) {
      return this->Error("output 0 adds into itself (addto) but is also an input");
    }
    return HostWork([v, g, dx, n, add, outs = a.outputs, parallel = ScopeFor(a, n)] {
      SLUICE_RETURN_IF_ERROR(AddedIntoPoison(outs, add ? 1 : 0));
      return SplitElements(parallel, n, [&](int64_t b, int64_t e) {
        if (add) {
          elementwise::UnaryGradAddLoop(v + b, g + b, dx + b, e - b, Fn{});
        } else {
          elementwise::RunUnaryGrad(v + b, g + b, dx + b, e - b, Fn{});
        }
      });
    });
  }
};

// The attributes 'min' and 'max' as T (ops/internal/clip_bounds.h), checked again here: a
// kernel can be called without the schema's inference (replayed records, direct calls).
template <typename T>
absl::StatusOr<ClipBounds<T>> ClipAttrs(absl::string_view op, const HostArgs& a) {
  SLUICE_ASSIGN_OR_RETURN(const double lo, a.attrs->GetFloat("min"));
  SLUICE_ASSIGN_OR_RETURN(const double hi, a.attrs->GetFloat("max"));
  return MakeClipBounds<T>(op, lo, hi);
}

// clip: X -> Out.
template <typename T>
class ClipKernel final : public ElementwiseKernel<T> {
 public:
  using ElementwiseKernel<T>::ElementwiseKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a, 1, 1));
    SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(this->name(), a, /*grad=*/false));
    SLUICE_ASSIGN_OR_RETURN(const ClipBounds<T> b, ClipAttrs<T>(this->name(), a));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    const T* x = a.inputs[0].template as<const T>();
    T* out = a.outputs[0].template as<T>();
    return HostWork([x, out, n, b] {
      elementwise::RunUnary(x, out, n, ClipFn<T>{b.lo, b.hi});
      return absl::OkStatus();
    });
  }
};

// clip_grad: X, OutGrad -> XGrad.
template <typename T>
class ClipGradKernel final : public ElementwiseKernel<T> {
 public:
  using ElementwiseKernel<T>::ElementwiseKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a, 2, 1));
    SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(this->name(), a, /*grad=*/true));
    SLUICE_ASSIGN_OR_RETURN(const ClipBounds<T> b, ClipAttrs<T>(this->name(), a));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    const T* x = a.inputs[0].template as<const T>();
    const T* g = a.inputs[1].template as<const T>();
    T* dx = a.outputs[0].template as<T>();
    return HostWork([x, g, dx, n, b] {
      elementwise::RunUnaryGrad(x, g, dx, n, ClipGradFn<T>{b.lo, b.hi});
      return absl::OkStatus();
    });
  }
};

// Registers Kernel<T, Args...> under `op` for cpu and sim, for each T of Ts.
template <template <typename, typename...> class Kernel, typename... Args, typename... Ts>
absl::Status RegisterFor(OpRegistry* registry, const char* op, TypeList<Ts...>) {
  return RegisterStressKernelsFor<Ts...>(registry, op, [op](auto tag) {
    using T = typename decltype(tag)::type;
    return std::shared_ptr<const vm::OpKernel>(std::make_shared<Kernel<T, Args...>>(op));
  });
}

// pow and pow_grad: X -> Out, X, OutGrad -> XGrad, with the attribute factor.
template <typename T, bool kGrad>
class PowKernel final : public ElementwiseKernel<T> {
 public:
  using ElementwiseKernel<T>::ElementwiseKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a, kGrad ? 2 : 1, 1));
    SLUICE_RETURN_IF_ERROR(CheckUnaryShapes(this->name(), a, kGrad));
    SLUICE_ASSIGN_OR_RETURN(const double factor, a.attrs->GetFloat("factor"));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    const T* x = a.inputs[0].template as<const T>();
    T* out = a.outputs[0].template as<T>();
    const T f = static_cast<T>(factor);
    if constexpr (kGrad) {
      const T* g = a.inputs[1].template as<const T>();
      return HostWork([x, g, out, n, f] {
        elementwise::RunUnaryGrad(x, g, out, n, PowGradFn<T>{f});
        return absl::OkStatus();
      });
    } else {
      return HostWork([x, out, n, f] {
        elementwise::RunUnary(x, out, n, PowFn<T>{f});
        return absl::OkStatus();
      });
    }
  }
};
template <typename T>
using PowForwardKernel = PowKernel<T, false>;
template <typename T>
using PowBackwardKernel = PowKernel<T, true>;

// f32 and f64: every op of the family.
template <template <typename, typename...> class Kernel, typename... Args>
absl::Status Register(OpRegistry* registry, const char* op) {
  return RegisterFor<Kernel, Args...>(registry, op, TypeList<float, double>{});
}

}  // namespace

absl::Status RegisterElementwiseHostKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR((Register<BinaryKernel, AddFn>(registry, "add")));
  SLUICE_RETURN_IF_ERROR((Register<BinaryKernel, SubFn>(registry, "sub")));
  SLUICE_RETURN_IF_ERROR((Register<BinaryKernel, MulFn>(registry, "mul")));
  SLUICE_RETURN_IF_ERROR((Register<BinaryKernel, DivFn>(registry, "div")));
  // max and min also take i32 and i64 (their schemas say so).
  using MaxMinTypes = TypeList<float, double, int32_t, int64_t>;
  SLUICE_RETURN_IF_ERROR((RegisterFor<BinaryKernel, MaxFn>(registry, "max", MaxMinTypes{})));
  SLUICE_RETURN_IF_ERROR((RegisterFor<BinaryKernel, MinFn>(registry, "min", MaxMinTypes{})));
  SLUICE_RETURN_IF_ERROR((Register<BinaryGradKernel, GradG, GradG>(registry, "add_grad")));
  SLUICE_RETURN_IF_ERROR((Register<BinaryGradKernel, GradG, GradNegG>(registry, "sub_grad")));
  SLUICE_RETURN_IF_ERROR((Register<BinaryGradKernel, GradMulX, GradMulY>(registry, "mul_grad")));
  SLUICE_RETURN_IF_ERROR((Register<BinaryGradKernel, GradDivX, GradDivY>(registry, "div_grad")));
  SLUICE_RETURN_IF_ERROR((Register<BinaryGradKernel, GradMaxX, GradMaxY>(registry, "max_grad")));
  SLUICE_RETURN_IF_ERROR((Register<BinaryGradKernel, GradMinX, GradMinY>(registry, "min_grad")));

  SLUICE_RETURN_IF_ERROR((Register<UnaryKernel, ReluFn>(registry, "relu")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryKernel, SigmoidFn>(registry, "sigmoid")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryKernel, TanhFn>(registry, "tanh")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryKernel, ExpFn>(registry, "exp")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryKernel, LogFn>(registry, "log")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryKernel, SqrtFn>(registry, "sqrt")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryKernel, SquareFn>(registry, "square")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryKernel, AbsFn>(registry, "abs")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryKernel, NegFn>(registry, "neg")));
  SLUICE_RETURN_IF_ERROR((Register<PowForwardKernel>(registry, "pow")));
  SLUICE_RETURN_IF_ERROR((Register<PowBackwardKernel>(registry, "pow_grad")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryGradKernel, ReluGradFn>(registry, "relu_grad")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryGradKernel, SigmoidGradFn>(registry, "sigmoid_grad")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryGradKernel, TanhGradFn>(registry, "tanh_grad")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryGradKernel, ExpGradFn>(registry, "exp_grad")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryGradKernel, LogGradFn>(registry, "log_grad")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryGradKernel, SqrtGradFn>(registry, "sqrt_grad")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryGradKernel, SquareGradFn>(registry, "square_grad")));
  SLUICE_RETURN_IF_ERROR((Register<UnaryGradKernel, AbsGradFn>(registry, "abs_grad")));
  // clip takes i32 and i64 as max and min do; its gradient is f32 and f64 only.
  SLUICE_RETURN_IF_ERROR((RegisterFor<ClipKernel>(registry, "clip", MaxMinTypes{})));
  SLUICE_RETURN_IF_ERROR((Register<ClipGradKernel>(registry, "clip_grad")));
  // add, sub, mul, div, neg, abs and relu on i32 and i64 (their own element functions).
  return RegisterIntegerArithHostKernels(registry);
}

}  // namespace sluice::ops::internal
