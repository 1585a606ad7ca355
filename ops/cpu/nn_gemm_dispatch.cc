// FindWideGemm (nn_gemm_wide.h): the AVX-512 build where the cpu has AVX-512F, else the AVX2
// build where it has AVX2. SLUICE_GEMM=baseline, avx2 or avx512 in the environment narrows
// the choice (to compare the builds; a build the cpu lacks is never chosen).
#include <cstdlib>
#include <cstring>

#include "ops/cpu/nn_gemm_wide.h"
#include "ops/cpu/nn_gemm_wide_tables.h"

namespace sluice::ops::internal::nn {
namespace {

enum class Isa { kBaseline, kAvx2, kAvx512 };

Isa ChosenIsa() {
  static const Isa chosen = [] {
    const char* choice = std::getenv("SLUICE_GEMM");
    const bool any = choice == nullptr || *choice == '\0';
#if defined(__x86_64__) || defined(__i386__)
    if ((any || std::strcmp(choice, "avx512") == 0) && __builtin_cpu_supports("avx512f")) {
      return Isa::kAvx512;
    }
    if ((any || std::strcmp(choice, "avx2") == 0) && __builtin_cpu_supports("avx2")) {
      return Isa::kAvx2;
    }
#endif
    (void)any;
    return Isa::kBaseline;
  }();
  return chosen;
}

template <typename T>
const WideGemm<T>* Pick(const WideGemm<T>* avx2, const WideGemm<T>* avx512) {
  switch (ChosenIsa()) {
    case Isa::kAvx512:
      return avx512 != nullptr ? avx512 : avx2;
    case Isa::kAvx2:
      return avx2;
    case Isa::kBaseline:
      return nullptr;
  }
  return nullptr;
}

}  // namespace

template <>
const WideGemm<float>* FindWideGemm<float>() {
  static const WideGemm<float>* found = Pick(Avx2GemmF32(), Avx512GemmF32());
  return found;
}

template <>
const WideGemm<double>* FindWideGemm<double>() {
  static const WideGemm<double>* found = Pick(Avx2GemmF64(), Avx512GemmF64());
  return found;
}

}  // namespace sluice::ops::internal::nn
