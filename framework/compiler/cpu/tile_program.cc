#include "framework/compiler/cpu/tile_program.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/compiler/domain_indexing.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sluice::framework::compiler::cpu {
// Outside the anonymous namespace: TileProgram::ScratchPool, a member of a class with
// linkage, holds them (gcc's -Wsubobject-linkage in a unity build).
namespace tile_program_internal {
struct AlignedDelete {
  void operator()(char* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using Scratch = std::unique_ptr<char[], AlignedDelete>;
}  // namespace tile_program_internal
using tile_program_internal::Scratch;

namespace {

// memcpy with non-temporal stores where `to` is 16-byte aligned: a large output is written
// once and not read again by this kernel, so bypassing the cache saves reading each line
// before it is written (a third of the memory traffic of x -> y). Callers fence (StoreFence)
// before the outputs are used.
void StreamCopy(char* to, const char* from, int64_t bytes) {
#if defined(__SSE2__)
  int64_t done = 0;
  const int64_t head = (16 - static_cast<int64_t>(reinterpret_cast<uintptr_t>(to) & 15)) & 15;
  if (head > 0) {
    std::memcpy(to, from, static_cast<size_t>(std::min(head, bytes)));
    done = std::min(head, bytes);
  }
  for (; done + 64 <= bytes; done += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + done));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + done + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + done + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + done + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + done), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + done + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + done + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + done + 48), d);
  }
  if (done < bytes) std::memcpy(to + done, from + done, static_cast<size_t>(bytes - done));
#else
  std::memcpy(to, from, static_cast<size_t>(bytes));
#endif
}

// Orders this thread's non-temporal stores before what follows (the task's completion).
void StoreFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace

// Scratch blocks of one size, reused: a run takes one per task and gives it back. Thread-safe.
class TileProgram::ScratchPool {
 public:
  explicit ScratchPool(int64_t bytes) : bytes_(bytes) {}
  Scratch Take() {
    {
      absl::MutexLock lock(&mu_);
      if (!free_.empty()) {
        Scratch scratch = std::move(free_.back());
        free_.pop_back();
        return scratch;
      }
    }
    return Scratch(static_cast<char*>(::operator new[](
        static_cast<size_t>(std::max<int64_t>(bytes_, 64)), std::align_val_t{64})));
  }
  void Give(Scratch scratch) {
    absl::MutexLock lock(&mu_);
    free_.push_back(std::move(scratch));
  }

 private:
  const int64_t bytes_;
  absl::Mutex mu_;
  std::vector<Scratch> free_ ABSL_GUARDED_BY(mu_);  // at most one per concurrent task
};

TileProgram::TileProgram() = default;
TileProgram::TileProgram(TileProgram&&) noexcept = default;
TileProgram& TileProgram::operator=(TileProgram&&) noexcept = default;
TileProgram::~TileProgram() = default;

absl::StatusOr<TileProgram> TileProgram::Compile(const Subgraph& g, TileInstructionSet set) {
  TileProgram p;
  p.num_inputs_ = static_cast<int>(g.inputs.size());
  p.buffers_ = PlanBuffers(g);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const ExprNode& node = g.nodes[k];
    Step step;
    step.arity = ExprOpArity(node.op);
    const DataType arg_dtype = g.dtype_of(node.args[0]);
    step.fn = FindTilePrimitive(node.op, node.dtype, arg_dtype, set);
    if (step.fn == nullptr) {
      return absl::UnimplementedError(absl::StrCat("subgraph node ", k, " (", ExprOpName(node.op),
                                                   " ", DataTypeName(node.dtype), " of ",
                                                   DataTypeName(arg_dtype), "): no cpu primitive"));
    }
    for (int a = 0; a < 3; ++a) step.args[a] = node.args[a];
    step.out = p.buffers_.buffer_of[static_cast<size_t>(p.num_inputs_) + k];
    step.params[0] = node.params[0];
    step.params[1] = node.params[1];
    p.steps_.push_back(step);
  }
  for (int o : g.outputs) {
    p.outputs_.push_back({p.buffers_.buffer_of[static_cast<size_t>(o)],
                          static_cast<int64_t>(SizeOf(g.dtype_of(o)))});
  }

  // Where each input is read (domain_indexing.h, shared with the cuda back end): in place
  // (one element, or the domain's), or through the collapsed domain's rows.
  const DomainIndexing indexing = MakeDomainIndexing(g);
  p.elements_ = g.domain.NumElements();
  if (indexing.dims.empty()) {  // nothing broadcast: one row
    p.inner_ = std::max<int64_t>(p.elements_, 1);
  } else {
    p.inner_ = indexing.dims.back();
    p.outer_dims_.assign(indexing.dims.begin(), indexing.dims.end() - 1);
  }
  p.rows_ = 1;
  for (int64_t d : p.outer_dims_) p.rows_ *= d;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    InputLayout layout;
    layout.element_bytes = static_cast<int64_t>(SizeOf(g.inputs[i].dtype));
    switch (indexing.access[i]) {
      case DomainIndexing::Access::kFlat:
        layout.kind = InputLayout::Kind::kDense;
        break;
      case DomainIndexing::Access::kScalar:
        layout.kind = InputLayout::Kind::kScalar;
        break;
      case DomainIndexing::Access::kStrided: {
        const std::vector<int64_t>& strides = indexing.strides[i];
        layout.kind = InputLayout::Kind::kBroadcast;
        layout.inner_stride = strides.back();  // 0 or 1: the innermost non-broadcast stride
        layout.outer_strides.assign(strides.begin(), strides.end() - 1);
        layout.gather = p.buffers_.num_buffers + p.gathered_inputs_++;
        break;
      }
    }
    p.inputs_.push_back(std::move(layout));
  }
  p.tiles_ = (p.elements_ + kTileElements - 1) / kTileElements;
  int64_t output_bytes = 0;
  for (const OutputSlot& slot : p.outputs_) output_bytes += p.elements_ * slot.element_bytes;
  p.stream_stores_ = output_bytes >= kStreamStoreBytes;
  p.scratch_ = std::make_unique<ScratchPool>(p.scratch_bytes());
  return p;
}

int64_t TileProgram::RowOffset(const InputLayout& layout, int64_t row) const {
  int64_t offset = 0;
  for (size_t d = outer_dims_.size(); d-- > 0;) {
    offset += (row % outer_dims_[d]) * layout.outer_strides[d];
    row /= outer_dims_[d];
  }
  return offset;
}

TileArg TileProgram::BroadcastArg(const InputLayout& layout, const char* data, int64_t start,
                                  int64_t n, char* buffer) const {
  const int64_t bytes = layout.element_bytes;
  int64_t row = start / inner_;
  int64_t col = start % inner_;
  if (col + n <= inner_) {  // within one row: read in place
    return {data + (RowOffset(layout, row) + col * layout.inner_stride) * bytes,
            layout.inner_stride};
  }
  for (int64_t done = 0; done < n; ++row, col = 0) {
    const int64_t segment = std::min(inner_ - col, n - done);
    const char* from = data + (RowOffset(layout, row) + col * layout.inner_stride) * bytes;
    char* to = buffer + done * bytes;
    if (layout.inner_stride == 1) {
      std::memcpy(to, from, static_cast<size_t>(segment * bytes));
    } else {
      // Stride 0, one value repeated (a bias [C, 1, 1] over an image): copied once, then the
      // copies doubled, log2(segment) memcpys instead of one per element.
      std::memcpy(to, from, static_cast<size_t>(bytes));
      for (int64_t filled = 1; filled < segment;) {
        const int64_t more = std::min(filled, segment - filled);
        std::memcpy(to + filled * bytes, to, static_cast<size_t>(more * bytes));
        filled += more;
      }
    }
    done += segment;
  }
  return {buffer, 1};
}

void TileProgram::RunTiles(int64_t begin, int64_t end, char* scratch,
                           absl::Span<const void* const> inputs,
                           absl::Span<void* const> outputs) const {
  constexpr int64_t kBufferBytes = kTileElements * kBufferElementBytes;
  const size_t n_in = inputs_.size();
  TileArg value_arg[64];  // per input the tile's argument; larger groups use the vector
  std::vector<TileArg> more;
  TileArg* in_args = value_arg;
  if (n_in > 64) {
    more.resize(n_in);
    in_args = more.data();
  }
  for (int64_t t = begin; t < end; ++t) {
    const int64_t start = t * kTileElements;
    const int64_t n = std::min(kTileElements, elements_ - start);
    for (size_t i = 0; i < n_in; ++i) {
      const InputLayout& in = inputs_[i];
      const char* data = static_cast<const char*>(inputs[i]);
      switch (in.kind) {
        case InputLayout::Kind::kDense:
          in_args[i] = {data + start * in.element_bytes, 1};
          break;
        case InputLayout::Kind::kScalar:
          in_args[i] = {data, 0};
          break;
        case InputLayout::Kind::kBroadcast:
          in_args[i] = BroadcastArg(in, data, start, n, scratch + in.gather * kBufferBytes);
          break;
      }
    }
    for (const Step& step : steps_) {
      TileArg args[3];
      for (int a = 0; a < step.arity; ++a) {
        const int v = step.args[a];
        args[a] =
            v < num_inputs_
                ? in_args[v]
                : TileArg{scratch + buffers_.buffer_of[static_cast<size_t>(v)] * kBufferBytes, 1};
      }
      step.fn(args, scratch + step.out * kBufferBytes, n, step.params);
    }
    for (size_t o = 0; o < outputs_.size(); ++o) {
      const OutputSlot& slot = outputs_[o];
      char* to = static_cast<char*>(outputs[o]) + start * slot.element_bytes;
      const char* from = scratch + slot.buffer * kBufferBytes;
      if (stream_stores_) {
        StreamCopy(to, from, n * slot.element_bytes);
      } else {
        std::memcpy(to, from, static_cast<size_t>(n * slot.element_bytes));
      }
    }
  }
  if (stream_stores_) StoreFence();
}

absl::Status TileProgram::Run(absl::Span<const void* const> inputs, absl::Span<void* const> outputs,
                              const ParallelScope& parallel) const {
  if (tiles_ == 0) return absl::OkStatus();
  auto run = [&](int64_t begin, int64_t end) {
    Scratch scratch = scratch_->Take();
    RunTiles(begin, end, scratch.get(), inputs, outputs);
    scratch_->Give(std::move(scratch));
  };
  if (elements_ < kParallelElements || tiles_ < 2 || parallel.pool() == nullptr) {
    run(0, tiles_);
    return absl::OkStatus();
  }
  // Enough tiles per chunk that a chunk's start-up is noise.
  const int64_t grain = std::max<int64_t>(1, (kParallelElements / 4) / kTileElements);
  return parallel.For(tiles_, grain, run, "compiled subgraph");
}

}  // namespace sluice::framework::compiler::cpu
