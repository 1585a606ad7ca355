// Run-time compilation of CUDA C++ to PTX with NVRTC, for kernels generated while a program
// runs (the subgraph compiler's CUDA back end, framework/compiler/cuda/). NVRTC is a library,
// not a device: it needs no driver and no GPU, so PTX can be produced and checked anywhere the
// toolkit is installed. Loading and launching the PTX is ep/cuda/ptx_kernel.h.
//
// Built with the CUDA toolkit (SLUICE_WITH_CUDA); without it every function here returns
// Unimplemented("built without CUDA"), so callers need no #ifdef.
//
// Thread-safety: every function is thread-safe. Each call creates, compiles and destroys its
// own NVRTC program, and NVRTC allows concurrent calls on distinct programs.
#ifndef SLUICE_EP_CUDA_PTX_COMPILER_H_
#define SLUICE_EP_CUDA_PTX_COMPILER_H_

#include <string>

#include "absl/status/statusor.h"

namespace sluice::ep {

// The default target: the oldest architecture current NVRTC releases accept (NVRTC 13 dropped
// compute_70). PTX for it is JIT-compiled by the driver for any newer GPU.
inline constexpr int kDefaultPtxMajor = 7;
inline constexpr int kDefaultPtxMinor = 5;

struct NvrtcVersion {
  int major = 0;
  int minor = 0;
};

// The NVRTC library's version. Unimplemented without CUDA.
absl::StatusOr<NvrtcVersion> GetNvrtcVersion();

// Compiles `source` (CUDA C++17, no #include of toolkit headers needed for the builtins and
// the device math functions) to PTX for the virtual architecture compute_<major><minor>.
// `name` names the program in NVRTC's log and error messages (e.g. "fused_1f2e.cu").
//
// Options: --fmad=false, so that `a * b + c` is rounded twice, as the uncompiled kernels (built
// with --fmad=false too) and the host compute it; IEEE division and square root, no flushing
// of subnormals (NVRTC's defaults, stated explicitly).
//
// Errors: InvalidArgument when the architecture is not one this NVRTC supports (the message
// lists those it does) or the source does not compile (the message carries NVRTC's log);
// Internal for any other NVRTC failure; Unimplemented without CUDA.
absl::StatusOr<std::string> CompileToPtx(const std::string& source, const std::string& name,
                                         int compute_capability_major = kDefaultPtxMajor,
                                         int compute_capability_minor = kDefaultPtxMinor);

}  // namespace sluice::ep

#endif  // SLUICE_EP_CUDA_PTX_COMPILER_H_
