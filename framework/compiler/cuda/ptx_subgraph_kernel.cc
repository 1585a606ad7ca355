#include "framework/compiler/cuda/ptx_subgraph_kernel.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/tensor_storage.h"
#include "ep/device.h"
#include "ep/stream.h"

namespace sluice::framework::compiler {

absl::StatusOr<const ep::PtxKernel*> PtxSubgraphKernel::LoadedOn(int device_index) const {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<ep::PtxKernel>& kernel = loaded_[device_index];
  if (kernel == nullptr) {
    absl::StatusOr<std::unique_ptr<ep::PtxKernel>> loaded =
        ep::LoadPtxKernel(device_index, ptx_, entry_);
    if (!loaded.ok()) {
      loaded_.erase(device_index);
      return loaded.status();
    }
    kernel = *std::move(loaded);
  }
  return kernel.get();
}

absl::Status PtxSubgraphKernel::Launch(vm::KernelContext& ctx) const {
  const absl::Span<vm::Blob* const> in = ctx.inputs();
  const absl::Span<vm::Blob* const> out = ctx.outputs();
  if (in.size() != graph_->inputs.size() || out.size() != graph_->outputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name_, "': takes ",
                                                   graph_->inputs.size(), " inputs and ",
                                                   graph_->outputs.size(), " outputs"));
  }
  std::vector<void*> pointers;
  for (size_t i = 0; i < in.size(); ++i) {
    const vm::Blob* blob = in[i];
    if (blob->dtype() != graph_->inputs[i].dtype || blob->shape() != graph_->inputs[i].shape ||
        blob->raw_storage() == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", name_, "': input ", i, " (", blob->DebugName(), ") must be ",
                       DataTypeName(graph_->inputs[i].dtype), graph_->inputs[i].shape.ToString()));
    }
    pointers.push_back(blob->raw_storage()->data());
  }
  for (size_t o = 0; o < out.size(); ++o) {
    const vm::Blob* blob = out[o];
    const DataType dtype = graph_->dtype_of(graph_->outputs[o]);
    if (blob->dtype() != dtype || blob->shape() != graph_->domain ||
        blob->raw_storage() == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", name_, "': output ", o, " (", blob->DebugName(), ") must be ",
                       DataTypeName(dtype), graph_->domain.ToString()));
    }
    pointers.push_back(blob->raw_storage()->data());
  }
  long long n = graph_->domain.NumElements();
  if (n == 0) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(const ep::PtxKernel* kernel,
                          LoadedOn(ctx.stream()->device()->id().index()));
  std::vector<void*> args;
  for (void*& p : pointers) args.push_back(&p);
  args.push_back(&n);
  constexpr unsigned kBlock = 256;
  const unsigned grid = static_cast<unsigned>(std::min<long long>((n + kBlock - 1) / kBlock, 4096));
  return kernel->Launch(ctx.stream()->native_handle(), grid, kBlock, args);
}

}  // namespace sluice::framework::compiler
