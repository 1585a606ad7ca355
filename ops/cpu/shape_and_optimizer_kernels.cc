// Host kernels (cpu and sim) of the shape and optimizer family (ops/shape_and_optimizer_ops.cc):
// byte copies for reshape, a tiled transpose after merging the axes a permutation keeps
// together, strided block copies for concat and split, and the sgd and adam updates (safe in
// place: every element is read before it is written).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/axis_layout.h"
#include "ops/internal/op_families.h"

namespace sluice::ops::internal {
namespace {

using Dims = absl::InlinedVector<int64_t, 6>;

absl::Status CheckCounts(absl::string_view op, const HostArgs& a, int inputs, int outputs) {
  const int n_in = static_cast<int>(a.inputs.size());
  const int n_out = static_cast<int>(a.outputs.size());
  const bool in_ok = inputs < 0 ? n_in >= 1 : n_in == inputs;
  const bool out_ok = outputs < 0 ? n_out >= 1 : n_out == outputs;
  if (in_ok && out_ok) return absl::OkStatus();
  auto want = [](int n) { return n < 0 ? std::string("one or more") : absl::StrCat(n); };
  return OpError(op, absl::StrCat("takes ", want(inputs), " input(s) and ", want(outputs),
                                  " output(s), got ", n_in, " and ", n_out));
}

absl::Status CheckDtypes(absl::string_view op, const HostArgs& a, DataType dtype) {
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (a.inputs[i].dtype != dtype) {
      return OpError(op, absl::StrCat(a.inputs[i].Describe("input", static_cast<int>(i)),
                                      " must be ", DataTypeName(dtype)));
    }
  }
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    if (a.outputs[i].dtype != dtype) {
      return OpError(op, absl::StrCat(a.outputs[i].Describe("output", static_cast<int>(i)),
                                      " must be ", DataTypeName(dtype)));
    }
  }
  return absl::OkStatus();
}

// reshape, reshape_grad: Out gets the bytes of input 0 (its shape is decided by inference).
auto MakeReshape(absl::string_view op, int inputs) {
  return [op = std::string(op), inputs](auto) {
    return MakeHostKernel(op, [op, inputs](const HostArgs& a) -> absl::StatusOr<HostWork> {
      SLUICE_RETURN_IF_ERROR(CheckCounts(op, a, inputs, 1));
      const HostTensor& x = a.inputs[0];
      const HostTensor& y = a.outputs[0];
      if (x.dtype != y.dtype || x.size != y.size) {
        return OpError(op, absl::StrCat(y.Describe("output", 0), " does not hold the ",
                                        x.Describe("input", 0), "'s elements"));
      }
      const void* src = x.data;
      void* dst = y.data;
      const size_t bytes = x.size * SizeOf(x.dtype);
      if (bytes == 0 || src == dst) return HostWork(nullptr);
      return HostWork([src, dst, bytes] {
        std::memcpy(dst, src, bytes);
        return absl::OkStatus();
      });
    });
  };
}

// A transpose reduced to its essentials: unit dims dropped and input axes that stay adjacent
// in the output merged. Out axis i is input axis perm[i] of `dims`.
struct TransposePlan {
  Dims dims;
  absl::InlinedVector<int, 6> perm;
};

TransposePlan Simplify(const Shape& shape, absl::Span<const int64_t> perm) {
  const int rank = shape.rank();
  absl::InlinedVector<int, 6> index(rank, -1);
  Dims dims;
  for (int d = 0; d < rank; ++d) {
    if (shape.dim(d) != 1) {
      index[d] = static_cast<int>(dims.size());
      dims.push_back(shape.dim(d));
    }
  }
  // Runs of consecutive input axes [first, last), in output order.
  absl::InlinedVector<std::pair<int, int>, 6> runs;
  for (int64_t p : perm) {
    const int a = index[p];
    if (a < 0) continue;
    if (!runs.empty() && runs.back().second == a) {
      runs.back().second = a + 1;
    } else {
      runs.push_back({a, a + 1});
    }
  }
  absl::InlinedVector<int, 6> by_input(runs.size());
  std::iota(by_input.begin(), by_input.end(), 0);
  std::sort(by_input.begin(), by_input.end(),
            [&](int x, int y) { return runs[x].first < runs[y].first; });
  TransposePlan plan;
  plan.perm.resize(runs.size());
  for (size_t k = 0; k < by_input.size(); ++k) {
    const auto [first, last] = runs[by_input[k]];
    int64_t size = 1;
    for (int a = first; a < last; ++a) size *= dims[a];
    plan.dims.push_back(size);
    plan.perm[by_input[k]] = static_cast<int>(k);
  }
  return plan;
}

// out (cols x rows) = transpose of in (rows x cols), tile by tile so that both sides stay in
// cache.
template <typename T>
void Transpose2D(const T* in, T* out, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        const T* src = in + r * cols;
        for (int64_t c = c0; c < c1; ++c) out[c * rows + r] = src[c];
      }
    }
  }
}

// Any simplified transpose: walks the output in order, reading the input with strides.
template <typename T>
void TransposeStrided(const T* in, T* out, const TransposePlan& plan) {
  const int rank = static_cast<int>(plan.dims.size());
  Dims in_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * plan.dims[d + 1];
  Dims out_dims(rank), strides(rank), index(rank, 0);
  int64_t total = 1;
  for (int k = 0; k < rank; ++k) {
    out_dims[k] = plan.dims[plan.perm[k]];
    strides[k] = in_strides[plan.perm[k]];
    total *= out_dims[k];
  }
  const int64_t inner = out_dims[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  int64_t offset = 0;
  for (int64_t done = 0; done < total; done += inner) {
    const T* src = in + offset;
    if (inner_stride == 1) {
      std::copy(src, src + inner, out);
    } else {
      for (int64_t j = 0; j < inner; ++j) out[j] = src[j * inner_stride];
    }
    out += inner;
    for (int k = rank - 2; k >= 0; --k) {
      offset += strides[k];
      if (++index[k] < out_dims[k]) break;
      offset -= strides[k] * out_dims[k];
      index[k] = 0;
    }
  }
}

template <typename T>
void RunTranspose(const T* in, T* out, const TransposePlan& plan) {
  const auto& d = plan.dims;
  const auto& p = plan.perm;
  if (p.size() == 2) {  // simplified, so the perm is [1, 0]
    Transpose2D(in, out, d[0], d[1]);
  } else if (p.size() == 3 && p[0] == 0 && p[1] == 2 && p[2] == 1) {  // a batch of 2-D
    const int64_t step = d[1] * d[2];
    for (int64_t b = 0; b < d[0]; ++b) Transpose2D(in + b * step, out + b * step, d[1], d[2]);
  } else {
    TransposeStrided(in, out, plan);
  }
}

template <typename T>
std::shared_ptr<const vm::OpKernel> MakeTranspose() {
  return MakeHostKernel("transpose", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
    constexpr absl::string_view kOp = "transpose";
    SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 1, 1));
    SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
    SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, a.attrs->GetInts("perm"));
    const HostTensor& x = a.inputs[0];
    const HostTensor& y = a.outputs[0];
    const int rank = x.shape->rank();
    bool ok = static_cast<int>(perm.size()) == rank && y.shape->rank() == rank;
    absl::InlinedVector<bool, 6> seen(rank, false);
    for (int i = 0; ok && i < rank; ++i) {
      ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]] &&
           y.shape->dim(i) == x.shape->dim(static_cast<int>(perm[i]));
      if (ok) seen[perm[i]] = true;
    }
    if (!ok) {
      return OpError(kOp, absl::StrCat("perm [", absl::StrJoin(perm, ", "), "] does not map ",
                                       x.Describe("input", 0), " to ", y.Describe("output", 0)));
    }
    if (x.size == 0) return HostWork(nullptr);
    TransposePlan plan = Simplify(*x.shape, perm);
    const T* in = x.as<const T>();
    T* out = y.as<T>();
    if (plan.perm.size() <= 1) {  // the identity on memory
      if (in == out) return HostWork(nullptr);
      const int64_t n = x.size;
      return HostWork([in, out, n] {
        std::copy(in, in + n, out);
        return absl::OkStatus();
      });
    }
    const int64_t n = x.size;
    return HostWork([in, out, n, plan = std::move(plan)] {
      if (in == out) {  // in place (CallInto with X as Out): transpose a copy
        std::unique_ptr<T[]> copy(new T[n]);
        std::copy(in, in + n, copy.get());
        RunTranspose<T>(copy.get(), out, plan);
      } else {
        RunTranspose<T>(in, out, plan);
      }
      return absl::OkStatus();
    });
  });
}

// concat: X... -> Out.
std::shared_ptr<const vm::OpKernel> MakeConcat() {
  return MakeHostKernel("concat", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
    constexpr absl::string_view kOp = "concat";
    SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, -1, 1));
    SLUICE_ASSIGN_OR_RETURN(const int64_t axis, a.attrs->GetInt("axis"));
    SLUICE_ASSIGN_OR_RETURN(AxisLayout layout,
                            LayoutAlong(kOp, axis, a.outputs[0], "output", a.inputs, "input"));
    if (a.outputs[0].size == 0) return HostWork(nullptr);
    if (a.inputs.size() == 1 && a.inputs[0].data == a.outputs[0].data) return HostWork(nullptr);
    absl::InlinedVector<const uint8_t*, 4> srcs;
    for (const HostTensor& x : a.inputs) srcs.push_back(x.as<const uint8_t>());
    uint8_t* dst = a.outputs[0].as<uint8_t>();
    return HostWork([layout = std::move(layout), srcs = std::move(srcs), dst]() mutable {
      for (int64_t o = 0; o < layout.outer; ++o) {
        for (size_t i = 0; i < srcs.size(); ++i) {
          const size_t chunk = layout.chunks[i];
          if (chunk == 0) continue;
          // memmove: Out may be an input whose partners are all empty (CallInto).
          std::memmove(dst, srcs[i] + o * chunk, chunk);
          dst += chunk;
        }
      }
      return absl::OkStatus();
    });
  });
}

// split (X -> Out...) and concat_grad (OutGrad, X... -> XGrad...): input 0 cut into the
// outputs' shapes along the axis.
std::shared_ptr<const vm::OpKernel> MakeSplit(absl::string_view op, int inputs) {
  return MakeHostKernel(
      std::string(op),
      [op = std::string(op), inputs](const HostArgs& a) -> absl::StatusOr<HostWork> {
        SLUICE_RETURN_IF_ERROR(CheckCounts(op, a, inputs, -1));
        SLUICE_ASSIGN_OR_RETURN(const int64_t axis, a.attrs->GetInt("axis"));
        SLUICE_ASSIGN_OR_RETURN(AxisLayout layout,
                                LayoutAlong(op, axis, a.inputs[0], "input", a.outputs, "output"));
        if (a.inputs[0].size == 0) return HostWork(nullptr);
        if (a.outputs.size() == 1 && a.inputs[0].data == a.outputs[0].data) {
          return HostWork(nullptr);
        }
        const uint8_t* src = a.inputs[0].as<const uint8_t>();
        absl::InlinedVector<uint8_t*, 4> dsts;
        for (const HostTensor& y : a.outputs) dsts.push_back(y.as<uint8_t>());
        return HostWork([layout = std::move(layout), src, dsts = std::move(dsts)]() mutable {
          for (int64_t o = 0; o < layout.outer; ++o) {
            for (size_t i = 0; i < dsts.size(); ++i) {
              const size_t chunk = layout.chunks[i];
              if (chunk == 0) continue;
              std::memmove(dsts[i] + o * chunk, src, chunk);
              src += chunk;
            }
          }
          return absl::OkStatus();
        });
      });
}

// A one-element operand ([1] or a scalar) of an optimizer.
absl::Status CheckOneElement(absl::string_view op, const HostTensor& t, int index) {
  if (t.size == 1) return absl::OkStatus();
  return OpError(op, absl::StrCat(t.Describe("input", index), " must hold one element"));
}

absl::Status CheckSameSize(absl::string_view op, const HostTensor& t, absl::string_view role,
                           int index, const HostTensor& param) {
  if (t.size == param.size) return absl::OkStatus();
  return OpError(op, absl::StrCat(t.Describe(role, index), " must have as many elements as ",
                                  param.Describe("input", 0)));
}

template <typename T>
std::shared_ptr<const vm::OpKernel> MakeSgd() {
  return MakeHostKernel("sgd", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
    constexpr absl::string_view kOp = "sgd";
    SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 3, 1));
    SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
    SLUICE_RETURN_IF_ERROR(CheckSameSize(kOp, a.inputs[1], "input", 1, a.inputs[0]));
    SLUICE_RETURN_IF_ERROR(CheckOneElement(kOp, a.inputs[2], 2));
    SLUICE_RETURN_IF_ERROR(CheckSameSize(kOp, a.outputs[0], "output", 0, a.inputs[0]));
    const T* param = a.inputs[0].as<const T>();
    const T* grad = a.inputs[1].as<const T>();
    const T* lr = a.inputs[2].as<const T>();
    T* out = a.outputs[0].as<T>();
    const int64_t n = a.inputs[0].size;
    if (n == 0) return HostWork(nullptr);
    return HostWork([param, grad, lr, out, n] {
      const T rate = *lr;
      for (int64_t i = 0; i < n; ++i) out[i] = param[i] - rate * grad[i];
      return absl::OkStatus();
    });
  });
}

template <typename T>
std::shared_ptr<const vm::OpKernel> MakeAdam() {
  return MakeHostKernel("adam", [](const HostArgs& a) -> absl::StatusOr<HostWork> {
    constexpr absl::string_view kOp = "adam";
    SLUICE_RETURN_IF_ERROR(CheckCounts(kOp, a, 7, 5));
    SLUICE_RETURN_IF_ERROR(CheckDtypes(kOp, a, DataTypeOf<T>()));
    const HostTensor& param = a.inputs[0];
    for (int i : {1, 3, 4}) {
      SLUICE_RETURN_IF_ERROR(CheckSameSize(kOp, a.inputs[i], "input", i, param));
    }
    for (int i : {2, 5, 6}) SLUICE_RETURN_IF_ERROR(CheckOneElement(kOp, a.inputs[i], i));
    for (int i : {0, 1, 2}) {
      SLUICE_RETURN_IF_ERROR(CheckSameSize(kOp, a.outputs[i], "output", i, param));
    }
    for (int i : {3, 4}) {
      if (a.outputs[i].size != 1) {
        return OpError(kOp,
                       absl::StrCat(a.outputs[i].Describe("output", i), " must hold one element"));
      }
    }
    SLUICE_ASSIGN_OR_RETURN(const double beta1, a.attrs->GetFloat("beta1"));
    SLUICE_ASSIGN_OR_RETURN(const double beta2, a.attrs->GetFloat("beta2"));
    SLUICE_ASSIGN_OR_RETURN(const double epsilon, a.attrs->GetFloat("epsilon"));
    struct Operands {
      const T* p;
      const T* g;
      const T* lr;
      const T* m1;
      const T* m2;
      const T* b1p;
      const T* b2p;
      T* p_out;
      T* m1_out;
      T* m2_out;
      T* b1p_out;
      T* b2p_out;
    };
    const Operands o{
        a.inputs[0].as<const T>(), a.inputs[1].as<const T>(), a.inputs[2].as<const T>(),
        a.inputs[3].as<const T>(), a.inputs[4].as<const T>(), a.inputs[5].as<const T>(),
        a.inputs[6].as<const T>(), a.outputs[0].as<T>(),      a.outputs[1].as<T>(),
        a.outputs[2].as<T>(),      a.outputs[3].as<T>(),      a.outputs[4].as<T>()};
    const int64_t n = param.size;
    return HostWork([o, n, beta1, beta2, epsilon] {
      // Read the one-element operands before anything is written: they may be updated in
      // place.
      const T b1p = *o.b1p;
      const T b2p = *o.b2p;
      const double lr_t = static_cast<double>(*o.lr) * std::sqrt(1.0 - static_cast<double>(b2p)) /
                          (1.0 - static_cast<double>(b1p));
      const T rate = static_cast<T>(lr_t);
      const T eps = static_cast<T>(epsilon * std::sqrt(1.0 - static_cast<double>(b2p)));
      const T b1 = static_cast<T>(beta1);
      const T b2 = static_cast<T>(beta2);
      const T one_minus_b1 = static_cast<T>(1.0 - beta1);
      const T one_minus_b2 = static_cast<T>(1.0 - beta2);
      for (int64_t i = 0; i < n; ++i) {
        const T g = o.g[i];
        const T m1 = b1 * o.m1[i] + one_minus_b1 * g;
        const T m2 = b2 * o.m2[i] + one_minus_b2 * g * g;
        const T p = o.p[i] - rate * m1 / (std::sqrt(m2) + eps);
        o.m1_out[i] = m1;
        o.m2_out[i] = m2;
        o.p_out[i] = p;
      }
      *o.b1p_out = b1p * b1;
      *o.b2p_out = b2p * b2;
      return absl::OkStatus();
    });
  });
}

}  // namespace

absl::Status RegisterShapeAndOptimizerHostKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "reshape", MakeReshape("reshape", 1))));
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "reshape_grad", MakeReshape("reshape_grad", 2))));
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "transpose",
      [](auto tag) { return MakeTranspose<typename decltype(tag)::type>(); })));
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "concat", [](auto) { return MakeConcat(); })));
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "split", [](auto) { return MakeSplit("split", 1); })));
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double, int32_t, int64_t, bool>(
      registry, "concat_grad", [](auto) { return MakeSplit("concat_grad", -1); })));
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double>(
      registry, "sgd", [](auto tag) { return MakeSgd<typename decltype(tag)::type>(); })));
  SLUICE_RETURN_IF_ERROR((RegisterStressKernelsFor<float, double>(
      registry, "adam", [](auto tag) { return MakeAdam<typename decltype(tag)::type>(); })));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
