// A cache-blocked matrix multiply on host memory for the nn family's matmul kernels:
// C (+)= op(A) * op(B) with row-major operands, either side optionally transposed.
//
// Blocking (the usual GotoBLAS/BLIS loop nest): the k dimension is split into kGemmKc-deep
// slices and n into kGemmNc-wide slices; each slice of op(B) is packed into kGemmNr-wide column
// panels (k-major, zero-padded), and each kGemmMc-row block of op(A) into kGemmMr-row panels. The
// micro-kernel keeps a kGemmMr x kGemmNr tile of C in local accumulators and walks k, reading one
// packed row of B (contiguous, vectorized by g++ -O3) per step; packing also absorbs the
// transposes, so every operand layout runs the same inner loop.
#ifndef SLUICE_OPS_CPU_NN_GEMM_H_
#define SLUICE_OPS_CPU_NN_GEMM_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/intra_op_pool.h"
#include "ops/cpu/nn_gemm_wide.h"

namespace sluice::ops::internal::nn {

// Block sizes in elements. A kMc x kKc block of A stays in L2, a kKc x kNr panel of B in L1.
inline constexpr int64_t kGemmMr = 4;
inline constexpr int64_t kGemmKc = 256;
inline constexpr int64_t kGemmMc = 96;
inline constexpr int64_t kGemmNc = 2048;
template <typename T>
inline constexpr int64_t kGemmNr = 32 / sizeof(T);  // 8 floats, 4 doubles: two SSE registers

// The blocked loop nest below is instantiated per instruction set: Mr x Nr is the
// micro-kernel's tile, and Isa a tag type that keeps each instantiation's symbols apart (an
// wide build's copy, nn_gemm_wide_micro.h, uses a tag of internal linkage, so the linker never
// hands its code to a baseline caller). Every instantiation sums each element of C in the
// same order (k ascending within each kGemmKc slice, the slices added to C in turn), so
// results are the same bits whichever runs.

// Packs op(A)[i0 : i0 + mc, p0 : p0 + kc] into Mr-row panels: panel q holds rows
// q*Mr.. as [kc][Mr], rows past mc are zero.
template <typename T, int64_t Mr, typename Isa>
void PackGemmA(const GemmOperand<T>& a, int64_t i0, int64_t p0, int64_t mc, int64_t kc, T* out) {
  constexpr int64_t mr = Mr;
  for (int64_t q = 0; q < mc; q += mr) {
    const int64_t rows = std::min(mr, mc - q);
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t i = 0; i < rows; ++i) out[p * mr + i] = a.at(i0 + q + i, p0 + p);
      for (int64_t i = rows; i < mr; ++i) out[p * mr + i] = T(0);
    }
    out += kc * mr;
  }
}

// Packs op(B)[p0 : p0 + kc, j0 : j0 + nc] into Nr-wide panels: panel q holds columns
// q*Nr.. as [kc][Nr], columns past nc are zero.
template <typename T, int64_t Nr, typename Isa>
void PackGemmB(const GemmOperand<T>& b, int64_t p0, int64_t j0, int64_t kc, int64_t nc, T* out) {
  constexpr int64_t nr = Nr;
  for (int64_t q = 0; q < nc; q += nr) {
    const int64_t cols = std::min(nr, nc - q);
    if (!b.transposed && cols == nr) {
      for (int64_t p = 0; p < kc; ++p) {
        const T* row = b.data + (p0 + p) * b.ld + j0 + q;
        for (int64_t j = 0; j < nr; ++j) out[p * nr + j] = row[j];
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t j = 0; j < cols; ++j) out[p * nr + j] = b.at(p0 + p, j0 + q + j);
        for (int64_t j = cols; j < nr; ++j) out[p * nr + j] = T(0);
      }
    }
    out += kc * nr;
  }
}

// C[0:rows, 0:cols] += Apanel * Bpanel over kc, where rows <= Mr and cols <= Nr.
template <typename T, int64_t Mr, int64_t Nr, typename Isa>
inline void GemmMicroKernel(int64_t kc, const T* __restrict ap, const T* __restrict bp,
                            T* __restrict c, int64_t ldc, int64_t rows, int64_t cols) {
  constexpr int64_t mr = Mr;
  constexpr int64_t nr = Nr;
  T acc[mr][nr] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const T* b = bp + p * nr;
    const T* a = ap + p * mr;
    for (int64_t i = 0; i < mr; ++i) {
      for (int64_t j = 0; j < nr; ++j) acc[i][j] += a[i] * b[j];
    }
  }
  if (rows == mr && cols == nr) {
    for (int64_t i = 0; i < mr; ++i) {
      for (int64_t j = 0; j < nr; ++j) c[i * ldc + j] += acc[i][j];
    }
  } else {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] += acc[i][j];
    }
  }
}

// The packing buffers GemmBlocked<T, Mr, Nr> needs for an m x n x k product, in elements:
// A's depends on Mr alone, B's on Nr alone.
template <int64_t Mr>
inline int64_t GemmPackedA(int64_t m, int64_t k) {
  return std::min((m + Mr - 1) / Mr * Mr, (kGemmMc + Mr - 1) / Mr * Mr) * std::min(k, kGemmKc);
}
template <int64_t Nr>
inline int64_t GemmPackedB(int64_t n, int64_t k) {
  return std::min((n + Nr - 1) / Nr * Nr, kGemmNc) * std::min(k, kGemmKc);
}

// The baseline micro-kernel as GemmBlocked's Micro: a struct whose Run has
// GemmMicroKernel's contract.
template <typename T, int64_t Mr, int64_t Nr>
struct PortableMicroKernel {
  static void Run(int64_t kc, const T* ap, const T* bp, T* c, int64_t ldc, int64_t rows,
                  int64_t cols) {
    GemmMicroKernel<T, Mr, Nr, PortableMicroKernel>(kc, ap, bp, c, ldc, rows, cols);
  }
};

// C[m x n] (row stride ldc) += op(A)[m x k] * op(B)[k x n], m, n, k > 0, with packing
// buffers of GemmPackedA / GemmPackedB elements, Micro::Run computing each Mr x Nr tile.
// No allocation, no library calls beyond what inlines: safe to build for another
// instruction set (nn_gemm_wide_micro.h), where Micro, of internal linkage, also serves as Isa.
template <typename T, int64_t Mr, int64_t Nr, typename Micro>
void GemmBlocked(int64_t m, int64_t n, int64_t k, const GemmOperand<T>& a, const GemmOperand<T>& b,
                 T* c, int64_t ldc, T* packed_a, T* packed_b) {
  constexpr int64_t mr = Mr;
  constexpr int64_t nr = Nr;
  for (int64_t j0 = 0; j0 < n; j0 += kGemmNc) {
    const int64_t nc = std::min(kGemmNc, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kGemmKc) {
      const int64_t kc = std::min(kGemmKc, k - p0);
      PackGemmB<T, Nr, Micro>(b, p0, j0, kc, nc, packed_b);
      for (int64_t i0 = 0; i0 < m; i0 += kGemmMc) {
        const int64_t mc = std::min(kGemmMc, m - i0);
        PackGemmA<T, Mr, Micro>(a, i0, p0, mc, kc, packed_a);
        for (int64_t jq = 0; jq < nc; jq += nr) {
          const T* bp = packed_b + (jq / nr) * kc * nr;
          const int64_t cols = std::min(nr, nc - jq);
          for (int64_t iq = 0; iq < mc; iq += mr) {
            const T* ap = packed_a + (iq / mr) * kc * mr;
            T* tile = c + (i0 + iq) * ldc + j0 + jq;
            Micro::Run(kc, ap, bp, tile, ldc, std::min(mr, mc - iq), cols);
          }
        }
      }
    }
  }
}

// C[m x n] (row stride ldc) = op(A)[m x k] * op(B)[k x n], or += when `accumulate`.
// k == 0 gives zeros (or leaves C unchanged when accumulating). Runs the widest build the
// cpu supports (nn_gemm_wide.h); the bits do not depend on which.
template <typename T>
void Gemm(int64_t m, int64_t n, int64_t k, const GemmOperand<T>& a, const GemmOperand<T>& b, T* c,
          int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (!accumulate) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
  }
  if (k == 0) return;
  if (const WideGemm<T>* wide = FindWideGemm<T>()) {
    std::vector<T> packed_a(wide->packed_a(m, k));
    std::vector<T> packed_b(wide->packed_b(n, k));
    wide->run(m, n, k, a, b, c, ldc, packed_a.data(), packed_b.data());
    return;
  }
  constexpr int64_t mr = kGemmMr;
  constexpr int64_t nr = kGemmNr<T>;
  std::vector<T> packed_a(GemmPackedA<mr>(m, k));
  std::vector<T> packed_b(GemmPackedB<nr>(n, k));
  GemmBlocked<T, mr, nr, PortableMicroKernel<T, mr, nr>>(m, n, k, a, b, c, ldc, packed_a.data(),
                                                         packed_b.data());
}

// Rows [r0, ...) of op(M): the same operand, starting at row r0.
template <typename T>
GemmOperand<T> GemmRowsFrom(const GemmOperand<T>& m, int64_t r0) {
  return {m.transposed ? m.data + r0 : m.data + r0 * m.ld, m.ld, m.transposed};
}

// The fewest multiply-adds a chunk of a split Gemm gets (about 50 µs of one core's work): a
// helper's wake-up (tens of µs) and the packing of B that every chunk repeats must be small
// beside it. A Gemm of fewer than 4x this stays on its thread (a 128^3 matmul split in eight
// ran 13% slower than on one thread; docs/perf-log.md, 2026-12-07).
inline constexpr int64_t kGemmParallelMacs = int64_t{1} << 20;

// Gemm with C's rows split across `parallel`'s threads (each chunk of rows is its own Gemm
// over the same B). Every element of C sums its products in the same order as one Gemm, so
// the result does not depend on the split. Cancelled when the VM's cancel skipped rows.
template <typename T>
absl::Status ParallelGemm(const ParallelScope& parallel, int64_t m, int64_t n, int64_t k,
                          const GemmOperand<T>& a, const GemmOperand<T>& b, T* c, int64_t ldc,
                          bool accumulate) {
  const int64_t macs = m * n * std::max<int64_t>(k, 1);
  if (parallel.pool() == nullptr || macs < 4 * kGemmParallelMacs) {
    Gemm(m, n, k, a, b, c, ldc, accumulate);
    return absl::OkStatus();
  }
  const int64_t row_macs = std::max<int64_t>(1, n * std::max<int64_t>(k, 1));
  const int64_t grain = std::max(kGemmMr, (kGemmParallelMacs + row_macs - 1) / row_macs);
  return parallel.For(
      m, grain,
      [&](int64_t r0, int64_t r1) {
        Gemm(r1 - r0, n, k, GemmRowsFrom(a, r0), b, c + r0 * ldc, ldc, accumulate);
      },
      "matmul");
}

}  // namespace sluice::ops::internal::nn

#endif  // SLUICE_OPS_CPU_NN_GEMM_H_
