#include "framework/compiler/cpu/tile_primitives.h"

#include "framework/compiler/cpu/internal/tile_primitive_set.h"

namespace sluice::framework::compiler::cpu {
namespace {

struct BaselineSet {};

// True when this cpu runs AVX2 and the AVX2 primitives were built. Immutable once set.
bool UseAvx2() {
#if defined(__x86_64__) && defined(SLUICE_TILE_AVX2)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#else
  return false;
#endif
}

}  // namespace

TilePrimitive FindTilePrimitive(ExprOp op, DataType dtype, DataType arg_dtype,
                                TileInstructionSet set) {
  if (set == TileInstructionSet::kBest && UseAvx2()) {
    return internal::FindAvx2TilePrimitive(op, dtype, arg_dtype);
  }
  return internal::FindForSet<BaselineSet>(op, dtype, arg_dtype);
}

}  // namespace sluice::framework::compiler::cpu
