// Host kernels (cpu and sim) of the compare family (ops/compare_ops.cc): the comparisons for
// f32, f64, i32 and i64 (key dtype X's) writing bool, the logical ops on bool, and increment
// for f32, f64, i32 and i64. Broadcasting binary ops run over the broadcast plan of the
// elementwise kernels (ops/cpu/elementwise_loops.h): operands of one shape as one contiguous
// row, other broadcasts as rows of the collapsed output.
//
// Bool tensors hold one byte per element (core/data_type.h). The logical ops read those bytes
// as uint8_t and take any nonzero byte as true, so a tensor written by other means than a
// bool store still reads as a boolean; they write 0 or 1. An output may be an input's tensor
// where their dtypes allow (logical ops, increment: in-place use through
// OpDispatcher::CallInto): element i of such an input is read before element i of the output
// is written, and no other element of it afterwards. The kernels are thread-safe (no mutable
// state), as HostKernel says.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/op_families.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace {

using elementwise::BroadcastPlan;

// The element type a kernel reads for dtype T: bool tensors are read as bytes.
template <typename T>
using Stored = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

// ---- Element functions (IEEE comparisons: false with a NaN, except !=) ----

struct LessFn {
  template <typename T>
  bool operator()(T x, T y) const {
    return x < y;
  }
};
struct LessEqualFn {
  template <typename T>
  bool operator()(T x, T y) const {
    return x <= y;
  }
};
struct GreaterFn {
  template <typename T>
  bool operator()(T x, T y) const {
    return x > y;
  }
};
struct GreaterEqualFn {
  template <typename T>
  bool operator()(T x, T y) const {
    return x >= y;
  }
};
struct EqualFn {
  template <typename T>
  bool operator()(T x, T y) const {
    return x == y;
  }
};
struct NotEqualFn {
  template <typename T>
  bool operator()(T x, T y) const {
    return x != y;
  }
};
struct AndFn {
  bool operator()(uint8_t x, uint8_t y) const { return (x != 0) & (y != 0); }
};
struct OrFn {
  bool operator()(uint8_t x, uint8_t y) const { return (x != 0) | (y != 0); }
};
struct XorFn {
  bool operator()(uint8_t x, uint8_t y) const { return (x != 0) != (y != 0); }
};

// ---- Loops ----

// out[i] = op(x[i * SX], y[i * SY]) for i < n, SX and SY in {0, 1}. Not __restrict: a logical
// op's output may be X or Y.
template <int SX, int SY, typename T, typename Op>
inline void BoolRow(const T* x, const T* y, bool* out, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) out[i] = op(x[i * SX], y[i * SY]);
}

template <typename T, typename Op>
void RunBoolBinary(const BroadcastPlan& plan, const T* x, const T* y, bool* out, Op op) {
  const int64_t n = plan.row_length();
  elementwise::DispatchInnerStrides(plan, [&](auto sx, auto sy) {
    constexpr int SX = decltype(sx)::value;
    constexpr int SY = decltype(sy)::value;
    elementwise::ForEachRow(plan, [&](int64_t xo, int64_t yo, int64_t oo) {
      BoolRow<SX, SY>(x + xo, y + yo, out + oo, n, op);
    });
  });
}

// Out = X + value; integers wrap around (the sum is taken unsigned, where overflow is
// defined, and converted back: two's complement in C++20).
template <typename T>
inline T Increment(T x, T value) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(x) + static_cast<U>(value));
  } else {
    return x + value;
  }
}

// ---- Kernels ----

// X, Y of dtype T -> Out bool of their broadcast shape.
template <typename T, typename Op>
class BoolBinaryKernel final : public HostKernel {
 public:
  using HostKernel::HostKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(CheckArity(a, 2, 1));
    SLUICE_RETURN_IF_ERROR(CheckDtype(a.inputs[0], DataTypeOf<T>(), "input", 0));
    SLUICE_RETURN_IF_ERROR(CheckDtype(a.inputs[1], DataTypeOf<T>(), "input", 1));
    SLUICE_RETURN_IF_ERROR(CheckDtype(a.outputs[0], DataType::kBool, "output", 0));
    const HostTensor& x = a.inputs[0];
    const HostTensor& y = a.inputs[1];
    const HostTensor& out = a.outputs[0];
    SLUICE_RETURN_IF_ERROR(CheckBroadcastOutput(name(), a, out).status());
    if (out.size == 0) return HostWork(nullptr);
    const Stored<T>* xs = x.as<const Stored<T>>();
    const Stored<T>* ys = y.as<const Stored<T>>();
    bool* result = out.as<bool>();
    if (*x.shape == *out.shape && *y.shape == *out.shape) {  // no broadcasting: one row
      return HostWork([xs, ys, result, n = out.size] {
        BoolRow<1, 1>(xs, ys, result, n, Op{});
        return absl::OkStatus();
      });
    }
    return HostWork(
        [plan = elementwise::MakeBroadcastPlan(*x.shape, *y.shape, *out.shape), xs, ys, result] {
          RunBoolBinary(plan, xs, ys, result, Op{});
          return absl::OkStatus();
        });
  }
};

// Checks shared by the unary kernels: X and Out of dtype T and one shape.
template <typename T>
class UnaryKernel : public HostKernel {
 public:
  using HostKernel::HostKernel;

 protected:
  absl::Status CheckOperands(const HostArgs& a) const {
    SLUICE_RETURN_IF_ERROR(CheckArity(a, 1, 1));
    SLUICE_RETURN_IF_ERROR(CheckDtype(a.inputs[0], DataTypeOf<T>(), "input", 0));
    SLUICE_RETURN_IF_ERROR(CheckDtype(a.outputs[0], DataTypeOf<T>(), "output", 0));
    if (*a.outputs[0].shape == *a.inputs[0].shape) return absl::OkStatus();
    return Error(absl::StrCat(a.outputs[0].Describe("output", 0), " must have the shape of ",
                              a.inputs[0].Describe("input", 0)));
  }
};

// X bool -> Out bool.
template <typename T>
class LogicalNotKernel final : public UnaryKernel<T> {
 public:
  using UnaryKernel<T>::UnaryKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    return HostWork(
        [x = a.inputs[0].template as<const uint8_t>(), out = a.outputs[0].template as<bool>(), n] {
          for (int64_t i = 0; i < n; ++i) out[i] = x[i] == 0;
          return absl::OkStatus();
        });
  }
};

// X -> Out = X + value, of X's dtype.
template <typename T>
class IncrementKernel final : public UnaryKernel<T> {
 public:
  using UnaryKernel<T>::UnaryKernel;

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    SLUICE_RETURN_IF_ERROR(this->CheckOperands(a));
    SLUICE_ASSIGN_OR_RETURN(const double value, a.attrs->GetFloat("value"));
    SLUICE_RETURN_IF_ERROR(CheckIncrementValue(this->name(), DataTypeOf<T>(), value));
    const int64_t n = a.outputs[0].size;
    if (n == 0) return HostWork(nullptr);
    return HostWork([x = a.inputs[0].template as<const T>(), out = a.outputs[0].template as<T>(), n,
                     v = static_cast<T>(value)] {
      for (int64_t i = 0; i < n; ++i) out[i] = Increment(x[i], v);
      return absl::OkStatus();
    });
  }
};

// Registers Kernel<T> under `op` for cpu and sim, for each T in Ts.
template <template <typename> class Kernel, typename... Ts>
absl::Status Register(OpRegistry* registry, const char* op) {
  return RegisterStressKernelsFor<Ts...>(registry, op, [op](auto tag) {
    using T = typename decltype(tag)::type;
    return std::shared_ptr<const vm::OpKernel>(std::make_shared<Kernel<T>>(op));
  });
}

// BoolBinaryKernel<T, Op> as a template of T alone, for Register.
template <typename Op>
struct BoolBinary {
  template <typename T>
  using Kernel = BoolBinaryKernel<T, Op>;
};

// A comparison, for every numeric dtype.
template <typename Op>
absl::Status RegisterComparison(OpRegistry* registry, const char* op) {
  return Register<BoolBinary<Op>::template Kernel, float, double, int32_t, int64_t>(registry, op);
}

// A binary logical op, for bool.
template <typename Op>
absl::Status RegisterLogical(OpRegistry* registry, const char* op) {
  return Register<BoolBinary<Op>::template Kernel, bool>(registry, op);
}

}  // namespace

absl::Status RegisterCompareHostKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(RegisterComparison<LessFn>(registry, "less_than"));
  SLUICE_RETURN_IF_ERROR(RegisterComparison<LessEqualFn>(registry, "less_equal"));
  SLUICE_RETURN_IF_ERROR(RegisterComparison<GreaterFn>(registry, "greater_than"));
  SLUICE_RETURN_IF_ERROR(RegisterComparison<GreaterEqualFn>(registry, "greater_equal"));
  SLUICE_RETURN_IF_ERROR(RegisterComparison<EqualFn>(registry, "equal"));
  SLUICE_RETURN_IF_ERROR(RegisterComparison<NotEqualFn>(registry, "not_equal"));
  SLUICE_RETURN_IF_ERROR(RegisterLogical<AndFn>(registry, "logical_and"));
  SLUICE_RETURN_IF_ERROR(RegisterLogical<OrFn>(registry, "logical_or"));
  SLUICE_RETURN_IF_ERROR(RegisterLogical<XorFn>(registry, "logical_xor"));
  SLUICE_RETURN_IF_ERROR((Register<LogicalNotKernel, bool>(registry, "logical_not")));
  return Register<IncrementKernel, float, double, int32_t, int64_t>(registry, "increment");
}

}  // namespace sluice::ops::internal
