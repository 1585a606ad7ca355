// The forms of the common ONNX ops before NumPy broadcasting (framework/onnx/internal/
// legacy_mappers.cc), at opset 6 (and 1, with consumed_inputs), imported and run against
// loops in the test: Add, Sub, Mul, Div and Pow with attribute broadcast (B aligned to the
// right or at attribute axis, its dims of 1 repeated, or of one element) and without (equal
// shapes); Gemm's C, [M, N] or broadcast; PRelu's slope, broadcast or along the one dim of its
// size; Max, Min, Sum and Mean of equal shapes; Constant. The refusals name the node and the
// shapes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_legacy_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)

std::vector<Dim> DimsOf(const Dims& dims) { return std::vector<Dim>(dims.begin(), dims.end()); }

// f(a[i], b[j]) over A's elements, j the element of B that legacy broadcasting pairs with
// element i: B's dims line up with A's dims from `axis`, a dim of 1 repeated (a B of one
// element pairs with all).
std::vector<float> LegacyRef(const std::vector<float>& a, const Dims& as,
                             const std::vector<float>& b, const Dims& bs, int64_t axis,
                             const std::function<float(float, float)>& f) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    // A's index of element i, dim by dim from the last.
    Dims index(as.size());
    int64_t rest = static_cast<int64_t>(i);
    for (size_t d = as.size(); d-- > 0;) {
      index[d] = rest % as[d];
      rest /= as[d];
    }
    int64_t j = 0;
    if (NumElements(bs) != 1) {
      for (size_t k = 0; k < bs.size(); ++k) {
        j = j * bs[k] + (bs[k] == 1 ? 0 : index[static_cast<size_t>(axis) + k]);
      }
    }
    out[i] = f(a[i], b[static_cast<size_t>(j)]);
  }
  return out;
}

// `op` on inputs "a" (as) and "b" (bs) fed at run time, at `opset`; the node is named "op".
ModelBuilder BinaryModel(int64_t opset, const std::string& op, const Dims& as, const Dims& bs,
                         ::onnx::NodeProto** node) {
  ModelBuilder m(opset);
  m.Input("a", kFloat, DimsOf(as));
  m.Input("b", kFloat, DimsOf(bs));
  *node = m.Node(op, {"a", "b"}, {"y"}, "op");
  m.Output("y", kFloat, DimsOf(as));
  return m;
}

struct BroadcastCase {
  std::string op;
  Dims as, bs;
  int64_t axis;  // -1: no attribute (aligned to the right)
};

TEST(OnnxLegacyTest, BinaryOpsBroadcastBOntoA) {
  const std::vector<BroadcastCase> cases = {
      {"Add", {2, 3, 4}, {3, 4}, -1},     // suffix
      {"Sub", {2, 3, 4, 5}, {3, 4}, 1},   // a run in the middle
      {"Mul", {2, 3, 4}, {2}, 0},         // the leading dim
      {"Div", {2, 3, 4}, {4}, 2},         // the last dim, named
      {"Add", {2, 3}, {}, -1},            // a scalar
      {"Mul", {2, 3, 4}, {1, 1}, -1},     // one element of rank 2
      {"Sub", {2, 3, 4}, {2, 3, 4}, -1},  // every dim
      {"Add", {2, 3}, {2, 1}, 0},         // dims of 1 repeat (PyTorch's exports)
      {"Mul", {2, 3}, {1, 3}, 0},        {"Div", {2, 3, 4, 5}, {3, 1}, 1},
  };
  const std::function<float(float, float)> fns[] = {
      [](float x, float y) { return x + y; }, [](float x, float y) { return x - y; },
      [](float x, float y) { return x * y; }, [](float x, float y) { return x / y; }};
  const std::vector<std::string> names = {"Add", "Sub", "Mul", "Div"};
  for (const BroadcastCase& c : cases) {
    SCOPED_TRACE(c.op + " " + Shape(c.as).ToString() + " " + Shape(c.bs).ToString());
    ::onnx::NodeProto* node = nullptr;
    ModelBuilder m = BinaryModel(6, c.op, c.as, c.bs, &node);
    IntAttr(node, "broadcast", 1);
    if (c.axis >= 0) IntAttr(node, "axis", c.axis);
    const std::vector<float> a = Mixed(NumElements(c.as), 1);
    std::vector<float> b = Mixed(NumElements(c.bs), 2);
    for (float& v : b) v = v == 0.0f ? 0.5f : v;  // a divisor
    const std::vector<HostTensor> out = ImportAndRun(m, {{"a", F32(a, c.as)}, {"b", F32(b, c.bs)}});
    ASSERT_EQ(out.size(), 1u);
    const int64_t axis = c.axis >= 0 ? c.axis : static_cast<int64_t>(c.as.size() - c.bs.size());
    const auto f = fns[std::find(names.begin(), names.end(), c.op) - names.begin()];
    ExpectFloats(out[0], LegacyRef(a, c.as, b, c.bs, axis, f), c.as);
  }
}

TEST(OnnxLegacyTest, EqualShapesWithoutBroadcastAtOpsetsOneAndSix) {
  const Dims dims = {2, 3};
  const std::vector<float> a = Mixed(6, 3), b = Mixed(6, 4);
  for (int64_t opset : {1, 6}) {
    SCOPED_TRACE(opset);
    ::onnx::NodeProto* node = nullptr;
    ModelBuilder m = BinaryModel(opset, "Mul", dims, dims, &node);
    if (opset == 1) IntsAttr(node, "consumed_inputs", {0, 0});  // read as nothing
    const std::vector<HostTensor> out = ImportAndRun(m, {{"a", F32(a, dims)}, {"b", F32(b, dims)}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], LegacyRef(a, dims, b, dims, 0, std::multiplies<float>()), dims);
  }
}

TEST(OnnxLegacyTest, ConstantBAndConstantOperandsFold) {
  // PyTorch's `x + 1` at opset 6: a Constant scalar broadcast onto x.
  ModelBuilder m(6);
  m.Input("x", kFloat, {2, 3});
  TensorAttr(m.Node("Constant", {}, {"one"}), "value", FloatTensor("", {}, {1.0f}));
  IntAttr(m.Node("Add", {"x", "one"}, {"y"}), "broadcast", 1);
  // Two constants of one shape fold; of two shapes they are broadcast by the mapper.
  TensorAttr(m.Node("Constant", {}, {"row"}), "value", FloatTensor("", {3}, {1, 2, 3}));
  TensorAttr(m.Node("Constant", {}, {"rows"}), "value", FloatTensor("", {2, 3}, Ramp(6)));
  IntAttr(m.Node("Sub", {"rows", "row"}, {"diff"}), "broadcast", 1);
  m.Node("Add", {"y", "diff"}, {"z"});
  m.Output("z", kFloat, {2, 3});
  const std::vector<float> x = Mixed(6, 5);
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3})}});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> rows = Ramp(6);
  std::vector<float> want(6);
  for (size_t i = 0; i < 6; ++i) want[i] = x[i] + 1.0f + (rows[i] - static_cast<float>(i % 3 + 1));
  ExpectFloats(out[0], want, {2, 3});
}

TEST(OnnxLegacyTest, PowWithAScalarExponent) {
  ModelBuilder m(6);
  m.Input("x", kFloat, {2, 3});
  m.Initializer(FloatTensor("e", {1}, {2.0f}));
  IntAttr(m.Node("Pow", {"x", "e"}, {"y"}), "broadcast", 1);
  m.Output("y", kFloat, {2, 3});
  const std::vector<float> x = Mixed(6, 6);
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3})}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want(6);
  for (size_t i = 0; i < 6; ++i) want[i] = x[i] * x[i];
  ExpectFloats(out[0], want, {2, 3});
}

TEST(OnnxLegacyTest, BRefusedWhereItDoesNotAlign) {
  struct Refusal {
    Dims as, bs;
    int64_t broadcast, axis;  // axis -1: none
    std::string why;
  };
  const std::vector<Refusal> cases = {
      {{2, 3, 4}, {3}, 1, 0, "does not line up with A's dims from axis 0"},
      {{2, 3, 4}, {3}, 1, -1, "does not line up with A's dims from axis 2"},
      {{2, 3, 4}, {3, 4}, 1, 2, "does not line up with A's dims from axis 2"},
      {{2, 3, 4}, {2, 2}, 1, 0, "does not line up with A's dims from axis 0"},
      {{2, 3}, {2, 2, 3}, 1, -1, "has more dims than A's"},
      {{2, 3}, {3}, 0, -1, "attribute broadcast is not 1"},
  };
  for (const Refusal& c : cases) {
    SCOPED_TRACE(c.why);
    ::onnx::NodeProto* node = nullptr;
    ModelBuilder m = BinaryModel(6, "Add", c.as, c.bs, &node);
    if (c.broadcast != 0) IntAttr(node, "broadcast", c.broadcast);
    if (c.axis >= 0) IntAttr(node, "axis", c.axis);
    ExpectError(Import(m), absl::StatusCode::kInvalidArgument,
                {"node 'op' (Add, opset 6)", Shape(c.bs).ToString(), c.why});
  }
}

TEST(OnnxLegacyTest, ConstantsOfTwoShapesDoNotFoldWithoutBroadcast) {
  ModelBuilder m(6);
  m.Initializer(FloatTensor("a", {2, 3}, Ramp(6)));
  m.Initializer(FloatTensor("b", {3}, Ramp(3)));
  m.Node("Max", {"a", "b"}, {"max"}, "max");
  m.Output("max", kFloat, {2, 3});
  ExpectError(Import(m), absl::StatusCode::kInvalidArgument,
              {"node 'max' (Max, opset 6)", "input 1's shape [3]"});
}

// Y = alpha * A B^T + beta * C for A [m, k], B [n, k], C of `cs`.
std::vector<float> RefGemm(const std::vector<float>& a, const std::vector<float>& b,
                           const std::vector<float>& c, const Dims& cs, int64_t m, int64_t n,
                           int64_t k, float alpha, float beta) {
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) acc += a[i * k + p] * b[j * k + p];
      const int64_t ci = cs.size() == 2 ? i * n + j : cs.size() == 1 ? j : 0;
      y[i * n + j] = static_cast<float>(alpha * acc + beta * c[ci]);
    }
  }
  return y;
}

TEST(OnnxLegacyTest, GemmWithCOfEachForm) {
  const int64_t m = 3, n = 4, k = 5;
  const std::vector<float> a = Mixed(m * k, 1), b = Mixed(n * k, 2);
  const std::vector<Dims> c_shapes = {{m, n}, {n}, {}};
  for (const Dims& cs : c_shapes) {
    SCOPED_TRACE(Shape(cs).ToString());
    ModelBuilder mb(6);
    mb.Input("a", kFloat, {m, k});
    mb.Input("b", kFloat, {n, k});
    const std::vector<float> c = Mixed(NumElements(cs), 3);
    mb.Initializer(FloatTensor("c", cs, c));
    auto* gemm = mb.Node("Gemm", {"a", "b", "c"}, {"y"});
    IntAttr(gemm, "transB", 1);
    FloatAttr(gemm, "alpha", 0.5f);
    FloatAttr(gemm, "beta", 2.0f);
    if (cs.size() != 2) IntAttr(gemm, "broadcast", 1);
    mb.Output("y", kFloat, {m, n});
    const std::vector<HostTensor> out =
        ImportAndRun(mb, {{"a", F32(a, {m, k})}, {"b", F32(b, {n, k})}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], RefGemm(a, b, c, cs, m, n, k, 0.5f, 2.0f), {m, n}, 1e-5);
  }
}

TEST(OnnxLegacyTest, GemmRefusesACThatDoesNotFit) {
  for (int64_t broadcast : {0, 1}) {
    SCOPED_TRACE(broadcast);
    ModelBuilder m(6);
    m.Input("a", kFloat, {3, 5});
    m.Input("b", kFloat, {5, 4});
    m.Input("c", kFloat, {broadcast != 0 ? 3 : 4});
    auto* gemm = m.Node("Gemm", {"a", "b", "c"}, {"y"}, "gemm");
    if (broadcast != 0) IntAttr(gemm, "broadcast", 1);
    m.Output("y", kFloat, {3, 4});
    ExpectError(Import(m), absl::StatusCode::kInvalidArgument,
                {"node 'gemm' (Gemm, opset 6)", "C's shape", "[3, 4]"});
  }
}

TEST(OnnxLegacyTest, PReluSlopeBroadcastOrAlongItsDim) {
  const Dims xs = {2, 3, 4};
  const std::vector<float> x = Mixed(NumElements(xs), 7);
  // [3]: X's channels (the one dim of size 3); [4] and [1]: broadcast NumPy's way.
  for (const Dims& ss : std::vector<Dims>{{3}, {4}, {1}, {3, 4}}) {
    SCOPED_TRACE(Shape(ss).ToString());
    ModelBuilder m(6);
    m.Input("x", kFloat, DimsOf(xs));
    const std::vector<float> slope = Mixed(NumElements(ss), 8);
    m.Initializer(FloatTensor("slope", ss, slope));
    m.Node("PRelu", {"x", "slope"}, {"y"});
    m.Output("y", kFloat, DimsOf(xs));
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
    ASSERT_EQ(out.size(), 1u);
    const int64_t axis = ss == Dims{3} ? 1 : static_cast<int64_t>(xs.size() - ss.size());
    ExpectFloats(
        out[0],
        LegacyRef(x, xs, slope, ss, axis, [](float v, float s) { return v < 0 ? v * s : v; }), xs);
  }
}

TEST(OnnxLegacyTest, PReluRefusesASlopeMatchingNoSingleDim) {
  ModelBuilder m(6);
  m.Input("x", kFloat, {2, 3, 3});
  m.Input("slope", kFloat, {2, 1, 3, 1});
  m.Node("PRelu", {"x", "slope"}, {"y"}, "prelu");
  m.Output("y", kFloat, {2, 3, 3});
  ExpectError(Import(m), absl::StatusCode::kInvalidArgument,
              {"node 'prelu' (PRelu, opset 6)", "[2, 1, 3, 1]", "neither broadcasts"});
}

TEST(OnnxLegacyTest, VariadicOpsOfEqualShapes) {
  const Dims dims = {2, 3};
  const std::vector<float> x0 = Mixed(6, 1), x1 = Mixed(6, 2), x2 = Mixed(6, 3);
  ModelBuilder m(6);
  for (const char* name : {"x0", "x1", "x2"}) m.Input(name, kFloat, {2, 3});
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    m.Node(op, {"x0", "x1", "x2"}, {op});
    m.Output(op, kFloat, {2, 3});
  }
  const std::vector<HostTensor> out =
      ImportAndRun(m, {{"x0", F32(x0, dims)}, {"x1", F32(x1, dims)}, {"x2", F32(x2, dims)}});
  ASSERT_EQ(out.size(), 4u);
  std::vector<float> max(6), min(6), sum(6), mean(6);
  for (size_t i = 0; i < 6; ++i) {
    max[i] = std::max({x0[i], x1[i], x2[i]});
    min[i] = std::min({x0[i], x1[i], x2[i]});
    sum[i] = x0[i] + x1[i] + x2[i];
    mean[i] = sum[i] / 3.0f;
  }
  ExpectFloats(out[0], max, dims);
  ExpectFloats(out[1], min, dims);
  ExpectFloats(out[2], sum, dims);
  ExpectFloats(out[3], mean, dims);
}

TEST(OnnxLegacyTest, VariadicOpsRefuseShapesThatDiffer) {
  ModelBuilder m(6);
  m.Input("x0", kFloat, {2, 3});
  m.Input("x1", kFloat, {3});
  m.Node("Sum", {"x0", "x1"}, {"y"}, "sum");
  m.Output("y", kFloat, {2, 3});
  ExpectError(Import(m), absl::StatusCode::kInvalidArgument,
              {"node 'sum' (Sum, opset 6)", "input 1's shape [3]", "do not broadcast"});
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_legacy_test
