// The matmul's GEMM builds (ops/cpu/nn_gemm.h and nn_gemm_wide.h): the AVX2 and AVX-512
// builds give the baseline build's bits, for random shapes (edge tiles included), both
// transposes, accumulation and both dtypes. Each wide build runs only where the cpu has it.
#include "ops/cpu/nn_gemm.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "ops/cpu/nn_gemm_wide_tables.h"

namespace sluice::ops::internal::nn {
namespace {

template <typename T>
std::vector<T> Random(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<double> dist(-2.0, 2.0);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// C = op(A) op(B) (+ C) with the baseline micro-kernel.
template <typename T>
void BaselineGemm(int64_t m, int64_t n, int64_t k, const GemmOperand<T>& a, const GemmOperand<T>& b,
                  T* c, int64_t ldc) {
  constexpr int64_t mr = kGemmMr;
  constexpr int64_t nr = kGemmNr<T>;
  std::vector<T> pa(GemmPackedA<mr>(m, k)), pb(GemmPackedB<nr>(n, k));
  GemmBlocked<T, mr, nr, PortableMicroKernel<T, mr, nr>>(m, n, k, a, b, c, ldc, pa.data(),
                                                         pb.data());
}

template <typename T>
void ExpectSameBits(const WideGemm<T>* wide, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dim(1, 300);
  for (int trial = 0; trial < 40; ++trial) {
    // Mostly small shapes, some past the kGemmKc and kGemmMc blocks.
    const int64_t m = trial % 5 == 0 ? dim(rng) : dim(rng) % 40 + 1;
    const int64_t n = dim(rng) % 100 + 1;
    const int64_t k = trial % 7 == 0 ? dim(rng) + 250 : dim(rng) % 70 + 1;
    const bool ta = trial % 2 == 1, tb = trial % 3 == 1;
    const std::vector<T> a = Random<T>(rng, m * k), b = Random<T>(rng, k * n);
    const std::vector<T> c0 = Random<T>(rng, m * n);
    const GemmOperand<T> oa{a.data(), ta ? m : k, ta}, ob{b.data(), tb ? k : n, tb};
    std::vector<T> want = c0, got = c0;
    BaselineGemm(m, n, k, oa, ob, want.data(), n);
    std::vector<T> pa(wide->packed_a(m, k)), pb(wide->packed_b(n, k));
    wide->run(m, n, k, oa, ob, got.data(), n, pa.data(), pb.data());
    ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(T)), 0)
        << wide->name << " m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb;
  }
}

TEST(NnGemmTest, Avx2BuildGivesTheBaselineBits) {
#if defined(__x86_64__)
  if (Avx2GemmF32() == nullptr || !__builtin_cpu_supports("avx2")) {
    GTEST_SKIP() << "no AVX2 build or cpu";
  }
  ExpectSameBits(Avx2GemmF32(), 1);
  ExpectSameBits(Avx2GemmF64(), 2);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

TEST(NnGemmTest, Avx512BuildGivesTheBaselineBits) {
#if defined(__x86_64__)
  if (Avx512GemmF32() == nullptr || !__builtin_cpu_supports("avx512f")) {
    GTEST_SKIP() << "no AVX-512 build or cpu";
  }
  ExpectSameBits(Avx512GemmF32(), 3);
  ExpectSameBits(Avx512GemmF64(), 4);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

// The check above can fail: a build whose sums run in another order (here: the baseline
// with a k-block split at a different depth, simulated by two half-k products added) does
// not give the same bits for some shape.
TEST(NnGemmTest, ADifferentSummationOrderIsCaught) {
  std::mt19937_64 rng(5);
  const int64_t m = 8, n = 16, k = 64;
  const std::vector<float> a = Random<float>(rng, m * k), b = Random<float>(rng, k * n);
  std::vector<float> whole(m * n, 0.0f), split(m * n, 0.0f);
  BaselineGemm<float>(m, n, k, {a.data(), k, false}, {b.data(), n, false}, whole.data(), n);
  BaselineGemm<float>(m, n, k / 2, {a.data(), k, false}, {b.data(), n, false}, split.data(), n);
  BaselineGemm<float>(m, n, k / 2, {a.data() + k / 2, k, false}, {b.data() + k / 2 * n, n, false},
                      split.data(), n);
  EXPECT_NE(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace sluice::ops::internal::nn
