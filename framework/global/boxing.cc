#include "framework/global/boxing.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/eager/context.h"
#include "framework/eager/functional.h"

namespace sluice::global {

namespace {

using eager::Tensor;

std::vector<int64_t> Ranks(const std::vector<int>& group) {
  return std::vector<int64_t>(group.begin(), group.end());
}

// perm moving axis `k` to the front, and its inverse.
std::vector<int64_t> ToFront(int rank, int k) {
  std::vector<int64_t> perm = {k};
  for (int a = 0; a < rank; ++a) {
    if (a != k) perm.push_back(a);
  }
  return perm;
}
std::vector<int64_t> FromFront(int rank, int k) {
  std::vector<int64_t> perm;
  for (int a = 1; a <= k; ++a) perm.push_back(a);
  perm.push_back(0);
  for (int a = k + 1; a < rank; ++a) perm.push_back(a);
  return perm;
}

// A collective of one input along the first axis, over `group`.
absl::StatusOr<Tensor> GroupCall(const Tensor& x, absl::string_view op,
                                 const std::vector<int>& group, bool reduce) {
  vm::AttrMap attrs;
  attrs.Set("ranks", Ranks(group));
  if (op != "all_reduce") attrs.Set("nranks", static_cast<int64_t>(group.size()));
  if (reduce) attrs.Set("reduce", std::string("sum"));
  eager::Context ctx = x.context();
  return ctx.CallSingle(op, {x}, attrs);
}

// all_gather or reduce_scatter along tensor axis `k`.
absl::StatusOr<Tensor> AlongAxis(const Tensor& x, int k, absl::string_view op,
                                 const std::vector<int>& group) {
  const bool reduce = op == "reduce_scatter";
  const int rank = x.shape().rank();
  if (k == 0) return GroupCall(x, op, group, reduce);
  SLUICE_ASSIGN_OR_RETURN(Tensor front, eager::Transpose(x, ToFront(rank, k)));
  SLUICE_ASSIGN_OR_RETURN(Tensor moved, GroupCall(front, op, group, reduce));
  return eager::Transpose(moved, FromFront(rank, k));
}

absl::StatusOr<Tensor> Slice(const Tensor& x, int k, int64_t parts, int64_t index) {
  if (parts == 1) return x;
  SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> pieces, eager::Split(x, parts, k));
  return pieces[static_cast<size_t>(index)];
}

// One mesh axis's conversion.
absl::StatusOr<Tensor> Convert(const Tensor& x, const Sbp& from, const Sbp& to,
                               const std::vector<int>& group, int64_t coord) {
  const int64_t n = static_cast<int64_t>(group.size());
  if (from == to) return x;
  if (from.is_partial_sum()) {
    if (to.is_broadcast()) return GroupCall(x, "all_reduce", group, /*reduce=*/true);
    return AlongAxis(x, to.axis, "reduce_scatter", group);  // to S(k)
  }
  if (from.is_broadcast()) {
    if (to.is_split()) return Slice(x, to.axis, n, coord);
    if (coord == 0) return x;  // to P
    return eager::FillZerosLike(x);
  }
  // From S(i): gather, then what B becomes.
  SLUICE_ASSIGN_OR_RETURN(Tensor whole, AlongAxis(x, from.axis, "all_gather", group));
  return Convert(whole, Sbp::Broadcast(), to, group, coord);
}

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
    if (k >= logical.rank()) {
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
  if (from == to) return local;
  const std::vector<int64_t> coords = placement.Coordinates(id);
  Tensor x = local;
  NdSbp current = from;
  // Two mesh axes may split one tensor axis: the outer axis takes the coarse blocks and
  // the inner one splits each of them. Gathering every split inner axis first, then
  // converting outer axes first, keeps each step's blocks contiguous.
  for (int d = placement.ndim() - 1; d >= 0; --d) {
    if (!current[d].is_split()) continue;
    SLUICE_ASSIGN_OR_RETURN(
        x, Convert(x, current[d], Sbp::Broadcast(), placement.AxisGroup(id, d), coords[d]));
    current[d] = Sbp::Broadcast();
  }
  for (int d = 0; d < placement.ndim(); ++d) {
    if (current[d] == to[d]) continue;
    SLUICE_ASSIGN_OR_RETURN(x,
                            Convert(x, current[d], to[d], placement.AxisGroup(id, d), coords[d]));
  }
  return x;
}

}  // namespace sluice::global
