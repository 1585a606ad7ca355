// TileProgram against a scalar reference: every domain element evaluated on its own, inputs
// read at their numpy-broadcast offsets (computed here, not with the program's strides), each
// node applying the element functions of the uncompiled ops. Results are compared bit for bit
// (two NaNs count as equal: their payloads depend on operand order). Covers f32 and f64,
// broadcast inputs, domains of several tiles and large enough to run in parallel, empty and
// rank-0 domains, several outputs, an output stored over an input (in place), and outputs
// large enough for non-temporal stores, at every alignment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "framework/compiler/cpu/tile_program.h"
#include "ops/cpu/elementwise_functions.h"

namespace sluice::framework::compiler::cpu::compiler_tile_program_test {
namespace {

namespace ew = ::sluice::ops::internal::elementwise;

// A dense tensor of f32 or f64.
struct Tensor {
  DataType dtype = DataType::kF32;
  Shape shape;
  std::vector<unsigned char> bytes;

  Tensor() = default;
  Tensor(DataType t, Shape s)
      : dtype(t),
        shape(std::move(s)),
        bytes(static_cast<size_t>(shape.NumElements()) * SizeOf(t) + 1) {}  // never empty
  template <typename T>
  T Get(int64_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return v;
  }
  template <typename T>
  void Set(int64_t i, T v) {
    std::memcpy(bytes.data() + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
  }
  double GetDouble(int64_t i) const {
    return dtype == DataType::kF32 ? static_cast<double>(Get<float>(i)) : Get<double>(i);
  }
  int64_t size() const { return shape.NumElements(); }
};

// The offset in a dense tensor of `shape` of the domain element at `index` (numpy: shapes
// right-aligned, size-1 dimensions repeat).
int64_t BroadcastOffset(const Shape& shape, const std::vector<int64_t>& index) {
  const int shift = static_cast<int>(index.size()) - shape.rank();
  int64_t offset = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    const int64_t coord = shape.dim(d) == 1 ? 0 : index[static_cast<size_t>(d + shift)];
    offset = offset * shape.dim(d) + coord;
  }
  return offset;
}

template <typename T>
T Apply(const ExprNode& n, T a, T b, T c) {
  switch (n.op) {
    case ExprOp::kAdd:
      return ew::AddFn()(a, b);
    case ExprOp::kSub:
      return ew::SubFn()(a, b);
    case ExprOp::kMul:
      return ew::MulFn()(a, b);
    case ExprOp::kDiv:
      return ew::DivFn()(a, b);
    case ExprOp::kMax:
      return ew::MaxFn()(a, b);
    case ExprOp::kMin:
      return ew::MinFn()(a, b);
    case ExprOp::kRelu:
      return ew::ReluFn()(a);
    case ExprOp::kSigmoid:
      return ew::SigmoidFn()(a);
    case ExprOp::kTanh:
      return ew::TanhFn()(a);
    case ExprOp::kExp:
      return ew::ExpFn()(a);
    case ExprOp::kLog:
      return ew::LogFn()(a);
    case ExprOp::kSqrt:
      return std::sqrt(a);
    case ExprOp::kSquare:
      return ew::SquareFn()(a);
    case ExprOp::kNeg:
      return -a;
    case ExprOp::kCopy:
      return a;
    case ExprOp::kScale:
      return static_cast<T>(n.params[0]) * a + static_cast<T>(n.params[1]);
    case ExprOp::kCast:
      return a;  // Evaluate converts
    case ExprOp::kReluGrad:
      return ew::ReluGradFn()(a, b);
    case ExprOp::kSigmoidGrad:
      return ew::SigmoidGradFn()(a, b);
    case ExprOp::kTanhGrad:
      return ew::TanhGradFn()(a, b);
    case ExprOp::kExpGrad:
      return ew::ExpGradFn()(a, b);
    case ExprOp::kLogGrad:
      return ew::LogGradFn()(a, b);
    case ExprOp::kSqrtGrad:
      return ew::SqrtGradFn()(a, b);
    case ExprOp::kSquareGrad:
      return ew::SquareGradFn()(a, b);
    case ExprOp::kDivGradY:
      return ew::GradDivY()(a, b, c);
    case ExprOp::kMaxGradX:
      return ew::GradMaxX()(a, b, c);
    case ExprOp::kMaxGradY:
      return ew::GradMaxY()(a, b, c);
    case ExprOp::kMinGradX:
      return ew::GradMinX()(a, b, c);
    case ExprOp::kMinGradY:
      return ew::GradMinY()(a, b, c);
    case ExprOp::kSgd:
      return a - c * b;  // p - lr * g
  }
  ADD_FAILURE() << "unknown op";
  return a;
}

// The reference: one tensor of the domain's shape per output.
std::vector<Tensor> Reference(const Subgraph& g, const std::vector<Tensor>& inputs) {
  const int n_in = static_cast<int>(g.inputs.size());
  const int64_t size = g.domain.NumElements();
  std::vector<Tensor> values(static_cast<size_t>(g.num_values()));
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    values[static_cast<size_t>(n_in) + k] = Tensor(g.nodes[k].dtype, g.domain);
  }
  std::vector<int64_t> index(static_cast<size_t>(g.domain.rank()));
  for (int64_t i = 0; i < size; ++i) {
    int64_t rest = i;
    for (int d = g.domain.rank() - 1; d >= 0; --d) {
      index[static_cast<size_t>(d)] = rest % g.domain.dim(d);
      rest /= g.domain.dim(d);
    }
    auto offset_of = [&](int v) {
      return v < n_in ? BroadcastOffset(g.inputs[static_cast<size_t>(v)].shape, index) : i;
    };
    auto tensor_of = [&](int v) -> const Tensor& {
      return v < n_in ? inputs[static_cast<size_t>(v)] : values[static_cast<size_t>(v)];
    };
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const ExprNode& n = g.nodes[k];
      Tensor& out = values[static_cast<size_t>(n_in) + k];
      const int arity = ExprOpArity(n.op);
      if (n.op == ExprOp::kCast) {
        const Tensor& x = tensor_of(n.args[0]);
        const int64_t at = offset_of(n.args[0]);
        if (n.dtype == DataType::kF32) {
          out.Set<float>(i, x.dtype == DataType::kF32 ? x.Get<float>(at)
                                                      : static_cast<float>(x.Get<double>(at)));
        } else {
          out.Set<double>(i, x.dtype == DataType::kF64 ? x.Get<double>(at)
                                                       : static_cast<double>(x.Get<float>(at)));
        }
        continue;
      }
      if (n.dtype == DataType::kF32) {
        float a[3] = {0, 0, 0};
        for (int j = 0; j < arity; ++j)
          a[j] = tensor_of(n.args[j]).Get<float>(offset_of(n.args[j]));
        out.Set<float>(i, Apply<float>(n, a[0], a[1], a[2]));
      } else {
        double a[3] = {0, 0, 0};
        for (int j = 0; j < arity; ++j) {
          a[j] = tensor_of(n.args[j]).Get<double>(offset_of(n.args[j]));
        }
        out.Set<double>(i, Apply<double>(n, a[0], a[1], a[2]));
      }
    }
  }
  std::vector<Tensor> outputs;
  for (int o : g.outputs) outputs.push_back(values[static_cast<size_t>(o)]);
  return outputs;
}

// Bitwise equality where any two NaNs are equal. Returns the first differing element or -1.
int64_t FirstDifference(const Tensor& want, const Tensor& got) {
  for (int64_t i = 0; i < want.size(); ++i) {
    const size_t bytes = SizeOf(want.dtype);
    if (std::memcmp(want.bytes.data() + static_cast<size_t>(i) * bytes,
                    got.bytes.data() + static_cast<size_t>(i) * bytes, bytes) == 0) {
      continue;
    }
    if (std::isnan(want.GetDouble(i)) && std::isnan(got.GetDouble(i))) continue;
    return i;
  }
  return -1;
}

// Input values of every kind: ordinary, zeros of both signs, huge, tiny and subnormal,
// infinities and NaN.
double Sample(std::mt19937& rng) {
  const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
  std::normal_distribution<double> normal(0.0, 2.0);
  if (kind < 3) return 0.0;
  if (kind < 5) return -0.0;
  if (kind < 6) return std::numeric_limits<double>::infinity();
  if (kind < 7) return -std::numeric_limits<double>::infinity();
  if (kind < 8) return std::numeric_limits<double>::quiet_NaN();
  if (kind < 10) return (kind == 8 ? 1 : -1) * 3e30 * std::fabs(normal(rng));
  if (kind < 11) return 1e300;
  if (kind < 13) return 1e-40 * normal(rng);                             // subnormal in f32
  if (kind < 14) return 1e-310 * normal(rng);                            // subnormal in f64
  if (kind < 20) return std::uniform_int_distribution<int>(-3, 3)(rng);  // exact ties
  if (kind < 25) return 100 * normal(rng);
  return normal(rng);
}

Tensor RandomTensor(std::mt19937& rng, DataType dtype, const Shape& shape) {
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.size(); ++i) {
    const double v = Sample(rng);
    if (dtype == DataType::kF32) {
      t.Set<float>(i, static_cast<float>(v));
    } else {
      t.Set<double>(i, v);
    }
  }
  return t;
}

void ExpectSetMatchesReference(const Subgraph& g, const std::vector<Tensor>& inputs,
                               const std::string& where, TileInstructionSet set);

// Compiles and runs `g` on `inputs` (outputs in fresh tensors filled with a pattern), and
// compares with the reference: with the best primitives this cpu runs, and with the
// baseline ones.
void ExpectMatchesReference(const Subgraph& g, const std::vector<Tensor>& inputs,
                            const std::string& where) {
  for (TileInstructionSet set : {TileInstructionSet::kBest, TileInstructionSet::kBaseline}) {
    ExpectSetMatchesReference(g, inputs, where, set);
  }
}

// ExpectMatchesReference with one build of the primitives.
void ExpectSetMatchesReference(const Subgraph& g, const std::vector<Tensor>& inputs,
                               const std::string& where, TileInstructionSet set) {
  SCOPED_TRACE(where + (set == TileInstructionSet::kBaseline ? " (baseline)" : " (best)") + ": " +
               g.ToText());
  ASSERT_TRUE(g.Validate().ok()) << g.Validate();
  absl::StatusOr<TileProgram> program = TileProgram::Compile(g, set);
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<Tensor> outputs;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (const Tensor& t : inputs) in_ptrs.push_back(t.bytes.data());
  for (int o : g.outputs) {
    outputs.emplace_back(g.dtype_of(o), g.domain);
    std::fill(outputs.back().bytes.begin(), outputs.back().bytes.end(), 0xA5);
  }
  for (Tensor& t : outputs) out_ptrs.push_back(t.bytes.data());
  program->Run(in_ptrs, out_ptrs);
  const std::vector<Tensor> want = Reference(g, inputs);
  for (size_t o = 0; o < outputs.size(); ++o) {
    const int64_t at = FirstDifference(want[o], outputs[o]);
    EXPECT_EQ(at, -1) << "output " << o << " element " << at << ": want "
                      << (at >= 0 ? want[o].GetDouble(at) : 0) << ", got "
                      << (at >= 0 ? outputs[o].GetDouble(at) : 0);
  }
}

std::vector<Tensor> RandomInputs(std::mt19937& rng, const Subgraph& g) {
  std::vector<Tensor> inputs;
  for (const SubgraphInput& in : g.inputs) inputs.push_back(RandomTensor(rng, in.dtype, in.shape));
  return inputs;
}

// A shape that broadcasts into `domain`: a suffix of its dims, each kept or made 1.
Shape RandomBroadcast(std::mt19937& rng, const Shape& domain) {
  auto uniform = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  if (uniform(3) == 0) return domain;
  const int rank = uniform(domain.rank() + 1);
  std::vector<int64_t> dims;
  for (int d = domain.rank() - rank; d < domain.rank(); ++d) {
    dims.push_back(uniform(3) == 0 ? 1 : domain.dim(d));
  }
  return Shape(absl::MakeConstSpan(dims));
}

// A random valid subgraph over `domain`: 1..5 inputs of broadcast shapes, 1..25 nodes of any
// op (f32 and f64, casts between them), 1..3 distinct outputs.
Subgraph RandomGraph(std::mt19937& rng, const Shape& domain) {
  auto uniform = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  Subgraph g;
  g.domain = domain;
  const int n_in = 1 + uniform(5);
  for (int i = 0; i < n_in; ++i) {
    g.inputs.push_back(
        {uniform(3) == 0 ? DataType::kF64 : DataType::kF32, RandomBroadcast(rng, domain)});
  }
  const int n_nodes = 1 + uniform(25);
  for (int k = 0; k < n_nodes; ++k) {
    const int values = g.num_values();
    auto pick = [&]() {
      return uniform(2) == 0 ? std::max(0, values - 1 - uniform(3)) : uniform(values);
    };
    ExprNode n;
    n.op = static_cast<ExprOp>(uniform(kNumExprOps));
    const int first = pick();
    n.args[0] = first;
    n.dtype = g.dtype_of(first);
    if (n.op == ExprOp::kCast) {
      n.dtype = uniform(2) == 0 ? DataType::kF32 : DataType::kF64;
    } else {
      for (int a = 1; a < ExprOpArity(n.op); ++a) {
        int v = pick();
        for (int tries = 0; tries < 8 && g.dtype_of(v) != n.dtype; ++tries) v = pick();
        n.args[a] = g.dtype_of(v) == n.dtype ? v : first;
      }
    }
    if (n.op == ExprOp::kScale) {
      const double scales[] = {2.0, -0.5, 0.1, 1e-300, 3e38, -0.0};
      n.params[0] = scales[uniform(6)];
      n.params[1] = scales[uniform(6)];
    }
    g.nodes.push_back(n);
  }
  const int n_out = 1 + uniform(std::min(3, n_nodes));
  if (uniform(2) == 0) g.outputs.push_back(g.num_values() - 1);
  while (static_cast<int>(g.outputs.size()) < n_out) {
    const int v = n_in + uniform(n_nodes);
    if (std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end()) g.outputs.push_back(v);
  }
  return g;
}

TEST(TileProgramTest, RandomSubgraphsMatchReference) {
  const std::vector<Shape> domains = {{},        {1},    {7},          {3, 5, 7},
                                      {2, 1, 3}, {1500}, {3, 1100},    {4, 1, 1, 5},
                                      {2, 2050}, {1, 1}, {5, 1, 1030}, {2, 3, 4, 5}};
  for (int seed = 0; seed < 400; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    const Shape& domain = domains[static_cast<size_t>(seed) % domains.size()];
    const Subgraph g = RandomGraph(rng, domain);
    ExpectMatchesReference(g, RandomInputs(rng, g), "seed " + std::to_string(seed));
    if (HasFailure()) return;
  }
}

// Domain [3, 5, 7] with inputs [7], [5, 1], [3, 1, 7], [1], [], [3, 5, 7], [5, 7]: every
// binary op, the ternary ones, scale, and several outputs, in f32 and f64.
TEST(TileProgramTest, BroadcastInputsMatchReference) {
  for (const DataType dtype : {DataType::kF32, DataType::kF64}) {
    Subgraph g;
    g.domain = Shape({3, 5, 7});
    for (const Shape& s : {Shape({7}), Shape({5, 1}), Shape({3, 1, 7}), Shape({1}), Shape(),
                           Shape({3, 5, 7}), Shape({5, 7})}) {
      g.inputs.push_back({dtype, s});
    }
    auto node = [&](ExprOp op, std::vector<int> args, double p0 = 0, double p1 = 0) {
      ExprNode n;
      n.op = op;
      n.dtype = dtype;
      for (size_t a = 0; a < args.size(); ++a) n.args[a] = args[a];
      n.params[0] = p0;
      n.params[1] = p1;
      g.nodes.push_back(n);
      return g.num_values() - 1;
    };
    const int a = node(ExprOp::kAdd, {0, 1});
    const int b = node(ExprOp::kSub, {2, a});
    const int c = node(ExprOp::kMul, {3, b});
    const int d = node(ExprOp::kDiv, {c, 4});
    const int e = node(ExprOp::kMax, {5, d});
    const int f = node(ExprOp::kMin, {6, 0});
    const int s = node(ExprOp::kScale, {1}, 0.1, -3);
    const int t = node(ExprOp::kDivGradY, {0, 1, 2});
    const int u = node(ExprOp::kMaxGradX, {6, 5, 3});
    const int v = node(ExprOp::kMinGradY, {4, 1, 6});
    const int w = node(ExprOp::kSgd, {2, 0, 4});
    const int x = node(ExprOp::kTanhGrad, {3, 1});
    g.outputs = {e, f, s, t, u, v, w, x};
    std::mt19937 rng(7);
    ExpectMatchesReference(g, RandomInputs(rng, g), std::string(DataTypeName(dtype)));
    absl::StatusOr<TileProgram> program = TileProgram::Compile(g);
    ASSERT_TRUE(program.ok());
    EXPECT_EQ(program->rows(), 15);  // [5, 1] and [3, 1, 7] keep every dimension apart
    EXPECT_EQ(program->row_elements(), 7);
    // [7], [5, 1], [3, 1, 7] and [5, 7] are gathered; [1] and [] are scalars, [3, 5, 7] dense.
    EXPECT_EQ(program->gathered_inputs(), 4);
  }
}

TEST(TileProgramTest, UnbroadcastGroupIsOneRow) {
  Subgraph g;
  g.domain = Shape({3, 1, 5, 7});
  g.inputs = {{DataType::kF32, Shape({3, 1, 5, 7})},
              {DataType::kF32, Shape({3, 1, 5, 7})},
              {DataType::kF32, Shape({1})}};
  ExprNode add;
  add.op = ExprOp::kAdd;
  add.args[0] = 0;
  add.args[1] = 1;
  ExprNode mul = add;
  mul.op = ExprOp::kMul;
  mul.args[0] = 3;
  mul.args[1] = 2;
  g.nodes = {add, mul};
  g.outputs = {4};
  absl::StatusOr<TileProgram> program = TileProgram::Compile(g);
  ASSERT_TRUE(program.ok());
  EXPECT_EQ(program->rows(), 1);
  EXPECT_EQ(program->row_elements(), 105);
  std::mt19937 rng(1);
  ExpectMatchesReference(g, RandomInputs(rng, g), "one row");
}

// Domains of many tiles, with rows longer and shorter than a tile, at least
// kParallelElements elements (the oneTBB path) and not.
TEST(TileProgramTest, LargeDomainsMatchReference) {
  // Short rows (the last three) make tiles span rows, so broadcast inputs are gathered.
  const std::vector<Shape> domains = {{7, 10007}, {70000}, {70, 1000}, {20000, 5},
                                      {3, 2500},  {5000},  {33, 37},   {5, 300, 3}};
  for (size_t k = 0; k < domains.size(); ++k) {
    const Shape& domain = domains[k];
    if (k < 4) {
      ASSERT_GE(domain.NumElements(), TileProgram::kParallelElements);
    }
    EXPECT_GT(domain.NumElements(), TileProgram::kTileElements);
    for (int seed = 0; seed < 3; ++seed) {
      std::mt19937 rng(static_cast<uint32_t>(100 * k + static_cast<size_t>(seed)));
      const Subgraph g = RandomGraph(rng, domain);
      ExpectMatchesReference(g, RandomInputs(rng, g),
                             domain.ToString() + " seed " + std::to_string(seed));
      if (HasFailure()) return;
    }
  }
}

// More inputs than RunTiles keeps on its stack (64): the argument table moves to the heap.
TEST(TileProgramTest, ManyInputsMatchReference) {
  std::mt19937 rng(21);
  Subgraph g;
  g.domain = Shape({3, 1030});
  for (int i = 0; i < 70; ++i) {
    g.inputs.push_back({i % 5 == 0 ? DataType::kF64 : DataType::kF32,
                        i % 3 == 0 ? g.domain : RandomBroadcast(rng, g.domain)});
  }
  // Sums of every input, per dtype, then one cast to join them.
  int acc[2] = {-1, -1};
  for (int i = 0; i < 70; ++i) {
    const int d = g.inputs[static_cast<size_t>(i)].dtype == DataType::kF32 ? 0 : 1;
    if (acc[d] < 0) {
      ExprNode copy;
      copy.op = ExprOp::kCopy;
      copy.dtype = g.inputs[static_cast<size_t>(i)].dtype;
      copy.args[0] = i;
      g.nodes.push_back(copy);
    } else {
      ExprNode add;
      add.op = i % 2 == 0 ? ExprOp::kAdd : ExprOp::kMax;
      add.dtype = g.inputs[static_cast<size_t>(i)].dtype;
      add.args[0] = acc[d];
      add.args[1] = i;
      g.nodes.push_back(add);
    }
    acc[d] = g.num_values() - 1;
  }
  ExprNode cast;
  cast.op = ExprOp::kCast;
  cast.dtype = DataType::kF32;
  cast.args[0] = acc[1];
  g.nodes.push_back(cast);
  ExprNode sum;
  sum.op = ExprOp::kSub;
  sum.args[0] = acc[0];
  sum.args[1] = g.num_values() - 1;
  g.nodes.push_back(sum);
  g.outputs = {g.num_values() - 1, acc[1]};
  ExpectMatchesReference(g, RandomInputs(rng, g), "70 inputs");
}

TEST(TileProgramTest, EmptyDomainStoresNothing) {
  for (const Shape& domain : {Shape({0}), Shape({2, 0, 3}), Shape({3, 0}), Shape({0, 4})}) {
    Subgraph g;
    g.domain = domain;
    g.inputs = {{DataType::kF32, domain},
                {DataType::kF32, Shape({domain.dim(domain.rank() - 1)})},
                {DataType::kF32, Shape()}};
    ExprNode n;
    n.op = ExprOp::kSgd;
    n.args[0] = 0;
    n.args[1] = 1;
    n.args[2] = 2;
    g.nodes = {n};
    g.outputs = {3};
    ASSERT_TRUE(g.Validate().ok()) << domain.ToString();
    absl::StatusOr<TileProgram> program = TileProgram::Compile(g);
    ASSERT_TRUE(program.ok());
    float sentinel = 42.0f;
    const float scalar = 1.0f;
    program->Run({&sentinel, &sentinel, &scalar}, {&sentinel});
    EXPECT_EQ(sentinel, 42.0f) << domain.ToString();
  }
}

TEST(TileProgramTest, RankZeroDomainMatchesReference) {
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(1000 + seed));
    const Subgraph g = RandomGraph(rng, Shape());
    ExpectMatchesReference(g, RandomInputs(rng, g), "seed " + std::to_string(seed));
  }
}

TEST(TileProgramTest, SeveralOutputsOfBothDtypes) {
  Subgraph g;
  g.domain = Shape({4, 300});
  g.inputs = {{DataType::kF32, Shape({4, 300})}, {DataType::kF64, Shape({300})}};
  auto node = [&](ExprOp op, DataType dtype, std::vector<int> args) {
    ExprNode n;
    n.op = op;
    n.dtype = dtype;
    for (size_t a = 0; a < args.size(); ++a) n.args[a] = args[a];
    g.nodes.push_back(n);
    return g.num_values() - 1;
  };
  const int wide = node(ExprOp::kCast, DataType::kF64, {0});      // 2
  const int sum = node(ExprOp::kAdd, DataType::kF64, {wide, 1});  // 3
  const int narrow = node(ExprOp::kCast, DataType::kF32, {sum});  // 4
  const int e = node(ExprOp::kExp, DataType::kF32, {narrow});     // 5
  const int r = node(ExprOp::kSigmoid, DataType::kF64, {sum});    // 6
  g.outputs = {e, sum, narrow, r};
  std::mt19937 rng(3);
  ExpectMatchesReference(g, RandomInputs(rng, g), "several outputs");
}

// ParamOut stored over Param (sgd in place), with another output reading Param too: the
// result must equal the reference computed from Param's original values.
TEST(TileProgramTest, OutputInPlaceOfAnInputMatchesReference) {
  for (const Shape& domain :
       {Shape({3, 5, 7}), Shape({2, 1500}), Shape({7, 10007}), Shape({20000, 5})}) {
    for (const DataType dtype : {DataType::kF32, DataType::kF64}) {
      Subgraph g;
      g.domain = domain;
      g.inputs = {{dtype, domain},
                  {dtype, domain},
                  {dtype, Shape()},
                  {dtype, Shape({domain.dim(domain.rank() - 1)})}};
      auto node = [&](ExprOp op, std::vector<int> args) {
        ExprNode n;
        n.op = op;
        n.dtype = dtype;
        for (size_t a = 0; a < args.size(); ++a) n.args[a] = args[a];
        g.nodes.push_back(n);
        return g.num_values() - 1;
      };
      const int grad = node(ExprOp::kMul, {1, 3});
      const int param_out = node(ExprOp::kSgd, {0, grad, 2});
      const int other = node(ExprOp::kSquare, {0});
      g.outputs = {param_out, other};
      ASSERT_TRUE(g.Validate().ok());
      std::mt19937 rng(11);
      std::vector<Tensor> inputs = RandomInputs(rng, g);
      const std::vector<Tensor> want = Reference(g, inputs);
      absl::StatusOr<TileProgram> program = TileProgram::Compile(g);
      ASSERT_TRUE(program.ok());
      Tensor other_out(dtype, domain);
      program->Run({inputs[0].bytes.data(), inputs[1].bytes.data(), inputs[2].bytes.data(),
                    inputs[3].bytes.data()},
                   {inputs[0].bytes.data(), other_out.bytes.data()});
      EXPECT_EQ(FirstDifference(want[0], inputs[0]), -1) << domain.ToString();
      EXPECT_EQ(FirstDifference(want[1], other_out), -1) << domain.ToString();
    }
  }
}

// Outputs of kStreamStoreBytes or more are written with non-temporal stores: outputs at
// every alignment modulo 16 (the copy's unaligned head and tail), one of them in place.
TEST(TileProgramTest, StreamedOutputsMatchReference) {
  Subgraph g;
  g.domain = Shape({1100, 1000});
  g.inputs = {{DataType::kF32, g.domain},
              {DataType::kF32, Shape({1000})},
              {DataType::kF32, Shape({1100, 1})},
              {DataType::kF32, Shape()}};
  auto node = [&](ExprOp op, std::vector<int> args) {
    ExprNode n;
    n.op = op;
    for (size_t a = 0; a < args.size(); ++a) n.args[a] = args[a];
    g.nodes.push_back(n);
    return g.num_values() - 1;
  };
  const int prod = node(ExprOp::kMul, {1, 2});
  const int param = node(ExprOp::kSgd, {0, prod, 3});
  const int act = node(ExprOp::kTanh, {prod});
  g.outputs = {param, act};
  ASSERT_GE(g.domain.NumElements() * 4, TileProgram::kStreamStoreBytes);
  absl::StatusOr<TileProgram> program = TileProgram::Compile(g);
  ASSERT_TRUE(program.ok());
  for (const int misalign : {0, 4, 8, 12}) {
    std::mt19937 rng(static_cast<uint32_t>(31 + misalign));
    std::vector<Tensor> inputs = RandomInputs(rng, g);
    const std::vector<Tensor> want = Reference(g, inputs);
    // `act` at `misalign` bytes past a 16-byte boundary; `param` over input 0 (in place).
    std::vector<unsigned char> storage(want[1].bytes.size() + 32);
    unsigned char* base = storage.data();
    base += (16 - reinterpret_cast<uintptr_t>(base) % 16) % 16 + static_cast<size_t>(misalign);
    program->Run({inputs[0].bytes.data(), inputs[1].bytes.data(), inputs[2].bytes.data(),
                  inputs[3].bytes.data()},
                 {inputs[0].bytes.data(), base});
    Tensor act_out(DataType::kF32, g.domain);
    std::memcpy(act_out.bytes.data(), base, act_out.bytes.size() - 1);
    EXPECT_EQ(FirstDifference(want[0], inputs[0]), -1) << "misaligned by " << misalign;
    EXPECT_EQ(FirstDifference(want[1], act_out), -1) << "misaligned by " << misalign;
  }
}

TEST(TileProgramTest, RunIsRepeatableAndScratchMatchesThePlan) {
  std::mt19937 rng(5);
  const Subgraph g = RandomGraph(rng, Shape({70, 1000}));
  absl::StatusOr<TileProgram> program = TileProgram::Compile(g);
  ASSERT_TRUE(program.ok());
  EXPECT_EQ(program->buffers().num_buffers, PlanBuffers(g).num_buffers);
  EXPECT_EQ(program->scratch_bytes(),
            (program->buffers().num_buffers + program->gathered_inputs()) *
                TileProgram::kTileElements * kBufferElementBytes);
  const std::vector<Tensor> inputs = RandomInputs(rng, g);
  std::vector<const void*> in;
  for (const Tensor& t : inputs) in.push_back(t.bytes.data());
  std::vector<Tensor> first, second;
  for (int o : g.outputs) {
    first.emplace_back(g.dtype_of(o), g.domain);
    second.emplace_back(g.dtype_of(o), g.domain);
  }
  std::vector<void*> out1, out2;
  for (Tensor& t : first) out1.push_back(t.bytes.data());
  for (Tensor& t : second) out2.push_back(t.bytes.data());
  program->Run(in, out1);
  program->Run(in, out2);
  for (size_t o = 0; o < first.size(); ++o) EXPECT_EQ(FirstDifference(first[o], second[o]), -1);
}

}  // namespace
}  // namespace sluice::framework::compiler::cpu::compiler_tile_program_test
