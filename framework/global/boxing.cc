#include "framework/global/boxing.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/global/internal/box_steps.h"

namespace sluice::global {

namespace {

using eager::Tensor;

// Boxing's steps as eager ops.
struct EagerSteps {
  using Value = Tensor;
  int Rank(const Tensor& x) const { return x.shape().rank(); }
  absl::StatusOr<Tensor> Collective(const Tensor& x, absl::string_view op,
                                    const std::vector<int>& group) const {
    eager::Context ctx = x.context();
    return ctx.CallSingle(op, {x}, internal::BoxingCollectiveAttrs(op, group));
  }
  absl::StatusOr<Tensor> Transpose(const Tensor& x, std::vector<int64_t> perm) const {
    return fn::Transpose(x, std::move(perm));
  }
  absl::StatusOr<Tensor> Slice(const Tensor& x, int axis, int64_t parts, int64_t index) const {
    SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> pieces, fn::Split(x, parts, axis));
    return pieces[static_cast<size_t>(index)];
  }
  absl::StatusOr<Tensor> ZerosLike(const Tensor& x) const { return fn::FillZerosLike(x); }
};

}  // namespace

absl::StatusOr<Shape> LocalShape(const Shape& logical, const Placement& placement,
                                 const NdSbp& sbp) {
  if (static_cast<int>(sbp.size()) != placement.ndim()) {
    return absl::InvalidArgumentError(absl::StrCat("sbp ", NdSbpToString(sbp), " has ", sbp.size(),
                                                   " entries; placement ", placement.ToString(),
                                                   " has ", placement.ndim(), " mesh axes"));
  }
  std::vector<int64_t> dims(logical.dims().begin(), logical.dims().end());
  for (int d = 0; d < placement.ndim(); ++d) {
    if (!sbp[d].is_split()) continue;
    const int k = sbp[d].axis;
    const int64_t parts = placement.hierarchy()[d];
    if (k < 0 || k >= logical.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("sbp ", sbp[d].ToString(), " splits axis ", k,
                                                     " of a tensor of shape ", logical.ToString()));
    }
    if (dims[k] % parts != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", logical.ToString(), " under ", NdSbpToString(sbp), ": axis ", k,
                       " (", dims[k], " left) does not split into ", parts, " equal parts"));
    }
    dims[k] /= parts;
  }
  return Shape(dims);
}

absl::StatusOr<Tensor> Box(const Tensor& local, const Placement& placement, int id,
                           const Shape& logical, const NdSbp& from, const NdSbp& to) {
  SLUICE_RETURN_IF_ERROR(LocalShape(logical, placement, from).status());
  SLUICE_RETURN_IF_ERROR(LocalShape(logical, placement, to).status());
  EagerSteps steps;
  return internal::BoxSteps(steps, local, placement, id, from, to);
}

}  // namespace sluice::global
