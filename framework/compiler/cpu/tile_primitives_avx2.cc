// The tile primitives built for AVX2 (framework/CMakeLists.txt compiles this file with
// -mavx2 -ffp-contract=off on x86-64 and defines SLUICE_TILE_AVX2 for tile_primitives.cc).
// Elsewhere it builds to a function that finds nothing.
#include "framework/compiler/cpu/internal/tile_primitive_set.h"

namespace sluice::framework::compiler::cpu::internal {
namespace {
struct Avx2Set {};
}  // namespace

TilePrimitive FindAvx2TilePrimitive(ExprOp op, DataType dtype, DataType arg_dtype) {
#if defined(__AVX2__)
  return FindForSet<Avx2Set>(op, dtype, arg_dtype);
#else
  (void)op;
  (void)dtype;
  (void)arg_dtype;
  return nullptr;
#endif
}

}  // namespace sluice::framework::compiler::cpu::internal
