// The run-time compiler of a build without the CUDA toolkit: nothing compiles.
#include "ep/cuda/ptx_compiler.h"

namespace sluice::ep {

absl::StatusOr<NvrtcVersion> GetNvrtcVersion() {
  return absl::UnimplementedError("built without CUDA");
}

absl::StatusOr<std::string> CompileToPtx(const std::string&, const std::string&, int, int) {
  return absl::UnimplementedError("built without CUDA");
}

}  // namespace sluice::ep
