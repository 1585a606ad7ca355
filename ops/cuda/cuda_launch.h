// Launchers of the ops' CUDA kernels: plain functions over device pointers, element counts and
// small descriptor structs, defined in ops/cuda/*.cu and called by the OpKernels of
// ops/cuda/*_op_kernels.cc once those have validated the operands. This header is compiled by
// nvcc and by the host compiler alike, so it includes only the CUDA runtime API and the
// standard library (no abseil, no Sluice headers).
//
// Every launcher enqueues its work on `stream` and returns cudaGetLastError() after the last
// launch (cudaSuccess when there was nothing to do: zero elements launch nothing). Element
// types are float and double unless a launcher says otherwise; the .cu files instantiate
// exactly the types listed here.
#ifndef SLUICE_OPS_CUDA_CUDA_LAUNCH_H_
#define SLUICE_OPS_CUDA_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sluice::ops::gpu {

// Dims an IndexPlan keeps per group (kept, reduced) after merging, and operands it indexes.
inline constexpr int kMaxDims = 8;
inline constexpr int kMaxOperands = 3;

// The loop nest of the map and reduce kernels. Output element j (row-major over kept_dims) is
// written at out[j], and is either a function of one element of each operand (a map:
// red_rank 0) or the sum of that function over the reduced dims. Strides are in elements, per
// operand and dim; 0 where the operand is broadcast. Built by MakeIndexPlan
// (ops/cuda/cuda_kernel.h), which drops unit dims and merges neighbours.
struct IndexPlan {
  int kept_rank = 0;  // 0: a single output element
  int red_rank = 0;   // 0: nothing is summed
  int64_t kept_count = 1;
  int64_t red_count = 1;  // 0 when a reduced dim is empty: outputs are 0
  int64_t kept_dims[kMaxDims] = {};
  int64_t red_dims[kMaxDims] = {};
  int64_t kept_strides[kMaxOperands][kMaxDims] = {};
  int64_t red_strides[kMaxOperands][kMaxDims] = {};
};

// ---- Basic family (ops/cuda/basic_kernels.cu) ----

// out[i] = value. T: float, double, int32_t, int64_t, bool.
template <typename T>
cudaError_t LaunchFill(T* out, int64_t n, T value, cudaStream_t stream);
// out[i] = static_cast<Out>(in[i]); In and Out among float, double, int32_t, int64_t, bool.
template <typename In, typename Out>
cudaError_t LaunchCast(const In* in, Out* out, int64_t n, cudaStream_t stream);
// out[i] = scale * x[i] + bias (no fused multiply-add, as on the host).
template <typename T>
cudaError_t LaunchScale(const T* x, T* out, int64_t n, T scale, T bias, cudaStream_t stream);
// out[i] = xs[0][i] + xs[1][i] + ... in that order; `xs` is a host array of `count` device
// pointers. Inputs are taken kSumInputsPerPass at a time, later passes adding to out, so `out`
// may be one of the first kSumInputsPerPass inputs but none of the later ones. T: float,
// double, int32_t, int64_t.
inline constexpr int kSumInputsPerPass = 32;
template <typename T>
cudaError_t LaunchSum(const T* const* xs, int count, T* out, int64_t n, cudaStream_t stream);
// The counter-based random ops of ops/internal/counter_rng.h: out[i] = min + (max - min) *
// CounterUniform(seed, i), and mean + std * CounterNormal(seed, i).
template <typename T>
cudaError_t LaunchUniform(T* out, int64_t n, double min, double max, uint64_t seed,
                          cudaStream_t stream);
template <typename T>
cudaError_t LaunchGaussian(T* out, int64_t n, double mean, double std, uint64_t seed,
                           cudaStream_t stream);

// ---- Elementwise family (ops/cuda/elementwise_kernels.cu) ----

enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kMax, kMin };
// One input's share of an output element's gradient, c(x, y, g), as in the host kernels.
enum class BinaryGradOp : int {
  kG,     // add (X, Y), sub (X)
  kNegG,  // sub (Y)
  kMulX,
  kMulY,
  kDivX,
  kDivY,
  kMaxX,
  kMaxY,
  kMinX,
  kMinY,
};
enum class UnaryOp : int { kRelu, kSigmoid, kTanh, kExp, kLog, kSqrt, kSquare, kAbs, kNeg };

// out[j] = op(x[...], y[...]) over a map plan (operands 0: x, 1: y). `out` may be x or y
// when that input has the output's layout. Also instantiated for int32_t and int64_t, for
// kMax and kMin only (the other ops refuse integers in their schemas).
template <typename T>
cudaError_t LaunchBinary(BinaryOp op, const IndexPlan& plan, const T* x, const T* y, T* out,
                         cudaStream_t stream);
// target[j] = sum of c(x, y, g) over the plan's reduced dims (operands 0: x, 1: y, 2: g). The
// target must not alias an operand.
template <typename T>
cudaError_t LaunchBinaryGrad(BinaryGradOp op, const IndexPlan& plan, const T* x, const T* y,
                             const T* g, T* target, cudaStream_t stream);
// out[i] = f(x[i]); out may be x.
template <typename T>
cudaError_t LaunchUnary(UnaryOp op, const T* x, T* out, int64_t n, cudaStream_t stream);
// dx[i] = f'(v[i], g[i]), v being Out or X as the op's grad schema says; dx may be v or g.
template <typename T>
cudaError_t LaunchUnaryGrad(UnaryOp op, const T* v, const T* g, T* dx, int64_t n,
                            cudaStream_t stream);

// clip: out[i] = min(max(x[i], lo), hi) with max and min's NaN rule (NaN stays NaN); out may
// be x. lo <= hi, neither NaN (the OpKernel checks). f32, f64, i32 and i64.
template <typename T>
cudaError_t LaunchClip(const T* x, T* out, int64_t n, T lo, T hi, cudaStream_t stream);
// clip_grad: dx[i] = g[i] where lo <= x[i] <= hi or x[i] is NaN, else 0; dx may be x or g.
// f32 and f64.
template <typename T>
cudaError_t LaunchClipGrad(const T* x, const T* g, T* dx, int64_t n, T lo, T hi,
                           cudaStream_t stream);
// pow: out[i] = x[i]^factor (as std::pow); pow_grad: dx[i] = factor x[i]^(factor - 1) g[i].
// out may be x; dx may be x or g. f32 and f64.
template <typename T>
cudaError_t LaunchPow(const T* x, T* out, int64_t n, T factor, cudaStream_t stream);
template <typename T>
cudaError_t LaunchPowGrad(const T* x, const T* g, T* dx, int64_t n, T factor, cudaStream_t stream);

// ---- Nn family (ops/cuda/nn_kernels.cu) ----

// A batch of products C = A B, C being m x n row-major and the inner dimension k. Element
// (i, p) of A is a[i * a_row + p * a_col], element (p, j) of B is b[p * b_row + j * b_col]
// (transposes are stride swaps). The batch plan's kept dims enumerate the C matrices (matrix t
// at c + t * m * n); its reduced dims, if any, are batches summed into one C (gradients of
// broadcast operands). Its operands are 0: A and 1: B, with strides in elements.
struct GemmPlan {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t a_row = 0;
  int64_t a_col = 0;
  int64_t b_row = 0;
  int64_t b_col = 0;
  IndexPlan batch;
};
template <typename T>
cudaError_t LaunchGemm(const GemmPlan& plan, const T* a, const T* b, T* c, cudaStream_t stream);

// out[j] = T(scale * sum), the sum taken in double over the plan's reduced dims (operand 0: x).
template <typename T>
cudaError_t LaunchReduceSum(const IndexPlan& plan, const T* x, T* out, double scale,
                            cudaStream_t stream);
// out[j] = g[...] * scale over a map plan (operand 0: g): the reductions' gradients.
template <typename T>
cudaError_t LaunchBroadcastScaled(const IndexPlan& plan, const T* g, T* out, T scale,
                                  cudaStream_t stream);

// A tensor viewed as [outer, dim, inner] around the softmax axis.
struct AxisView {
  int64_t outer = 1;
  int64_t dim = 1;
  int64_t inner = 1;
};
// softmax (log false) or log_softmax (log true) along the view's axis; y may be x.
template <typename T>
cudaError_t LaunchSoftmax(const T* x, T* y, AxisView view, bool log, cudaStream_t stream);
// softmax_grad: dx = y (g - sum(g y)); log_softmax_grad: dx = g - exp(y) sum(g).
template <typename T>
cudaError_t LaunchSoftmaxGrad(const T* y, const T* g, T* dx, AxisView view, bool log,
                              cudaStream_t stream);
// softmax_with_cross_entropy over `rows` rows of `classes` classes. `bad` is device memory of
// two 64-bit words the caller sets to all ones; a row whose label is outside [0, classes) gets
// a NaN loss, and afterwards bad[0] holds the first such row and bad[1] its label (bad[0]
// stays all ones when every label is valid).
template <typename T>
cudaError_t LaunchCrossEntropy(const T* logits, const int64_t* label, T* softmax, T* loss,
                               int64_t rows, int64_t classes, uint64_t* bad, cudaStream_t stream);
// Its grad: dx = loss_grad (softmax - onehot(label)) + softmax (softmax_grad - sum(softmax_grad
// softmax)), the second term only when softmax_grad is not null. A row with a bad label gets
// NaN and is reported through `bad` as above.
template <typename T>
cudaError_t LaunchCrossEntropyGrad(const T* softmax, const int64_t* label, const T* loss_grad,
                                   const T* softmax_grad, T* dx, int64_t rows, int64_t classes,
                                   uint64_t* bad, cudaStream_t stream);

// ---- Shape and optimizer family (ops/cuda/shape_and_optimizer_kernels.cu) ----

// out[j] = in[...] over a map plan (operand 0: in), for elements of 1, 4 or 8 bytes (any
// dtype): transpose. `out` must not alias `in`.
cudaError_t LaunchGather(const IndexPlan& plan, const void* in, void* out, int element_bytes,
                         cudaStream_t stream);
// out[i] = param[i] - lr[0] * grad[i]; out may be param.
template <typename T>
cudaError_t LaunchSgd(const T* param, const T* grad, const T* lr, T* out, int64_t n,
                      cudaStream_t stream);
// The operands of adam (see ops/shape_and_optimizer_ops.cc); outputs may be their inputs.
template <typename T>
struct AdamOperands {
  const T* param;
  const T* grad;
  const T* lr;
  const T* moment1;
  const T* moment2;
  const T* beta1_pow;
  const T* beta2_pow;
  T* param_out;
  T* moment1_out;
  T* moment2_out;
  T* beta1_pow_out;
  T* beta2_pow_out;
};
template <typename T>
cudaError_t LaunchAdam(const AdamOperands<T>& o, int64_t n, double beta1, double beta2,
                       double epsilon, cudaStream_t stream);

// ---- Compare family (ops/cuda/compare_kernels.cu) ----

enum class CompareOp : int { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual };
enum class LogicalOp : int { kAnd, kOr, kXor };

// out[j] = op(x[...], y[...]) over a map plan (operands 0: x, 1: y), IEEE for floats (false
// with a NaN, except kNotEqual). T: float, double, int32_t, int64_t.
template <typename T>
cudaError_t LaunchCompare(CompareOp op, const IndexPlan& plan, const T* x, const T* y, bool* out,
                          cudaStream_t stream);
// The same for bool operands, read as bytes (any nonzero byte is true); `out` may be x or y
// when that input has the output's layout.
cudaError_t LaunchLogical(LogicalOp op, const IndexPlan& plan, const uint8_t* x, const uint8_t* y,
                          bool* out, cudaStream_t stream);
// out[i] = x[i] == 0; out may be x.
cudaError_t LaunchLogicalNot(const uint8_t* x, bool* out, int64_t n, cudaStream_t stream);
// out[i] = x[i] + value, integers wrapping around; out may be x. T: float, double, int32_t,
// int64_t.
template <typename T>
cudaError_t LaunchIncrement(const T* x, T* out, int64_t n, T value, cudaStream_t stream);

// ---- Row family (ops/cuda/row_kernels.cu) ----

// write_row: out = buffer (a device copy unless they are one) with row *index (i64 when
// `index_i64`, else i32, read on the device) replaced by `row`; an index outside [0, rows)
// writes no row. Byte copies: any element type.
cudaError_t LaunchWriteRow(const void* buffer, const void* index, bool index_i64, const void* row,
                           void* out, int64_t rows, int64_t row_bytes, cudaStream_t stream);
// read_row: out = row *index of buffer; zeros for an index outside [0, rows).
cudaError_t LaunchReadRow(const void* buffer, const void* index, bool index_i64, void* out,
                          int64_t rows, int64_t row_bytes, cudaStream_t stream);

}  // namespace sluice::ops::gpu

#endif  // SLUICE_OPS_CUDA_CUDA_LAUNCH_H_
