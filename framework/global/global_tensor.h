// GlobalTensor: a logical tensor laid out over a placement's ranks (OneFlow's global
// tensor): its placement, its layout (NdSbp, one entry per mesh axis), its logical dtype
// and shape, and this rank's local part, an eager tensor on the placement's device. A
// rank outside the placement holds an empty part (no tensor) and skips every op on the
// tensor: no instructions, no collectives.
//
// Ops (Call and the functions below) infer the output layout from the inputs' layouts
// (sbp_signature.h), convert the inputs where the op needs another layout (boxing.h), and
// run the op on the local parts. Every rank of a placement must make the same calls in the
// same order (SPMD), as for any collective.
#ifndef SLUICE_FRAMEWORK_GLOBAL_GLOBAL_TENSOR_H_
#define SLUICE_FRAMEWORK_GLOBAL_GLOBAL_TENSOR_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/global/placement.h"
#include "framework/global/sbp.h"
#include "vm/attrs.h"

namespace sluice::global {

// Value type (copies share the local part, as eager tensors do). Thread-compatible.
class GlobalTensor {
 public:
  // The global tensor whose part on this rank is `local` (on the placement's device), laid
  // out as `sbp`: the logical shape is the local shape with each split axis multiplied by
  // its mesh axis (every rank's part has the same shape). On a rank outside the placement
  // `local` may be empty: `logical` and `dtype` (or a valid `local`'s dtype) describe the
  // tensor there, and are required (nothing is guessed: the ranks' metadata must agree).
  // InvalidArgument for a layout that does not fit the placement or the shape, or a part on
  // another device.
  static absl::StatusOr<GlobalTensor> FromLocal(eager::Context& ctx, const eager::Tensor& local,
                                                const Placement& placement, const NdSbp& sbp,
                                                std::optional<Shape> logical = std::nullopt,
                                                std::optional<DataType> dtype = std::nullopt);
  // The global tensor of logical value `whole`, which every rank of the placement holds
  // (the same values): each rank keeps its part under `sbp` (slices; partial sums keep the
  // value at mesh coordinate 0 and zeros elsewhere). No transfers. On a rank outside the
  // placement `whole` only gives the dtype and shape.
  static absl::StatusOr<GlobalTensor> FromWhole(eager::Context& ctx, const eager::Tensor& whole,
                                                const Placement& placement, const NdSbp& sbp);

  const Placement& placement() const { return placement_; }
  const NdSbp& sbp() const { return sbp_; }
  const Shape& shape() const { return shape_; }  // logical
  DataType dtype() const { return dtype_; }
  // This rank's parallel id in the placement; nullopt outside it.
  std::optional<int> parallel_id() const { return parallel_id_; }
  // This rank's part; an invalid tensor (valid() false) outside the placement.
  const eager::Tensor& local() const { return local_; }

  // The same logical tensor laid out as `sbp` (boxing: the collectives it takes).
  absl::StatusOr<GlobalTensor> ToSbp(const NdSbp& sbp) const;
  // The whole logical value on this rank (every rank of the placement gets it):
  // ToSbp(broadcast everywhere).local(). FailedPrecondition outside the placement.
  absl::StatusOr<eager::Tensor> Whole() const;

 private:
  GlobalTensor(eager::Context ctx, Placement placement, NdSbp sbp, Shape shape, DataType dtype,
               std::optional<int> parallel_id, eager::Tensor local)
      : ctx_(std::move(ctx)),
        placement_(std::move(placement)),
        sbp_(std::move(sbp)),
        shape_(std::move(shape)),
        dtype_(dtype),
        parallel_id_(parallel_id),
        local_(std::move(local)) {}
  friend absl::StatusOr<std::vector<GlobalTensor>> Call(absl::string_view op,
                                                        const std::vector<GlobalTensor>& inputs,
                                                        const vm::AttrMap& attrs);

  eager::Context ctx_;
  Placement placement_;
  NdSbp sbp_;
  Shape shape_;
  DataType dtype_;
  std::optional<int> parallel_id_;
  eager::Tensor local_;
};

// Runs `op` (one input per schema slot, each a global tensor on one placement) and returns
// its outputs. The output layout and the boxing follow sbp_signature.h; the outputs' logical
// shapes come from the op's schema on the logical inputs. A rank outside the placement
// runs nothing. InvalidArgument for inputs on different placements or of different
// contexts' ranks, and the op's own errors on the logical shapes.
absl::StatusOr<std::vector<GlobalTensor>> Call(absl::string_view op,
                                               const std::vector<GlobalTensor>& inputs,
                                               const vm::AttrMap& attrs = {});

absl::StatusOr<GlobalTensor> Add(const GlobalTensor& x, const GlobalTensor& y);
absl::StatusOr<GlobalTensor> Mul(const GlobalTensor& x, const GlobalTensor& y);
absl::StatusOr<GlobalTensor> Matmul(const GlobalTensor& x, const GlobalTensor& y);
absl::StatusOr<GlobalTensor> Relu(const GlobalTensor& x);
absl::StatusOr<GlobalTensor> ReduceSum(const GlobalTensor& x, std::vector<int64_t> axes = {},
                                       bool keepdim = false);

}  // namespace sluice::global

#endif  // SLUICE_FRAMEWORK_GLOBAL_GLOBAL_TENSOR_H_
