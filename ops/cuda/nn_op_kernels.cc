// CUDA kernels (OpKernels) of the nn family (ops/nn_ops.cc), f32 and f64, with the operand
// checks of the host kernels (the shape rules of ops/cpu/nn_shape_rules.h). matmul and
// matmul_grad run on the tiled kernel of ops/cuda/nn_kernels.cu (no cuBLAS), batches of a
// broadcast operand summed into its gradient inside the kernel; the reductions run over
// IndexPlans.
//
// Labels of softmax_with_cross_entropy(_grad): as on the host, a label outside [0, C) is an
// error of the run that surfaces at the next sync point. On cuda the kernel cannot fail, so it
// writes NaN for such rows (the loss, or the whole gradient row), records the first one in
// device memory, and a host task that runs in stream order after the kernel reads the record
// (copied to pinned memory) and returns the error naming the op, the row and the label. It
// becomes the stream's error: VirtualMachine::Sync reports it. Unlike the host, where the op's
// outputs are poisoned, the outputs are not marked: later ops consume the NaNs.
#include <cuda_runtime.h>

#include <limits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/shape.h"
#include "core/status.h"
#include "ops/cpu/nn_shape_rules.h"
#include "ops/cuda/cuda_kernel.h"
#include "ops/cuda/cuda_launch.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace {

using nn::Describe;

// ---------------------------------------------------------------------------------------
// matmul

struct MatmulSetup {
  nn::MatmulDims d;
  bool tx = false;
  bool ty = false;
  Shape::Dims x_batch;    // X's batch strides over the output's batch dims (in matrices)
  Shape::Dims y_batch;    // Y's
  Shape::Dims out_batch;  // the output's (contiguous)
};

absl::StatusOr<MatmulSetup> SetupMatmul(absl::string_view op, const CudaArgs& a) {
  MatmulSetup s;
  SLUICE_ASSIGN_OR_RETURN(s.tx, InOp(op, nn::FlagAttr(*a.attrs, "transpose_x")));
  SLUICE_ASSIGN_OR_RETURN(s.ty, InOp(op, nn::FlagAttr(*a.attrs, "transpose_y")));
  SLUICE_ASSIGN_OR_RETURN(
      s.d, InOp(op, nn::MatmulShapes(MetaOf(a.inputs[0]), MetaOf(a.inputs[1]), s.tx, s.ty)));
  s.x_batch = BroadcastStrides(nn::LeadingDims(*a.inputs[0].shape, 2), s.d.batch);
  s.y_batch = BroadcastStrides(nn::LeadingDims(*a.inputs[1].shape, 2), s.d.batch);
  s.out_batch = s.d.batch.Strides();
  return s;
}

// The batch plan of a product over the output's batch dims. `a_batch` and `b_batch` are the
// operands' batch strides in matrices, `a_size` and `b_size` their matrix sizes; batch dims
// where `target_batch` is 0 are summed (the target is a broadcast operand's gradient).
absl::StatusOr<gpu::GemmPlan> GemmOver(absl::string_view op, const MatmulSetup& s,
                                       const Shape::Dims& a_batch, int64_t a_size,
                                       const Shape::Dims& b_batch, int64_t b_size,
                                       const Shape::Dims& target_batch) {
  std::vector<PlanDim> dims(s.d.batch.rank());
  for (int d = 0; d < s.d.batch.rank(); ++d) {
    dims[d] = {s.d.batch.dim(d), target_batch[d] == 0, {a_batch[d] * a_size, b_batch[d] * b_size}};
  }
  gpu::GemmPlan p;
  SLUICE_ASSIGN_OR_RETURN(p.batch, MakeIndexPlan(op, dims, 2));
  return p;
}

template <typename T>
absl::Status RunGemm(absl::string_view op, const CudaArgs& a, const gpu::GemmPlan& p, const T* lhs,
                     const T* rhs, T* out) {
  return CudaStatus(op, gpu::LaunchGemm<T>(p, lhs, rhs, out, a.cuda_stream));
}

template <typename T>
absl::Status RunMatmul(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  SLUICE_ASSIGN_OR_RETURN(MatmulSetup s, SetupMatmul(op, a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {DataTypeOf<T>(), s.d.out}));
  if (a.outputs[0].size == 0) return absl::OkStatus();
  const int64_t m = s.d.m, k = s.d.k, n = s.d.n;
  SLUICE_ASSIGN_OR_RETURN(gpu::GemmPlan p,
                          GemmOver(op, s, s.x_batch, m * k, s.y_batch, k * n, s.out_batch));
  p.m = m;
  p.n = n;
  p.k = k;
  // A = op(X): A(i, q) is X[i * k + q], or X[q * m + i] transposed; B = op(Y) likewise.
  p.a_row = s.tx ? 1 : k;
  p.a_col = s.tx ? m : 1;
  p.b_row = s.ty ? 1 : n;
  p.b_col = s.ty ? k : 1;
  return RunGemm<T>(op, a, p, a.inputs[0].as<const T>(), a.inputs[1].as<const T>(),
                    a.outputs[0].as<T>());
}

// With A = op(X), B = op(Y), G = OutGrad: dA = G B^T and dB = A^T G; a transposed operand
// takes the transpose of its gradient. Each gradient matrix sums the batches that read it.
template <typename T>
absl::Status RunMatmulGrad(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 3, 3, 2));
  SLUICE_ASSIGN_OR_RETURN(MatmulSetup s, SetupMatmul(op, a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[2], "input", 2, {DataTypeOf<T>(), s.d.out}));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[1], "output", 1, MetaOf(a.inputs[1])));
  const int64_t m = s.d.m, k = s.d.k, n = s.d.n;
  const T* x = a.inputs[0].as<const T>();
  const T* y = a.inputs[1].as<const T>();
  const T* g = a.inputs[2].as<const T>();
  if (a.outputs[0].size > 0) {
    gpu::GemmPlan p;
    if (!s.tx) {  // dX [m, k] = G op(Y)^T: A = G, B(q, j) = op(Y)(j, q)
      SLUICE_ASSIGN_OR_RETURN(p, GemmOver(op, s, s.out_batch, m * n, s.y_batch, k * n, s.x_batch));
      p.m = m;
      p.n = k;
      p.k = n;
      p.a_row = n;
      p.a_col = 1;
      p.b_row = s.ty ? k : 1;
      p.b_col = s.ty ? 1 : n;
      SLUICE_RETURN_IF_ERROR(RunGemm<T>(op, a, p, g, y, a.outputs[0].as<T>()));
    } else {  // dX [k, m] = op(Y) G^T: A = op(Y), B(q, i) = G(i, q)
      SLUICE_ASSIGN_OR_RETURN(p, GemmOver(op, s, s.y_batch, k * n, s.out_batch, m * n, s.x_batch));
      p.m = k;
      p.n = m;
      p.k = n;
      p.a_row = s.ty ? 1 : n;
      p.a_col = s.ty ? k : 1;
      p.b_row = 1;
      p.b_col = n;
      SLUICE_RETURN_IF_ERROR(RunGemm<T>(op, a, p, y, g, a.outputs[0].as<T>()));
    }
  }
  if (a.outputs[1].size > 0) {
    gpu::GemmPlan p;
    if (!s.ty) {  // dY [k, n] = op(X)^T G: A(q, i) = op(X)(i, q), B = G
      SLUICE_ASSIGN_OR_RETURN(p, GemmOver(op, s, s.x_batch, m * k, s.out_batch, m * n, s.y_batch));
      p.m = k;
      p.n = n;
      p.k = m;
      p.a_row = s.tx ? m : 1;
      p.a_col = s.tx ? 1 : k;
      p.b_row = n;
      p.b_col = 1;
      SLUICE_RETURN_IF_ERROR(RunGemm<T>(op, a, p, x, g, a.outputs[1].as<T>()));
    } else {  // dY [n, k] = G^T op(X): A(j, i) = G(i, j), B = op(X)
      SLUICE_ASSIGN_OR_RETURN(p, GemmOver(op, s, s.out_batch, m * n, s.x_batch, m * k, s.y_batch));
      p.m = n;
      p.n = k;
      p.k = m;
      p.a_row = 1;
      p.a_col = n;
      p.b_row = s.tx ? 1 : k;
      p.b_col = s.tx ? m : 1;
      SLUICE_RETURN_IF_ERROR(RunGemm<T>(op, a, p, g, x, a.outputs[1].as<T>()));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// reduce_sum, reduce_mean

template <typename T, bool kMean>
absl::Status RunReduce(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 1, 1, 1));
  const HostTensor& x = a.inputs[0];
  SLUICE_ASSIGN_OR_RETURN(nn::ReduceDims d,
                          InOp(op, nn::ReduceShapesFromAttrs(MetaOf(x), *a.attrs)));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {DataTypeOf<T>(), d.out}));
  T* out = a.outputs[0].as<T>();
  const int64_t n_out = a.outputs[0].size;
  if (n_out == 0) return absl::OkStatus();
  if (x.size == 0) {  // every output reduces no elements: 0, or NaN for the mean
    const T empty = kMean ? std::numeric_limits<T>::quiet_NaN() : T(0);
    return CudaStatus(op, gpu::LaunchFill<T>(out, n_out, empty, a.cuda_stream));
  }
  const Shape& shape = *x.shape;
  const Shape::Dims strides = shape.Strides();
  std::vector<PlanDim> dims(shape.rank());
  for (int i = 0; i < shape.rank(); ++i) dims[i] = {shape.dim(i), d.reduced[i], {strides[i]}};
  SLUICE_ASSIGN_OR_RETURN(const gpu::IndexPlan plan, MakeIndexPlan(op, dims, 1));
  const double scale = kMean ? 1.0 / static_cast<double>(d.count) : 1.0;
  return CudaStatus(op, gpu::LaunchReduceSum<T>(plan, x.as<const T>(), out, scale, a.cuda_stream));
}

template <typename T, bool kMean>
absl::Status RunReduceGrad(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  const HostTensor& x = a.inputs[0];
  SLUICE_ASSIGN_OR_RETURN(nn::ReduceDims d,
                          InOp(op, nn::ReduceShapesFromAttrs(MetaOf(x), *a.attrs)));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[1], "input", 1, {DataTypeOf<T>(), d.out}));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(x)));
  if (x.size == 0) return absl::OkStatus();
  // XGrad[i] = OutGrad[o(i)] * scale: OutGrad read with stride 0 along the reduced dims.
  const Shape& shape = *x.shape;
  std::vector<PlanDim> dims(shape.rank());
  int64_t g_stride = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    dims[i] = {shape.dim(i), false, {d.reduced[i] ? 0 : g_stride}};
    if (!d.reduced[i]) g_stride *= shape.dim(i);
  }
  SLUICE_ASSIGN_OR_RETURN(const gpu::IndexPlan plan, MakeIndexPlan(op, dims, 1));
  const T scale = kMean ? T(1) / static_cast<T>(d.count) : T(1);
  return CudaStatus(op, gpu::LaunchBroadcastScaled<T>(plan, a.inputs[1].as<const T>(),
                                                      a.outputs[0].as<T>(), scale, a.cuda_stream));
}

// ---------------------------------------------------------------------------------------
// softmax, log_softmax and their grads

absl::StatusOr<gpu::AxisView> SoftmaxView(absl::string_view op, const HostTensor& x,
                                          const CudaArgs& a) {
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(op, a.attrs->GetInt("axis")));
  SLUICE_ASSIGN_OR_RETURN(const int ax, InOp(op, nn::NormalizeAxis(axis, MetaOf(x), "X")));
  const nn::AxisView v = nn::ViewAroundAxis(*x.shape, ax);
  return gpu::AxisView{v.outer, v.dim, v.inner};
}

template <typename T, bool kLog>
absl::Status RunSoftmax(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 1, 1, 1));
  SLUICE_ASSIGN_OR_RETURN(const gpu::AxisView v, SoftmaxView(op, a.inputs[0], a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  if (a.outputs[0].size == 0) return absl::OkStatus();
  return CudaStatus(op, gpu::LaunchSoftmax<T>(a.inputs[0].as<const T>(), a.outputs[0].as<T>(), v,
                                              kLog, a.cuda_stream));
}

template <typename T, bool kLog>
absl::Status RunSoftmaxGrad(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  SLUICE_ASSIGN_OR_RETURN(const gpu::AxisView v, SoftmaxView(op, a.inputs[0], a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[1], "input", 1, MetaOf(a.inputs[0])));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  if (a.outputs[0].size == 0) return absl::OkStatus();
  return CudaStatus(op,
                    gpu::LaunchSoftmaxGrad<T>(a.inputs[0].as<const T>(), a.inputs[1].as<const T>(),
                                              a.outputs[0].as<T>(), v, kLog, a.cuda_stream));
}

// ---------------------------------------------------------------------------------------
// softmax_with_cross_entropy and its grad

// Two 64-bit words of pinned host memory per in-flight label check, carved from pages that
// live as long as the process (they are never returned to CUDA: a host task may not call the
// CUDA API, and the pool only grows to the number of checks in flight at once).
class PinnedSlots {
 public:
  static PinnedSlots& Get() {
    static PinnedSlots* const slots = new PinnedSlots();
    return *slots;
  }

  absl::StatusOr<uint64_t*> Take(absl::string_view op) {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) {
      constexpr size_t kPage = 4096;
      void* page = nullptr;
      SLUICE_RETURN_IF_ERROR(
          CudaStatus(op, cudaHostAlloc(&page, kPage, cudaHostAllocPortable), "cudaHostAlloc"));
      uint64_t* words = static_cast<uint64_t*>(page);
      for (size_t i = 0; i + 2 <= kPage / sizeof(uint64_t); i += 2) free_.push_back(words + i);
    }
    uint64_t* slot = free_.back();
    free_.pop_back();
    return slot;
  }

  void Give(uint64_t* slot) {
    absl::MutexLock lock(&mu_);
    free_.push_back(slot);
  }

 private:
  PinnedSlots() = default;
  absl::Mutex mu_;
  std::vector<uint64_t*> free_ ABSL_GUARDED_BY(mu_);
};

// Copies the kernel's bad-label record to pinned memory and enqueues the host task that turns
// it into the stream's error.
absl::Status CheckLabelsAfter(absl::string_view op, const CudaArgs& a, const Scratch& bad,
                              int64_t classes) {
  SLUICE_ASSIGN_OR_RETURN(uint64_t * slot, PinnedSlots::Get().Take(op));
  absl::Status status =
      CopyAsync(op, a, slot, bad.get(), 2 * sizeof(uint64_t), cudaMemcpyDeviceToHost);
  if (status.ok()) {
    status = a.stream->Launch([op = std::string(op), slot, classes]() -> absl::Status {
      const uint64_t row = slot[0];
      const int64_t label = static_cast<int64_t>(slot[1]);
      PinnedSlots::Get().Give(slot);
      if (row == ~uint64_t{0}) return absl::OkStatus();
      return OpError(op, absl::StrCat("Label[", row, "] = ", label, " is out of range [0, ",
                                      classes, ") for ", classes, " classes"));
    });
  }
  if (!status.ok()) PinnedSlots::Get().Give(slot);
  return status;
}

absl::StatusOr<Scratch> NewBadLabelRecord(absl::string_view op, const CudaArgs& a) {
  SLUICE_ASSIGN_OR_RETURN(Scratch bad, Scratch::Allocate(op, a, 2 * sizeof(uint64_t)));
  SLUICE_RETURN_IF_ERROR(
      CudaStatus(op, cudaMemsetAsync(bad.get(), 0xff, 2 * sizeof(uint64_t), a.cuda_stream),
                 "cudaMemsetAsync"));
  return bad;
}

template <typename T>
absl::Status RunCrossEntropy(absl::string_view op, const CudaArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 2));
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(op, a.attrs->GetInt("axis")));
  const HostTensor& logits = a.inputs[0];
  const HostTensor& label = a.inputs[1];
  SLUICE_ASSIGN_OR_RETURN(const int64_t c,
                          InOp(op, nn::CrossEntropyShapes(MetaOf(logits), MetaOf(label), axis)));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(logits)));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[1], "output", 1, {logits.dtype, *label.shape}));
  if (label.size == 0) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(Scratch bad, NewBadLabelRecord(op, a));
  SLUICE_RETURN_IF_ERROR(
      CudaStatus(op, gpu::LaunchCrossEntropy<T>(logits.as<const T>(), label.as<const int64_t>(),
                                                a.outputs[0].as<T>(), a.outputs[1].as<T>(),
                                                label.size, c, bad.as<uint64_t>(), a.cuda_stream)));
  return CheckLabelsAfter(op, a, bad, c);
}

template <typename T>
absl::Status RunCrossEntropyGrad(absl::string_view op, const CudaArgs& a) {
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
  if (label.size == 0) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(Scratch bad, NewBadLabelRecord(op, a));
  SLUICE_RETURN_IF_ERROR(CudaStatus(
      op, gpu::LaunchCrossEntropyGrad<T>(
              softmax.as<const T>(), label.as<const int64_t>(), a.inputs[2].as<const T>(),
              has_softmax_grad ? a.inputs[3].as<const T>() : nullptr, a.outputs[0].as<T>(),
              label.size, c, bad.as<uint64_t>(), a.cuda_stream)));
  return CheckLabelsAfter(op, a, bad, c);
}

// ---------------------------------------------------------------------------------------

using RunFn = absl::Status (*)(absl::string_view, const CudaArgs&);

// Registers run_f32 / run_f64 as the cuda kernels of `op`.
absl::Status RegisterFloat(OpRegistry* registry, const std::string& op, RunFn run_f32,
                           RunFn run_f64) {
  SLUICE_RETURN_IF_ERROR(registry->RegisterKernel(
      op, {DeviceType::kCuda}, DataType::kF32,
      MakeCudaKernel(op, [op, run_f32](const CudaArgs& a) { return run_f32(op, a); })));
  return registry->RegisterKernel(
      op, {DeviceType::kCuda}, DataType::kF64,
      MakeCudaKernel(op, [op, run_f64](const CudaArgs& a) { return run_f64(op, a); }));
}

}  // namespace

absl::Status RegisterNnCudaKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "matmul", RunMatmul<float>, RunMatmul<double>));
  SLUICE_RETURN_IF_ERROR(
      RegisterFloat(registry, "matmul_grad", RunMatmulGrad<float>, RunMatmulGrad<double>));
  SLUICE_RETURN_IF_ERROR(
      RegisterFloat(registry, "reduce_sum", RunReduce<float, false>, RunReduce<double, false>));
  SLUICE_RETURN_IF_ERROR(
      RegisterFloat(registry, "reduce_mean", RunReduce<float, true>, RunReduce<double, true>));
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "reduce_sum_grad", RunReduceGrad<float, false>,
                                       RunReduceGrad<double, false>));
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "reduce_mean_grad", RunReduceGrad<float, true>,
                                       RunReduceGrad<double, true>));
  SLUICE_RETURN_IF_ERROR(
      RegisterFloat(registry, "softmax", RunSoftmax<float, false>, RunSoftmax<double, false>));
  SLUICE_RETURN_IF_ERROR(
      RegisterFloat(registry, "log_softmax", RunSoftmax<float, true>, RunSoftmax<double, true>));
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "softmax_grad", RunSoftmaxGrad<float, false>,
                                       RunSoftmaxGrad<double, false>));
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "log_softmax_grad", RunSoftmaxGrad<float, true>,
                                       RunSoftmaxGrad<double, true>));
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "softmax_with_cross_entropy",
                                       RunCrossEntropy<float>, RunCrossEntropy<double>));
  SLUICE_RETURN_IF_ERROR(RegisterFloat(registry, "softmax_with_cross_entropy_grad",
                                       RunCrossEntropyGrad<float>, RunCrossEntropyGrad<double>));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
