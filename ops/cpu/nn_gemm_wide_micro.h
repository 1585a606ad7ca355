// The wide GEMM builds' micro-kernel, for nn_gemm_avx2.cc and nn_gemm_avx512.cc alone: each
// includes this header once, compiled for its instruction set, and gets its own copy of
// everything here (an anonymous namespace), so no code built for one instruction set is
// shared with a caller built for another.
//
// The tile is 6 rows x two vector registers of columns, in GCC vector types so that the
// twelve accumulators stay in registers: C[i][j] += sum over p of a[i] * b[j], the products
// and sums in the same order and rounded one by one (the files build with
// -ffp-contract=off), as GemmMicroKernel (nn_gemm.h) does. The bits match the baseline build.
#ifndef SLUICE_OPS_CPU_NN_GEMM_WIDE_MICRO_H_
#define SLUICE_OPS_CPU_NN_GEMM_WIDE_MICRO_H_

#include <cstdint>

#include "ops/cpu/nn_gemm.h"
#include "ops/cpu/nn_gemm_wide.h"

namespace sluice::ops::internal::nn {
namespace {  // NOLINT(build/namespaces): one copy per including file, by design

constexpr int64_t kWideMr = 6;

// VectorBytes: 32 for AVX2, 64 for AVX-512.
template <typename T, int VectorBytes>
struct WideMicro {
  using V __attribute__((vector_size(VectorBytes))) = T;
  static constexpr int64_t kLanes = VectorBytes / sizeof(T);
  static constexpr int64_t kNr = 2 * kLanes;

  static void Run(int64_t kc, const T* __restrict ap, const T* __restrict bp, T* __restrict c,
                  int64_t ldc, int64_t rows, int64_t cols) {
    V acc[kWideMr][2] = {};
    for (int64_t p = 0; p < kc; ++p) {
      V b0, b1;
      __builtin_memcpy(&b0, bp + p * kNr, sizeof(V));
      __builtin_memcpy(&b1, bp + p * kNr + kLanes, sizeof(V));
      const T* a = ap + p * kWideMr;
      for (int64_t i = 0; i < kWideMr; ++i) {
        const V ai = V{} + a[i];  // a[i] in every lane
        acc[i][0] += ai * b0;
        acc[i][1] += ai * b1;
      }
    }
    if (rows == kWideMr && cols == kNr) {
      for (int64_t i = 0; i < kWideMr; ++i) {
        V c0, c1;
        __builtin_memcpy(&c0, c + i * ldc, sizeof(V));
        __builtin_memcpy(&c1, c + i * ldc + kLanes, sizeof(V));
        c0 += acc[i][0];
        c1 += acc[i][1];
        __builtin_memcpy(c + i * ldc, &c0, sizeof(V));
        __builtin_memcpy(c + i * ldc + kLanes, &c1, sizeof(V));
      }
      return;
    }
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] += acc[i][j / kLanes][j % kLanes];
    }
  }

  static int64_t PackedA(int64_t m, int64_t k) { return GemmPackedA<kWideMr>(m, k); }
  static int64_t PackedB(int64_t n, int64_t k) { return GemmPackedB<kNr>(n, k); }
  static void Gemm(int64_t m, int64_t n, int64_t k, const GemmOperand<T>& a,
                   const GemmOperand<T>& b, T* c, int64_t ldc, T* packed_a, T* packed_b) {
    GemmBlocked<T, kWideMr, kNr, WideMicro>(m, n, k, a, b, c, ldc, packed_a, packed_b);
  }
  static constexpr WideGemm<T> Table(const char* name) {
    return WideGemm<T>{name, &PackedA, &PackedB, &Gemm};
  }
};

}  // namespace
}  // namespace sluice::ops::internal::nn

#endif  // SLUICE_OPS_CPU_NN_GEMM_WIDE_MICRO_H_
