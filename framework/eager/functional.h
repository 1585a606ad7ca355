// Functional eager ops: each runs one op of the standard registry on its inputs' device
// (the context's default device for ops without inputs) and returns at once; the VM runs
// it asynchronously. Every error — shape or dtype mismatch, tensors on different devices,
// bad attributes — comes back before anything is enqueued and names the op and operands.
#ifndef SLUICE_FRAMEWORK_EAGER_FUNCTIONAL_H_
#define SLUICE_FRAMEWORK_EAGER_FUNCTIONAL_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"

namespace sluice::eager {

// Elementwise, numpy broadcasting.
absl::StatusOr<Tensor> Add(const Tensor& x, const Tensor& y);
absl::StatusOr<Tensor> Sub(const Tensor& x, const Tensor& y);
absl::StatusOr<Tensor> Mul(const Tensor& x, const Tensor& y);
absl::StatusOr<Tensor> Div(const Tensor& x, const Tensor& y);
absl::StatusOr<Tensor> Maximum(const Tensor& x, const Tensor& y);
absl::StatusOr<Tensor> Minimum(const Tensor& x, const Tensor& y);

absl::StatusOr<Tensor> Relu(const Tensor& x);
absl::StatusOr<Tensor> Sigmoid(const Tensor& x);
absl::StatusOr<Tensor> Tanh(const Tensor& x);
absl::StatusOr<Tensor> Exp(const Tensor& x);
absl::StatusOr<Tensor> Log(const Tensor& x);
absl::StatusOr<Tensor> Sqrt(const Tensor& x);
absl::StatusOr<Tensor> Square(const Tensor& x);
// scale * x + bias.
absl::StatusOr<Tensor> Scale(const Tensor& x, double scale, double bias = 0.0);
// min(max(x, lo), hi): NaN stays NaN; lo > hi or a NaN bound is refused; integer x takes the
// integers in [lo, hi] (the "clip" op, ops/elementwise_ops.cc).
absl::StatusOr<Tensor> Clip(const Tensor& x, double lo, double hi);
absl::StatusOr<Tensor> Cast(const Tensor& x, DataType dtype);
absl::StatusOr<Tensor> Assign(const Tensor& x);
absl::StatusOr<Tensor> Sum(const std::vector<Tensor>& xs);
absl::StatusOr<Tensor> FillZerosLike(const Tensor& x);

absl::StatusOr<Tensor> Matmul(const Tensor& x, const Tensor& y, bool transpose_x = false,
                              bool transpose_y = false);
absl::StatusOr<Tensor> ReduceSum(const Tensor& x, std::vector<int64_t> axes = {},
                                 bool keepdim = false);
absl::StatusOr<Tensor> ReduceMean(const Tensor& x, std::vector<int64_t> axes = {},
                                  bool keepdim = false);
absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t axis = -1);
absl::StatusOr<Tensor> LogSoftmax(const Tensor& x, int64_t axis = -1);
// (softmax, loss) for hard i64 labels of shape [..., 1].
absl::StatusOr<std::pair<Tensor, Tensor>> SoftmaxWithCrossEntropy(const Tensor& logits,
                                                                  const Tensor& label);

absl::StatusOr<Tensor> Reshape(const Tensor& x, std::vector<int64_t> shape);
absl::StatusOr<Tensor> Transpose(const Tensor& x, std::vector<int64_t> perm);
absl::StatusOr<Tensor> Concat(const std::vector<Tensor>& xs, int64_t axis = 0);
absl::StatusOr<std::vector<Tensor>> Split(const Tensor& x, int64_t num, int64_t axis = 0);

// Tensors without inputs: on `device`, or the context's default device.
absl::StatusOr<Tensor> FillConstant(Context& ctx, const Shape& shape, double value,
                                    DataType dtype = DataType::kF32,
                                    std::optional<Device> device = std::nullopt);
// Seeded: the same seed gives the same tensor on every device. Without a seed, the
// context's seed sequence supplies one.
absl::StatusOr<Tensor> UniformRandom(Context& ctx, const Shape& shape, double min = -1.0,
                                     double max = 1.0, std::optional<int64_t> seed = std::nullopt,
                                     DataType dtype = DataType::kF32,
                                     std::optional<Device> device = std::nullopt);
absl::StatusOr<Tensor> GaussianRandom(Context& ctx, const Shape& shape, double mean = 0.0,
                                      double std = 1.0, std::optional<int64_t> seed = std::nullopt,
                                      DataType dtype = DataType::kF32,
                                      std::optional<Device> device = std::nullopt);

// In-place optimizer steps. `lr` is a one-element tensor of the param's dtype.
absl::Status SgdStep(const Tensor& param, const Tensor& grad, const Tensor& lr);
struct AdamState {
  Tensor moment1, moment2, beta1_pow, beta2_pow;
};
absl::Status AdamStep(const Tensor& param, const Tensor& grad, const Tensor& lr,
                      const AdamState& state, double beta1 = 0.9, double beta2 = 0.999,
                      double epsilon = 1e-8);

}  // namespace sluice::eager

#endif  // SLUICE_FRAMEWORK_EAGER_FUNCTIONAL_H_
