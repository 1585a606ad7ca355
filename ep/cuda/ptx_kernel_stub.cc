// Kernel loading in a build without the CUDA toolkit: there is nothing to load into.
#include "ep/cuda/ptx_kernel.h"

namespace sluice::ep {

absl::StatusOr<std::unique_ptr<PtxKernel>> LoadPtxKernel(int, const std::string&,
                                                         const std::string&) {
  return absl::UnimplementedError("built without CUDA");
}

}  // namespace sluice::ep
