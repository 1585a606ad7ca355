// TileProgram: the cpu back end's compiled form of a subgraph (docs/design.md, "Subgraph
// compilation": why a tile program over precompiled primitives rather than a JIT). The
// domain, flattened, is cut into tiles of kTileElements, and each tile runs the whole
// expression — one primitive per node (tile_primitives.h) between tile buffers that stay in
// L1 — before its outputs are stored. Buffers are assigned by the buffer plan
// (buffer_plan.h). Inputs are read in place: one of the domain's shape (or one element) as
// it is; a broadcast one with stride 1 or 0 along the tile when the tile lies within one row
// of the collapsed domain (domain_indexing.h, as the cuda back end reads it: adjacent
// dimensions merged wherever every broadcast input stays contiguous across them), else
// gathered into a tile buffer of its own row by row — so short rows still run full tiles. Large
// domains are split by tiles across cores with oneTBB (not in ThreadSanitizer builds, where
// libtbb's synchronization is invisible to the checker).
//
// Outputs are stored only after every node of a tile is computed, so an output may be the
// same tensor as an input (an in-place update such as sgd's ParamOut = Param): each tile
// reads an element before any store to it.
//
// Immutable after Compile but for its pool of scratch; Run is thread-safe (each call, and
// each task of a split call, takes scratch of its own from the pool and gives it back).
#ifndef SLUICE_FRAMEWORK_COMPILER_CPU_TILE_PROGRAM_H_
#define SLUICE_FRAMEWORK_COMPILER_CPU_TILE_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/intra_op_pool.h"
#include "framework/compiler/buffer_plan.h"
#include "framework/compiler/cpu/tile_primitives.h"
#include "framework/compiler/subgraph.h"

namespace sluice::framework::compiler::cpu {

class TileProgram {
 public:
  TileProgram(TileProgram&&) noexcept;
  TileProgram& operator=(TileProgram&&) noexcept;
  ~TileProgram();

  // Elements per tile: a buffer of f32 is 4 KiB, of f64 8 KiB.
  static constexpr int64_t kTileElements = 1024;
  // Domains at least this large are split across cores.
  static constexpr int64_t kParallelElements = int64_t{1} << 16;
  // Outputs of at least this many bytes in all are written with non-temporal stores (they
  // would not stay in the cache anyway; the stores skip reading each line first).
  static constexpr int64_t kStreamStoreBytes = int64_t{4} << 20;

  // `graph` must be valid (Subgraph::Validate). Unimplemented naming the node when an op
  // has no primitive for its dtypes.
  static absl::StatusOr<TileProgram> Compile(const Subgraph& graph,
                                             TileInstructionSet set = TileInstructionSet::kBest);

  // Evaluates the whole domain: inputs[i] is input i's data (dense, of its shape), outputs[o]
  // output o's (dense, of the domain's shape). Any thread; blocks until done. Domains of at
  // least kParallelElements are split across `parallel`'s threads (the cpu device's intra-op
  // pool, through the kernel's context); Cancelled when the VM's cancel skipped tiles.
  absl::Status Run(absl::Span<const void* const> inputs, absl::Span<void* const> outputs,
                   const ParallelScope& parallel) const;
  // The same on the calling thread alone.
  void Run(absl::Span<const void* const> inputs, absl::Span<void* const> outputs) const {
    Run(inputs, outputs, ParallelScope()).IgnoreError();  // no pool, no cancel: never fails
  }

  const BufferPlan& buffers() const { return buffers_; }
  // Scratch one worker needs: a tile of kBufferElementBytes per element for each buffer of
  // the plan (the internal bytes: buffers().peak_buffers of them) and each gathered input.
  int64_t scratch_bytes() const {
    return (buffers_.num_buffers + gathered_inputs_) * kTileElements * kBufferElementBytes;
  }
  // Inputs that are neither of the domain's shape nor one element.
  int gathered_inputs() const { return gathered_inputs_; }
  int64_t rows() const { return rows_; }
  int64_t row_elements() const { return inner_; }

 private:
  struct Step {
    TilePrimitive fn = nullptr;
    int arity = 0;
    int args[3] = {-1, -1, -1};  // value ids
    int out = -1;                // buffer
    double params[2] = {0, 0};
  };
  struct InputLayout {
    enum class Kind { kDense, kScalar, kBroadcast };
    Kind kind = Kind::kDense;
    int64_t element_bytes = 4;
    int64_t inner_stride = 1;            // kBroadcast: 0 or 1
    std::vector<int64_t> outer_strides;  // kBroadcast: per collapsed outer dimension
    int gather = -1;                     // kBroadcast: its gather buffer (after the plan's)
  };
  struct OutputSlot {
    int buffer = -1;
    int64_t element_bytes = 4;
  };

  TileProgram();

  // Runs tiles [begin, end) with `scratch` (scratch_bytes(), 64-byte aligned).
  void RunTiles(int64_t begin, int64_t end, char* scratch, absl::Span<const void* const> inputs,
                absl::Span<void* const> outputs) const;
  // Offset (in elements) of row `row`'s first element in an input of `layout`.
  int64_t RowOffset(const InputLayout& layout, int64_t row) const;
  // A broadcast input's elements [start, start + n) of the flattened domain, as an argument:
  // in place when they lie within one row, else gathered into `buffer`.
  TileArg BroadcastArg(const InputLayout& layout, const char* data, int64_t start, int64_t n,
                       char* buffer) const;

  int num_inputs_ = 0;
  std::vector<Step> steps_;
  std::vector<InputLayout> inputs_;
  std::vector<OutputSlot> outputs_;
  std::vector<int64_t> outer_dims_;  // collapsed, outermost first
  int64_t inner_ = 1;                // elements per row
  int64_t rows_ = 1;
  int64_t elements_ = 0;
  int64_t tiles_ = 0;
  int gathered_inputs_ = 0;
  bool stream_stores_ = false;
  class ScratchPool;
  std::unique_ptr<ScratchPool> scratch_;  // scratch_bytes() each, reused across runs
  BufferPlan buffers_;
};

}  // namespace sluice::framework::compiler::cpu

#endif  // SLUICE_FRAMEWORK_COMPILER_CPU_TILE_PROGRAM_H_
