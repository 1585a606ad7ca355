// Tile primitives: the precompiled, vectorized loops the cpu back end's tile programs
// (tile_program.h) are made of — one per (ExprOp, dtype), each computing one node over one
// tile (up to a few thousand elements) from arguments in tile buffers or in the group's
// input tensors. The element functions are the uncompiled kernels' own
// (ops/cpu/elementwise_functions.h), applied in the same order, and this code is built
// without floating-point contraction, so a primitive rounds exactly as its op does
// unfused. Stateless; thread-safe.
#ifndef SLUICE_FRAMEWORK_COMPILER_CPU_TILE_PRIMITIVES_H_
#define SLUICE_FRAMEWORK_COMPILER_CPU_TILE_PRIMITIVES_H_

#include "core/data_type.h"
#include "framework/compiler/cpu/tile_arg.h"
#include "framework/compiler/subgraph.h"

namespace sluice::framework::compiler::cpu {

// TileArg and TilePrimitive, the primitives' calling convention: tile_arg.h.

// Which build of the primitives to use: the best this cpu runs (AVX2 where it has it and
// the AVX2 build exists), or the baseline build every x86-64 cpu runs (tests run both).
enum class TileInstructionSet { kBest, kBaseline };

// The primitive for `op` with result dtype `dtype` and argument dtype `arg_dtype` (equal
// but for kCast); null when there is none (not a floating dtype).
TilePrimitive FindTilePrimitive(ExprOp op, DataType dtype, DataType arg_dtype,
                                TileInstructionSet set = TileInstructionSet::kBest);

}  // namespace sluice::framework::compiler::cpu

#endif  // SLUICE_FRAMEWORK_COMPILER_CPU_TILE_PRIMITIVES_H_
