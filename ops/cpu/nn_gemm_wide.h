// The matmul's blocked GEMM built for wider vector registers (nn_gemm_avx2.cc and
// nn_gemm_avx512.cc on x86-64, in optimized builds, never contracted), chosen at run time on
// cpus that have them. The wide build sums every element in the same order as the
// baseline one (nn_gemm.h), so which one runs changes the time, never the bits.
//
// Thread-safe: FindWideGemm's answer is computed once.
#ifndef SLUICE_OPS_CPU_NN_GEMM_WIDE_H_
#define SLUICE_OPS_CPU_NN_GEMM_WIDE_H_

#include <cstdint>

namespace sluice::ops::internal::nn {

// A row-major matrix operand: element (r, c) of op(M) is data[r * ld + c], or
// data[c * ld + r] when transposed.
template <typename T>
struct GemmOperand {
  const T* data = nullptr;
  int64_t ld = 0;
  bool transposed = false;
  T at(int64_t r, int64_t c) const { return transposed ? data[c * ld + r] : data[r * ld + c]; }
};

// One wide build: C += op(A) * op(B) for m, n, k > 0 with packing buffers of packed_a(m, k)
// and packed_b(n, k) elements (the caller allocates: the wide code calls no library).
template <typename T>
struct WideGemm {
  const char* name;
  int64_t (*packed_a)(int64_t m, int64_t k);
  int64_t (*packed_b)(int64_t n, int64_t k);
  void (*run)(int64_t m, int64_t n, int64_t k, const GemmOperand<T>& a, const GemmOperand<T>& b,
              T* c, int64_t ldc, T* packed_a, T* packed_b);
};

// The wide build for this cpu: AVX-512 over AVX2; null where there is none (another
// architecture, a debug build, a cpu without AVX2, or SLUICE_GEMM=baseline in the
// environment, read once; SLUICE_GEMM=avx2 skips AVX-512).
template <typename T>
const WideGemm<T>* FindWideGemm();

}  // namespace sluice::ops::internal::nn

#endif  // SLUICE_OPS_CPU_NN_GEMM_WIDE_H_
