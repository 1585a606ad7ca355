#include "framework/graph/trace.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/persistable.h"

namespace sluice::framework::graph {

absl::StatusOr<Var> Trace::Param(const eager::Tensor& tensor) {
  if (!tensor.valid()) return absl::InvalidArgumentError("Trace::Param: an empty Tensor");
  if (tensor.context().vm() != ctx_.vm()) {
    return absl::InvalidArgumentError(
        "Trace::Param: the tensor belongs to another eager context than the graph's");
  }
  if (tensor.device() != device_) {
    return absl::InvalidArgumentError(absl::StrCat("Trace::Param: the tensor is on ",
                                                   tensor.device().ToString(),
                                                   ", the graph runs on ", device_.ToString()));
  }
  const void* key = tensor.blob().get();
  if (auto it = param_index_.find(key); it != param_index_.end()) {
    return Var(&main_, params_[it->second].first);
  }
  ir::VarDesc desc;
  desc.name = UniqueNameInBoth(main_, startup_, "param");
  desc.dtype = tensor.dtype();
  desc.shape = tensor.shape();
  desc.persistable = true;
  desc.is_parameter = true;
  SLUICE_ASSIGN_OR_RETURN(Var var, CreateVar(main_, desc));
  param_index_.emplace(key, params_.size());
  params_.emplace_back(desc.name, tensor);
  return var;
}

}  // namespace sluice::framework::graph
