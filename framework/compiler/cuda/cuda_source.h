// The subgraph compiler's CUDA back end, first half: a Subgraph (framework/compiler/subgraph.h)
// printed as the CUDA C++ source of one kernel, which ep/cuda/ptx_compiler.h compiles to PTX at
// run time (NVRTC) and ep/cuda/ptx_kernel.h loads and launches. Plain C++: generating source
// needs no toolkit, so this is built everywhere.
//
// The kernel (extern "C" __global__, named CudaSource::entry) takes, in order, a pointer to
// each input (const T*), a pointer to each output (T*), then the domain's element count n
// (long long, which must be the domain's). A grid-stride loop visits every flat index i < n of
// the domain: it reads each input with numpy broadcasting (domain_indexing.h: the dims are
// constants in the code), computes every node as one statement `const T v<id> = ...;` in node
// order, and stores the outputs last. Any launch geometry covers the domain.
//
// Element formulas and rounding: each node is the uncompiled op's formula (ops/cpu/
// elementwise_kernels.cc, basic_kernels.cc, shape_and_optimizer_kernels.cc) in the same
// operation order, one IEEE operation at a time when compiled with --fmad=false (as
// CompileToPtx does): scale is s * x + b with s and b rounded to T first, sigmoid is the
// e / (1 + e) form of elementwise_loops.h, constants are exact (hex-float literals). exp, log,
// tanh and sqrt call the device math library (expf/exp, ...): sqrt is correctly rounded, the
// others may differ from the host's Cephes-based f32 functions (and from its libm for f64) in
// the last bits, within each side's documented ulp bounds — as the uncompiled cuda kernels do.
//
// In place: an output may share memory with an input of the domain's element count; each
// element is read before the same thread writes it, so no pointer is declared __restrict__.
//
// Thread-safety: GenerateCudaSource is a pure function (thread-safe).
#ifndef SLUICE_FRAMEWORK_COMPILER_CUDA_CUDA_SOURCE_H_
#define SLUICE_FRAMEWORK_COMPILER_CUDA_CUDA_SOURCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "framework/compiler/subgraph.h"

namespace sluice::framework::compiler {

struct CudaSource {
  std::string source;  // one translation unit, no #include
  // "sluice_fused_<16 hex digits>": the hash of the subgraph's ComputationText, so equal
  // computations get equal names and sources.
  std::string entry;
};

// InvalidArgument when `g` does not validate (Subgraph::Validate's message).
absl::StatusOr<CudaSource> GenerateCudaSource(const Subgraph& g);

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_CUDA_CUDA_SOURCE_H_
