// The blocked GEMM of nn_gemm.h built for AVX2 (-mavx2 -mno-fma) with -ffp-contract=off in
// optimized x86-64 builds (ops/CMakeLists.txt): a 6 x 16 float tile (nn_gemm_wide_micro.h). Only
// the tables leave the file, read after nn_gemm_dispatch.cc checked the cpu; elsewhere they are
// null.
#if defined(__AVX2__)
#include "ops/cpu/nn_gemm_wide_micro.h"
#endif
#include "ops/cpu/nn_gemm_wide_tables.h"

namespace sluice::ops::internal::nn {
#if defined(__AVX2__)
namespace {
constexpr WideGemm<float> kF32 = WideMicro<float, 32>::Table("avx2");
constexpr WideGemm<double> kF64 = WideMicro<double, 32>::Table("avx2");
}  // namespace
const WideGemm<float>* Avx2GemmF32() { return &kF32; }
const WideGemm<double>* Avx2GemmF64() { return &kF64; }
#else
const WideGemm<float>* Avx2GemmF32() { return nullptr; }
const WideGemm<double>* Avx2GemmF64() { return nullptr; }
#endif
}  // namespace sluice::ops::internal::nn
