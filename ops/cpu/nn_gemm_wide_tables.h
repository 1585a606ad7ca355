// The wide GEMM builds' tables (nn_gemm_avx2.cc, nn_gemm_avx512.cc), for
// nn_gemm_dispatch.cc alone: null in a
// build without them. Calling through a table needs a cpu with the instruction set.
#ifndef SLUICE_OPS_CPU_NN_GEMM_WIDE_TABLES_H_
#define SLUICE_OPS_CPU_NN_GEMM_WIDE_TABLES_H_

#include "ops/cpu/nn_gemm_wide.h"

namespace sluice::ops::internal::nn {

const WideGemm<float>* Avx2GemmF32();
const WideGemm<double>* Avx2GemmF64();
const WideGemm<float>* Avx512GemmF32();
const WideGemm<double>* Avx512GemmF64();

}  // namespace sluice::ops::internal::nn

#endif  // SLUICE_OPS_CPU_NN_GEMM_WIDE_TABLES_H_
