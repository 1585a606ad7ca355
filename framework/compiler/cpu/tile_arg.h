// TileArg and TilePrimitive: the calling convention of the cpu back end's tile primitives
// (tile_primitives.h) — what one primitive is called with over one tile. Apart from
// tile_primitives.h so that the primitives' templates (internal/tile_primitive_set.h),
// which tile_primitives.cc instantiates, need only the convention.
//
// Plain values and a function pointer type; no state. Thread-safe.
#ifndef SLUICE_FRAMEWORK_COMPILER_CPU_TILE_ARG_H_
#define SLUICE_FRAMEWORK_COMPILER_CPU_TILE_ARG_H_

#include <cstdint>

namespace sluice::framework::compiler::cpu {

// One argument over a tile: element i is data[i * stride]; stride is 1 (a buffer, or an
// input contiguous along the tile) or 0 (an input broadcast along it).
struct TileArg {
  const void* data = nullptr;
  int64_t stride = 1;
};

// Computes out[0..n) (contiguous, the node's dtype) from args[0..arity). `params`: the
// node's two constants. `out` may not alias an argument.
using TilePrimitive = void (*)(const TileArg* args, void* out, int64_t n, const double* params);

}  // namespace sluice::framework::compiler::cpu

#endif  // SLUICE_FRAMEWORK_COMPILER_CPU_TILE_ARG_H_
