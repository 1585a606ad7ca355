#include "framework/compiler/cpu/tile_program.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "absl/strings/str_cat.h"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"

namespace sluice::framework::compiler::cpu {
namespace {

// Strides (in elements) of a dense tensor of `shape` over the `domain`'s dimensions:
// right-aligned, 0 where the tensor has size 1 or no dimension (broadcast).
std::vector<int64_t> DomainStrides(const Shape& shape, const Shape& domain) {
  std::vector<int64_t> strides(static_cast<size_t>(domain.rank()), 0);
  int64_t stride = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    const int d = i + domain.rank() - shape.rank();
    if (shape.dim(i) != 1) strides[static_cast<size_t>(d)] = stride;
    stride *= shape.dim(i);
  }
  return strides;
}

struct AlignedDelete {
  void operator()(char* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using Scratch = std::unique_ptr<char[], AlignedDelete>;
Scratch NewScratch(int64_t bytes) {
  return Scratch(static_cast<char*>(
      ::operator new[](static_cast<size_t>(std::max<int64_t>(bytes, 64)), std::align_val_t{64})));
}

}  // namespace

absl::StatusOr<TileProgram> TileProgram::Compile(const Subgraph& g) {
  TileProgram p;
  p.num_inputs_ = static_cast<int>(g.inputs.size());
  p.buffers_ = PlanBuffers(g);
  p.buffer_of_ = p.buffers_.buffer_of;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const ExprNode& node = g.nodes[k];
    Step step;
    step.arity = ExprOpArity(node.op);
    const DataType arg_dtype = g.dtype_of(node.args[0]);
    step.fn = FindTilePrimitive(node.op, node.dtype, arg_dtype);
    if (step.fn == nullptr) {
      return absl::UnimplementedError(absl::StrCat("subgraph node ", k, " (", ExprOpName(node.op),
                                                   " ", DataTypeName(node.dtype), " of ",
                                                   DataTypeName(arg_dtype), "): no cpu primitive"));
    }
    for (int a = 0; a < 3; ++a) step.args[a] = node.args[a];
    step.out = p.buffer_of_[static_cast<size_t>(p.num_inputs_) + k];
    step.params[0] = node.params[0];
    step.params[1] = node.params[1];
    p.steps_.push_back(step);
  }
  for (int o : g.outputs) {
    p.outputs_.push_back(
        {p.buffer_of_[static_cast<size_t>(o)], static_cast<int64_t>(SizeOf(g.dtype_of(o)))});
  }

  // Collapse the domain: drop size-1 dimensions, then merge a dimension into the next inner
  // one wherever every input (and the dense output) stays contiguous across the two.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(g.inputs.size());
  std::vector<std::vector<int64_t>> full(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) full[i] = DomainStrides(g.inputs[i].shape, g.domain);
  for (int d = 0; d < g.domain.rank(); ++d) {
    const int64_t size = g.domain.dim(d);
    if (size == 1) continue;
    bool merge = !dims.empty();
    for (size_t i = 0; merge && i < g.inputs.size(); ++i) {
      merge = strides[i].back() == full[i][static_cast<size_t>(d)] * size;
    }
    if (merge) {
      dims.back() *= size;
      for (size_t i = 0; i < g.inputs.size(); ++i)
        strides[i].back() = full[i][static_cast<size_t>(d)];
    } else {
      dims.push_back(size);
      for (size_t i = 0; i < g.inputs.size(); ++i)
        strides[i].push_back(full[i][static_cast<size_t>(d)]);
    }
  }
  if (dims.empty()) {  // a domain of one element
    dims.push_back(1);
    for (auto& s : strides) s.push_back(0);
  }
  p.inner_ = dims.back();
  p.outer_dims_.assign(dims.begin(), dims.end() - 1);
  p.rows_ = 1;
  for (int64_t d : p.outer_dims_) p.rows_ *= d;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    InputLayout layout;
    layout.element_bytes = static_cast<int64_t>(SizeOf(g.inputs[i].dtype));
    layout.inner_stride = strides[i].back();  // 0 or 1: the innermost non-broadcast stride
    layout.outer_strides.assign(strides[i].begin(), strides[i].end() - 1);
    p.inputs_.push_back(std::move(layout));
  }
  p.chunks_per_row_ = p.inner_ == 0 ? 0 : (p.inner_ + kTileElements - 1) / kTileElements;
  p.tiles_ = p.rows_ * p.chunks_per_row_;
  return p;
}

void TileProgram::RunTiles(int64_t begin, int64_t end, char* scratch,
                           absl::Span<const void* const> inputs,
                           absl::Span<void* const> outputs) const {
  constexpr int64_t kBufferBytes = kTileElements * kBufferElementBytes;
  const size_t n_in = inputs_.size();
  std::vector<const char*> base(n_in);
  TileArg value_arg[64];  // per input the tile's argument; larger groups use the vector
  std::vector<TileArg> more;
  TileArg* in_args = value_arg;
  if (n_in > 64) {
    more.resize(n_in);
    in_args = more.data();
  }
  for (int64_t t = begin; t < end; ++t) {
    const int64_t row = t / chunks_per_row_;
    const int64_t start = (t % chunks_per_row_) * kTileElements;
    const int64_t n = std::min(kTileElements, inner_ - start);
    // Each input's first element of the tile: the row's multi-index times its strides.
    for (size_t i = 0; i < n_in; ++i) {
      const InputLayout& in = inputs_[i];
      int64_t offset = start * in.inner_stride;
      int64_t rest = row;
      for (size_t d = outer_dims_.size(); d-- > 0;) {
        offset += (rest % outer_dims_[d]) * in.outer_strides[d];
        rest /= outer_dims_[d];
      }
      in_args[i] = {static_cast<const char*>(inputs[i]) + offset * in.element_bytes,
                    in.inner_stride};
    }
    for (const Step& step : steps_) {
      TileArg args[3];
      for (int a = 0; a < step.arity; ++a) {
        const int v = step.args[a];
        args[a] = v < num_inputs_
                      ? in_args[v]
                      : TileArg{scratch + buffer_of_[static_cast<size_t>(v)] * kBufferBytes, 1};
      }
      step.fn(args, scratch + step.out * kBufferBytes, n, step.params);
    }
    const int64_t out_offset = row * inner_ + start;
    for (size_t o = 0; o < outputs_.size(); ++o) {
      const OutputSlot& slot = outputs_[o];
      std::memcpy(static_cast<char*>(outputs[o]) + out_offset * slot.element_bytes,
                  scratch + slot.buffer * kBufferBytes,
                  static_cast<size_t>(n * slot.element_bytes));
    }
  }
}

void TileProgram::Run(absl::Span<const void* const> inputs, absl::Span<void* const> outputs) const {
  if (tiles_ == 0) return;
  const int64_t elements = rows_ * inner_;
  if (elements < kParallelElements || tiles_ < 2) {
    Scratch scratch = NewScratch(scratch_bytes());
    RunTiles(0, tiles_, scratch.get(), inputs, outputs);
    return;
  }
  // Enough tiles per task that a task's scratch and start-up are noise.
  const int64_t grain =
      std::max<int64_t>(1, (kParallelElements / 4) / std::min(inner_, kTileElements));
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, tiles_, static_cast<size_t>(grain)),
                    [&](const tbb::blocked_range<int64_t>& range) {
                      Scratch scratch = NewScratch(scratch_bytes());
                      RunTiles(range.begin(), range.end(), scratch.get(), inputs, outputs);
                    });
}

}  // namespace sluice::framework::compiler::cpu
