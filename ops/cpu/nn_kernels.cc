// Host kernels (cpu and sim) of the nn family (ops/nn_ops.cc), f32 and f64: matmul on the
// blocked GEMM of ops/cpu/nn_gemm.h, reductions over coalesced dims, softmax and
// log_softmax along any axis, softmax with cross entropy along the last, and their grads.
// Each kernel re-checks its operands with the schema's shape rules (ops/cpu/nn_shape_rules.h)
// before it returns work.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/host_kernel.h"
#include "ops/cpu/nn_gemm.h"
#include "ops/cpu/nn_shape_rules.h"
#include "ops/internal/op_families.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace {

using nn::Describe;

// ---------------------------------------------------------------------------------------
// matmul

// For each batch of the output (row-major over `to`), the index of the operand matrix it
// reads, where `from` (the operand's batch dims) broadcasts to `to`.
std::vector<int64_t> BatchIndex(const Shape& from, const Shape& to) {
  const Shape::Dims strides = BroadcastStrides(from, to);
  const int64_t count = to.NumElements();
  std::vector<int64_t> index(count);
  Shape::Dims pos(to.rank(), 0);
  int64_t offset = 0;
  for (int64_t b = 0; b < count; ++b) {
    index[b] = offset;
    for (int d = to.rank() - 1; d >= 0; --d) {
      offset += strides[d];
      if (++pos[d] < to.dim(d)) break;
      offset -= strides[d] * to.dim(d);
      pos[d] = 0;
    }
  }
  return index;
}

struct MatmulSetup {
  nn::MatmulDims d;
  bool tx = false;
  bool ty = false;
  std::vector<int64_t> x_batch;  // per output batch: which X matrix
  std::vector<int64_t> y_batch;
};

absl::StatusOr<MatmulSetup> SetupMatmul(absl::string_view op, const HostArgs& a) {
  MatmulSetup s;
  SLUICE_ASSIGN_OR_RETURN(s.tx, InOp(op, nn::FlagAttr(*a.attrs, "transpose_x")));
  SLUICE_ASSIGN_OR_RETURN(s.ty, InOp(op, nn::FlagAttr(*a.attrs, "transpose_y")));
  SLUICE_ASSIGN_OR_RETURN(
      s.d, InOp(op, nn::MatmulShapes(MetaOf(a.inputs[0]), MetaOf(a.inputs[1]), s.tx, s.ty)));
  s.x_batch = BatchIndex(nn::LeadingDims(*a.inputs[0].shape, 2), s.d.batch);
  s.y_batch = BatchIndex(nn::LeadingDims(*a.inputs[1].shape, 2), s.d.batch);
  return s;
}

template <typename T>
absl::StatusOr<HostWork> PrepareMatmul(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  SLUICE_ASSIGN_OR_RETURN(MatmulSetup s, SetupMatmul(op, a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {DataTypeOf<T>(), s.d.out}));
  if (a.outputs[0].size == 0) return HostWork(nullptr);
  return HostWork([s = std::move(s), x = a.inputs[0].as<const T>(), y = a.inputs[1].as<const T>(),
                   out = a.outputs[0].as<T>(), parallel = a.parallel()] {
    const int64_t m = s.d.m, k = s.d.k, n = s.d.n;
    for (size_t b = 0; b < s.x_batch.size(); ++b) {
      const nn::GemmOperand<T> xm{x + s.x_batch[b] * m * k, s.tx ? m : k, s.tx};
      const nn::GemmOperand<T> ym{y + s.y_batch[b] * k * n, s.ty ? k : n, s.ty};
      SLUICE_RETURN_IF_ERROR(
          nn::ParallelGemm<T>(parallel, m, n, k, xm, ym, out + b * m * n, n, /*accumulate=*/false));
    }
    return absl::OkStatus();
  });
}

// With A = op(X), B = op(Y), G = OutGrad: dA = G B^T and dB = A^T G; a transposed operand
// takes the transpose of its gradient. Batches that share an operand matrix (broadcast)
// accumulate into its gradient.
template <typename T>
absl::StatusOr<HostWork> PrepareMatmulGrad(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 3, 3, 2));
  SLUICE_ASSIGN_OR_RETURN(MatmulSetup s, SetupMatmul(op, a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[2], "input", 2, {DataTypeOf<T>(), s.d.out}));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[1], "output", 1, MetaOf(a.inputs[1])));
  if (a.outputs[0].size == 0 && a.outputs[1].size == 0) return HostWork(nullptr);
  // vm::kAddToAttr: a gradient added into its output's value, computed in full first
  // (AddedOutput), so the result is the sum op's, bit for bit.
  const int64_t adds = AddToBits(a);
  return HostWork([s = std::move(s), x = a.inputs[0].as<const T>(), y = a.inputs[1].as<const T>(),
                   g = a.inputs[2].as<const T>(), outs = a.outputs, adds,
                   parallel = a.parallel()]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(AddedIntoPoison(outs, adds));
    const int64_t m = s.d.m, k = s.d.k, n = s.d.n;
    const int64_t ldx = s.tx ? m : k, ldy = s.ty ? k : n;
    AddedOutput<T> added_dx(outs[0].as<T>(), outs[0].size, (adds & 1) != 0);
    AddedOutput<T> added_dy(outs[1].as<T>(), outs[1].size, (adds & 2) != 0);
    T* dx = added_dx.target();
    T* dy = added_dy.target();
    std::fill(dx, dx + outs[0].size, T(0));
    std::fill(dy, dy + outs[1].size, T(0));
    for (size_t b = 0; b < s.x_batch.size(); ++b) {
      const T* xb = x + s.x_batch[b] * m * k;
      const T* yb = y + s.y_batch[b] * k * n;
      const T* gb = g + b * m * n;
      T* dxb = dx + s.x_batch[b] * m * k;
      T* dyb = dy + s.y_batch[b] * k * n;
      if (!s.tx) {  // dX [m, k] = G op(Y)^T
        SLUICE_RETURN_IF_ERROR(
            nn::ParallelGemm<T>(parallel, m, k, n, {gb, n, false}, {yb, ldy, !s.ty}, dxb, k, true));
      } else {  // dX [k, m] = op(Y) G^T
        SLUICE_RETURN_IF_ERROR(
            nn::ParallelGemm<T>(parallel, k, m, n, {yb, ldy, s.ty}, {gb, n, true}, dxb, m, true));
      }
      if (!s.ty) {  // dY [k, n] = op(X)^T G
        SLUICE_RETURN_IF_ERROR(
            nn::ParallelGemm<T>(parallel, k, n, m, {xb, ldx, !s.tx}, {gb, n, false}, dyb, n, true));
      } else {  // dY [n, k] = G^T op(X)
        SLUICE_RETURN_IF_ERROR(
            nn::ParallelGemm<T>(parallel, n, k, m, {gb, n, true}, {xb, ldx, s.tx}, dyb, k, true));
      }
    }
    added_dx.AddInto();
    added_dy.AddInto();
    return absl::OkStatus();
  });
}

// matmul_grad adds into either gradient on request (OpKernel::CanAddTo).
template <typename T>
class MatmulGradKernel final : public HostKernel {
 public:
  MatmulGradKernel() : HostKernel("matmul_grad") {}
  bool CanAddTo(int output) const override { return output == 0 || output == 1; }

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& a) const override {
    return PrepareMatmulGrad<T>("matmul_grad", a);
  }
};

// ---------------------------------------------------------------------------------------
// reduce_sum, reduce_mean

// X's dims with size-1 dims dropped and neighbours of one kind (reduced or kept) merged, so
// the kinds alternate; out_strides are the output's strides (0 along reduced dims).
struct ReduceLoop {
  std::vector<int64_t> dims;
  std::vector<int64_t> out_strides;
  bool inner_reduced = false;
};

ReduceLoop MakeReduceLoop(const Shape& x, const std::vector<bool>& reduced) {
  ReduceLoop loop;
  std::vector<bool> kinds;
  for (int i = 0; i < x.rank(); ++i) {
    if (x.dim(i) == 1) continue;
    if (!kinds.empty() && kinds.back() == reduced[i]) {
      loop.dims.back() *= x.dim(i);
    } else {
      loop.dims.push_back(x.dim(i));
      kinds.push_back(reduced[i]);
    }
  }
  if (loop.dims.empty()) {
    loop.dims.push_back(1);
    kinds.push_back(false);
  }
  loop.out_strides.resize(loop.dims.size());
  int64_t stride = 1;
  for (int i = static_cast<int>(loop.dims.size()) - 1; i >= 0; --i) {
    loop.out_strides[i] = kinds[i] ? 0 : stride;
    if (!kinds[i]) stride *= loop.dims[i];
  }
  loop.inner_reduced = kinds.back();
  return loop;
}

// Calls fn(row, out_offset) for each innermost row of X in order: row r covers elements
// [r * inner, (r + 1) * inner) and out_offset is the output index of its first element.
template <typename Fn>
void ForEachRow(const ReduceLoop& loop, int64_t size, Fn fn) {
  const int outer_rank = static_cast<int>(loop.dims.size()) - 1;
  const int64_t rows = size / loop.dims.back();
  std::vector<int64_t> pos(outer_rank, 0);
  int64_t offset = 0;
  for (int64_t r = 0; r < rows; ++r) {
    fn(r, offset);
    for (int d = outer_rank - 1; d >= 0; --d) {
      offset += loop.out_strides[d];
      if (++pos[d] < loop.dims[d]) break;
      offset -= loop.out_strides[d] * loop.dims[d];
      pos[d] = 0;
    }
  }
}

// A row sum in double with independent partial sums (the compiler may not reorder them).
template <typename T>
double SumRow(const T* row, int64_t n) {
  double part[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int q = 0; q < 4; ++q) part[q] += row[j + q];
  }
  for (; j < n; ++j) part[0] += row[j];
  return (part[0] + part[1]) + (part[2] + part[3]);
}

template <typename T, bool kMean>
absl::StatusOr<HostWork> PrepareReduce(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 1, 1, 1));
  const HostTensor& x = a.inputs[0];
  SLUICE_ASSIGN_OR_RETURN(nn::ReduceDims d,
                          InOp(op, nn::ReduceShapesFromAttrs(MetaOf(x), *a.attrs)));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {DataTypeOf<T>(), d.out}));
  if (a.outputs[0].size == 0) return HostWork(nullptr);
  return HostWork([loop = MakeReduceLoop(*x.shape, d.reduced), count = d.count,
                   in = x.as<const T>(), size = x.size, out = a.outputs[0].as<T>(),
                   n_out = a.outputs[0].size] {
    if (size == 0) {  // every output reduces no elements
      const T empty = kMean ? std::numeric_limits<T>::quiet_NaN() : T(0);
      std::fill(out, out + n_out, empty);
      return absl::OkStatus();
    }
    std::vector<double> acc(n_out, 0.0);
    const int64_t inner = loop.dims.back();
    ForEachRow(loop, size, [&](int64_t r, int64_t o) {
      const T* row = in + r * inner;
      if (loop.inner_reduced) {
        acc[o] += SumRow(row, inner);
      } else {
        double* dst = acc.data() + o;
        for (int64_t j = 0; j < inner; ++j) dst[j] += row[j];
      }
    });
    const double scale = kMean ? 1.0 / static_cast<double>(count) : 1.0;
    for (int64_t i = 0; i < n_out; ++i) out[i] = static_cast<T>(acc[i] * scale);
    return absl::OkStatus();
  });
}

template <typename T, bool kMean>
absl::StatusOr<HostWork> PrepareReduceGrad(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  const HostTensor& x = a.inputs[0];
  SLUICE_ASSIGN_OR_RETURN(nn::ReduceDims d,
                          InOp(op, nn::ReduceShapesFromAttrs(MetaOf(x), *a.attrs)));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[1], "input", 1, {DataTypeOf<T>(), d.out}));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(x)));
  if (x.size == 0) return HostWork(nullptr);
  return HostWork([loop = MakeReduceLoop(*x.shape, d.reduced), count = d.count,
                   g = a.inputs[1].as<const T>(), size = x.size, dx = a.outputs[0].as<T>()] {
    const T scale = kMean ? T(1) / static_cast<T>(count) : T(1);
    const int64_t inner = loop.dims.back();
    ForEachRow(loop, size, [&](int64_t r, int64_t o) {
      T* row = dx + r * inner;
      if (loop.inner_reduced) {
        std::fill(row, row + inner, g[o] * scale);
      } else {
        for (int64_t j = 0; j < inner; ++j) row[j] = g[o + j] * scale;
      }
    });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------
// softmax, log_softmax and their grads: X viewed as [outer, C, inner] around the axis;
// per-position accumulators over `inner` keep the innermost loops contiguous.

absl::StatusOr<nn::AxisView> SoftmaxView(absl::string_view op, const HostTensor& x,
                                         const HostArgs& a) {
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(op, a.attrs->GetInt("axis")));
  SLUICE_ASSIGN_OR_RETURN(const int ax, InOp(op, nn::NormalizeAxis(axis, MetaOf(x), "X")));
  return nn::ViewAroundAxis(*x.shape, ax);
}

template <typename T, bool kLog>
absl::StatusOr<HostWork> PrepareSoftmax(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 1, 1, 1));
  SLUICE_ASSIGN_OR_RETURN(const nn::AxisView v, SoftmaxView(op, a.inputs[0], a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  if (a.outputs[0].size == 0) return HostWork(nullptr);
  return HostWork([v, x = a.inputs[0].as<const T>(), y = a.outputs[0].as<T>()] {
    std::vector<T> mx(v.inner);
    std::vector<double> sum(v.inner);
    for (int64_t o = 0; o < v.outer; ++o) {
      const T* xo = x + o * v.dim * v.inner;
      T* yo = y + o * v.dim * v.inner;
      std::copy(xo, xo + v.inner, mx.begin());
      for (int64_t c = 1; c < v.dim; ++c) {
        for (int64_t j = 0; j < v.inner; ++j) mx[j] = std::max(mx[j], xo[c * v.inner + j]);
      }
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t c = 0; c < v.dim; ++c) {
        for (int64_t j = 0; j < v.inner; ++j) {
          const T e = std::exp(xo[c * v.inner + j] - mx[j]);
          if (!kLog) yo[c * v.inner + j] = e;
          sum[j] += e;
        }
      }
      for (int64_t j = 0; j < v.inner; ++j) sum[j] = kLog ? std::log(sum[j]) : 1.0 / sum[j];
      for (int64_t c = 0; c < v.dim; ++c) {
        for (int64_t j = 0; j < v.inner; ++j) {
          const int64_t i = c * v.inner + j;
          yo[i] = kLog ? static_cast<T>(xo[i] - mx[j] - sum[j]) : static_cast<T>(yo[i] * sum[j]);
        }
      }
    }
    return absl::OkStatus();
  });
}

// softmax_grad: dX = Y (G - sum(G Y)); log_softmax_grad: dX = G - exp(Y) sum(G).
template <typename T, bool kLog>
absl::StatusOr<HostWork> PrepareSoftmaxGrad(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  SLUICE_ASSIGN_OR_RETURN(const nn::AxisView v, SoftmaxView(op, a.inputs[0], a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[1], "input", 1, MetaOf(a.inputs[0])));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  if (a.outputs[0].size == 0) return HostWork(nullptr);
  return HostWork(
      [v, y = a.inputs[0].as<const T>(), g = a.inputs[1].as<const T>(), dx = a.outputs[0].as<T>()] {
        std::vector<double> acc(v.inner);
        for (int64_t o = 0; o < v.outer; ++o) {
          const int64_t base = o * v.dim * v.inner;
          const T* yo = y + base;
          const T* go = g + base;
          T* dxo = dx + base;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t c = 0; c < v.dim; ++c) {
            for (int64_t j = 0; j < v.inner; ++j) {
              const int64_t i = c * v.inner + j;
              acc[j] += kLog ? go[i] : go[i] * yo[i];
            }
          }
          for (int64_t c = 0; c < v.dim; ++c) {
            for (int64_t j = 0; j < v.inner; ++j) {
              const int64_t i = c * v.inner + j;
              const T s = static_cast<T>(acc[j]);
              dxo[i] = kLog ? go[i] - std::exp(yo[i]) * s : yo[i] * (go[i] - s);
            }
          }
        }
        return absl::OkStatus();
      });
}

// ---------------------------------------------------------------------------------------
// softmax_with_cross_entropy and its grad: rows of C classes, one i64 label per row.

absl::Status CheckLabels(absl::string_view op, const int64_t* label, int64_t rows, int64_t c) {
  for (int64_t r = 0; r < rows; ++r) {
    if (label[r] < 0 || label[r] >= c) {
      return OpError(op, absl::StrCat("Label[", r, "] = ", label[r], " is out of range [0, ", c,
                                      ") for ", c, " classes"));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<HostWork> PrepareCrossEntropy(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 2));
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(op, a.attrs->GetInt("axis")));
  const HostTensor& logits = a.inputs[0];
  const HostTensor& label = a.inputs[1];
  SLUICE_ASSIGN_OR_RETURN(const int64_t c,
                          InOp(op, nn::CrossEntropyShapes(MetaOf(logits), MetaOf(label), axis)));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(logits)));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[1], "output", 1, {logits.dtype, *label.shape}));
  if (label.size == 0) return HostWork(nullptr);
  return HostWork([op, c, rows = label.size, x = logits.as<const T>(),
                   labels = label.as<const int64_t>(), p = a.outputs[0].as<T>(),
                   loss = a.outputs[1].as<T>()]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(CheckLabels(op, labels, rows, c));
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * c;
      T* pr = p + r * c;
      const T mx = *std::max_element(xr, xr + c);
      double sum = 0;
      for (int64_t j = 0; j < c; ++j) {
        pr[j] = std::exp(xr[j] - mx);
        sum += pr[j];
      }
      const T inv = static_cast<T>(1.0 / sum);
      for (int64_t j = 0; j < c; ++j) pr[j] *= inv;
      loss[r] = static_cast<T>(std::log(sum) - static_cast<double>(xr[labels[r]] - mx));
    }
    return absl::OkStatus();
  });
}

// dLogits = LossGrad (P - onehot(Label)) + P (SoftmaxGrad - sum(SoftmaxGrad P)).
template <typename T>
absl::StatusOr<HostWork> PrepareCrossEntropyGrad(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 3, 4, 1));
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(op, a.attrs->GetInt("axis")));
  const HostTensor& softmax = a.inputs[0];
  const HostTensor& label = a.inputs[1];
  SLUICE_ASSIGN_OR_RETURN(
      const int64_t c,
      InOp(op, nn::CrossEntropyShapes(MetaOf(softmax), MetaOf(label), axis, "Softmax")));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[2], "input", 2, {softmax.dtype, *label.shape}));
  const bool has_softmax_grad = a.inputs.size() == 4;
  if (has_softmax_grad) {
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[3], "input", 3, MetaOf(softmax)));
  }
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(softmax)));
  if (label.size == 0) return HostWork(nullptr);
  return HostWork([op, c, rows = label.size, p = softmax.as<const T>(),
                   labels = label.as<const int64_t>(), lg = a.inputs[2].as<const T>(),
                   sg = has_softmax_grad ? a.inputs[3].as<const T>() : nullptr,
                   dx = a.outputs[0].as<T>()]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(CheckLabels(op, labels, rows, c));
    for (int64_t r = 0; r < rows; ++r) {
      const T* pr = p + r * c;
      T* dr = dx + r * c;
      for (int64_t j = 0; j < c; ++j) dr[j] = lg[r] * pr[j];
      dr[labels[r]] -= lg[r];
      if (sg != nullptr) {
        const T* sr = sg + r * c;
        double dot = 0;
        for (int64_t j = 0; j < c; ++j) dot += static_cast<double>(sr[j]) * pr[j];
        for (int64_t j = 0; j < c; ++j) dr[j] += pr[j] * (sr[j] - static_cast<T>(dot));
      }
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------

}  // namespace

absl::Status RegisterNnHostKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(
      RegisterFloatHostKernels(registry, "matmul", PrepareMatmul<float>, PrepareMatmul<double>));
  SLUICE_RETURN_IF_ERROR(
      (RegisterStressKernelsFor<float, double>(registry, "matmul_grad", [](auto tag) {
        using T = typename decltype(tag)::type;
        return std::shared_ptr<const vm::OpKernel>(std::make_shared<MatmulGradKernel<T>>());
      })));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(
      registry, "reduce_sum", PrepareReduce<float, false>, PrepareReduce<double, false>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(
      registry, "reduce_mean", PrepareReduce<float, true>, PrepareReduce<double, true>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "reduce_sum_grad",
                                                  PrepareReduceGrad<float, false>,
                                                  PrepareReduceGrad<double, false>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "reduce_mean_grad",
                                                  PrepareReduceGrad<float, true>,
                                                  PrepareReduceGrad<double, true>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "softmax", PrepareSoftmax<float, false>,
                                                  PrepareSoftmax<double, false>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(
      registry, "log_softmax", PrepareSoftmax<float, true>, PrepareSoftmax<double, true>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "softmax_grad",
                                                  PrepareSoftmaxGrad<float, false>,
                                                  PrepareSoftmaxGrad<double, false>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "log_softmax_grad",
                                                  PrepareSoftmaxGrad<float, true>,
                                                  PrepareSoftmaxGrad<double, true>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "softmax_with_cross_entropy",
                                                  PrepareCrossEntropy<float>,
                                                  PrepareCrossEntropy<double>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "softmax_with_cross_entropy_grad",
                                                  PrepareCrossEntropyGrad<float>,
                                                  PrepareCrossEntropyGrad<double>));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
