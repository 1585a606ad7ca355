// ONNX import: models built here with ONNX's protobuf classes are imported and run through an
// Executor (the imported persistables written into the scope first), and their outputs are
// compared with values computed here by plain loops: one or more models per op type of the
// node table, at the opsets whose semantics differ. The refusals, names and checker paths
// are in onnx_import_refusal_test.cc.
#include "framework/onnx/onnx_import.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "framework/interpreter/host_tensor.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_import_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)

// ---------------------------------------------------------------------------------------
// Reference computations.

// NumPy broadcasting: the output dims of a and b.
Dims BroadcastDims(const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = std::max(da, db);
  }
  return out;
}

// The flat index into an input of dims `in` for flat output index `flat` of dims `out`.
int64_t BroadcastIndex(int64_t flat, const Dims& out, const Dims& in) {
  int64_t index = 0;
  int64_t stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t axis = out.size() - 1 - k;
    const int64_t coord = flat % out[axis];
    flat /= out[axis];
    if (k < in.size()) {
      const int64_t size = in[in.size() - 1 - k];
      index += (size == 1 ? 0 : coord) * stride;
      stride *= size;
    }
  }
  return index;
}

template <typename R, typename T, typename F>
std::vector<R> Broadcast(const std::vector<T>& a, const Dims& ad, const std::vector<T>& b,
                         const Dims& bd, F f) {
  const Dims od = BroadcastDims(ad, bd);
  std::vector<R> out(static_cast<size_t>(NumElements(od)));
  for (int64_t i = 0; i < NumElements(od); ++i) {
    out[i] = f(a[BroadcastIndex(i, od, ad)], b[BroadcastIndex(i, od, bd)]);
  }
  return out;
}

// Softmax (or log-softmax) of x taken as [outer, n, inner], over the middle dimension.
std::vector<float> SoftmaxRef(const std::vector<float>& x, int64_t outer, int64_t n, int64_t inner,
                              bool log) {
  std::vector<float> out(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double max = -INFINITY;
      for (int64_t k = 0; k < n; ++k) max = std::max<double>(max, x[(o * n + k) * inner + i]);
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(x[(o * n + k) * inner + i] - max);
      for (int64_t k = 0; k < n; ++k) {
        const double shifted = x[(o * n + k) * inner + i] - max;
        out[(o * n + k) * inner + i] =
            static_cast<float>(log ? shifted - std::log(sum) : std::exp(shifted) / sum);
      }
    }
  }
  return out;
}

// Sum (or mean) of x over `axes`; the result in row-major order of the kept dimensions.
std::vector<float> ReduceRef(const std::vector<float>& x, const Dims& dims, const Dims& axes,
                             bool mean) {
  Dims out_dims = dims;
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= dims[a];
    out_dims[a] = 1;
  }
  std::vector<double> acc(static_cast<size_t>(NumElements(out_dims)), 0.0);
  for (int64_t i = 0; i < NumElements(dims); ++i) {
    acc[BroadcastIndex(i, dims, out_dims)] += x[i];
  }
  std::vector<float> out;
  for (double v : acc) out.push_back(static_cast<float>(mean ? v / count : v));
  return out;
}

// x of dims `dims` with its axes permuted: out dimension i is input dimension perm[i].
std::vector<float> TransposeRef(const std::vector<float>& x, const Dims& dims, const Dims& perm) {
  const size_t rank = dims.size();
  Dims out_dims(rank);
  for (size_t i = 0; i < rank; ++i) out_dims[i] = dims[perm[i]];
  Dims in_strides(rank, 1);
  for (size_t i = rank - 1; i > 0; --i) in_strides[i - 1] = in_strides[i] * dims[i];
  std::vector<float> out(x.size());
  for (int64_t flat = 0; flat < NumElements(out_dims); ++flat) {
    int64_t rest = flat;
    int64_t src = 0;
    for (size_t k = 0; k < rank; ++k) {
      const size_t axis = rank - 1 - k;
      src += (rest % out_dims[axis]) * in_strides[perm[axis]];
      rest /= out_dims[axis];
    }
    out[flat] = x[src];
  }
  return out;
}

// [m, k] x [k, n].
std::vector<float> MatmulRef(const std::vector<float>& a, const std::vector<float>& b, int64_t m,
                             int64_t k, int64_t n) {
  std::vector<float> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[i * k + p] * b[p * n + j];
      out[i * n + j] = static_cast<float>(s);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Elementwise ops.

TEST(OnnxNodeTest, ArithmeticBroadcastsBothWays) {
  const Dims ad = {2, 1}, bd = {3}, od = {2, 3};
  const std::vector<float> a = {1.5f, -2.0f};
  const std::vector<float> b = {0.5f, 4.0f, -1.25f};
  const std::vector<std::pair<std::string, std::function<float(float, float)>>> cases = {
      {"Add", [](float x, float y) { return x + y; }},
      {"Sub", [](float x, float y) { return x - y; }},
      {"Mul", [](float x, float y) { return x * y; }},
      {"Div", [](float x, float y) { return x / y; }},
  };
  for (const auto& [type, f] : cases) {
    SCOPED_TRACE(type);
    ModelBuilder m;
    m.Input("a", kFloat, {2, 1});
    m.Input("b", kFloat, {3});
    m.Node(type, {"a", "b"}, {"y"});
    m.Output("y", kFloat, {2, 3});
    std::vector<HostTensor> out = ImportAndRun(m, {{"a", F32(a, ad)}, {"b", F32(b, bd)}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], Broadcast<float>(a, ad, b, bd, f), od);
  }
}

TEST(OnnxNodeTest, BinaryOpWithAnInitializerOperand) {
  // The initializer (raw_data) becomes a persistable that the run reads from the scope.
  ModelBuilder m;
  m.Input("x", kFloat, {2, 3});
  const std::vector<float> w = {10, 20, 30};
  m.Initializer(RawFloatTensor("w", {3}, w));
  m.Node("Add", {"x", "w"}, {"y"});
  m.Output("y", kFloat, {2, 3});
  const std::vector<float> x = Ramp(6);
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  ASSERT_EQ(imported->persistables.size(), 1u);
  EXPECT_EQ(imported->persistables[0].first, "w");
  EXPECT_EQ(imported->persistables[0].second.ToVector<float>(), w);
  ASSERT_EQ(imported->inputs.size(), 1u);  // the initializer is no feed
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3})}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], Broadcast<float>(x, {2, 3}, w, {3}, std::plus<float>()), {2, 3});
}

TEST(OnnxNodeTest, VariadicOpsTakeThreeInputs) {
  const Dims ad = {2, 3}, bd = {3}, cd = {2, 3};
  const std::vector<float> a = Mixed(6, 1), b = Mixed(3, 2), c = Mixed(6, 3);
  const std::vector<std::pair<std::string, std::function<float(float, float, float)>>> cases = {
      {"Max", [](float x, float y, float z) { return std::max(std::max(x, y), z); }},
      {"Min", [](float x, float y, float z) { return std::min(std::min(x, y), z); }},
      {"Sum", [](float x, float y, float z) { return x + y + z; }},
      {"Mean", [](float x, float y, float z) { return (x + y + z) / 3.0f; }},
  };
  for (const auto& [type, f] : cases) {
    SCOPED_TRACE(type);
    ModelBuilder m;
    m.Input("a", kFloat, {2, 3});
    m.Input("b", kFloat, {3});
    m.Input("c", kFloat, {2, 3});
    m.Node(type, {"a", "b", "c"}, {"y"});
    m.Output("y", kFloat, {2, 3});
    std::vector<HostTensor> out =
        ImportAndRun(m, {{"a", F32(a, ad)}, {"b", F32(b, bd)}, {"c", F32(c, cd)}});
    ASSERT_EQ(out.size(), 1u);
    std::vector<float> want(6);
    for (int64_t i = 0; i < 6; ++i) want[i] = f(a[i], b[i % 3], c[i]);
    ExpectFloats(out[0], want, {2, 3});
  }
}

TEST(OnnxNodeTest, UnaryOps) {
  const std::vector<float> mixed = {-2.0f, -0.5f, 0.0f, 0.5f, 1.0f, 3.0f};
  const std::vector<float> positive = {0.25f, 0.5f, 1.0f, 2.0f, 3.5f, 9.0f};
  struct Case {
    std::string type;
    std::function<double(double)> f;
    bool positive_only;
  };
  const std::vector<Case> cases = {
      {"Relu", [](double x) { return x > 0 ? x : 0.0; }, false},
      {"Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, false},
      {"Tanh", [](double x) { return std::tanh(x); }, false},
      {"Exp", [](double x) { return std::exp(x); }, false},
      {"Log", [](double x) { return std::log(x); }, true},
      {"Sqrt", [](double x) { return std::sqrt(x); }, true},
      {"Abs", [](double x) { return std::fabs(x); }, false},
      {"Neg", [](double x) { return -x; }, false},
      {"Reciprocal", [](double x) { return 1.0 / x; }, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    ModelBuilder m;
    m.Input("x", kFloat, {2, 3});
    m.Node(c.type, {"x"}, {"y"});
    m.Output("y", kFloat, {2, 3});
    const std::vector<float>& x = c.positive_only ? positive : mixed;
    std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3})}});
    ASSERT_EQ(out.size(), 1u);
    std::vector<float> want;
    for (float v : x) want.push_back(static_cast<float>(c.f(v)));
    ExpectFloats(out[0], want, {2, 3});
  }
}

TEST(OnnxNodeTest, LogicalOps) {
  const std::vector<bool> a = {false, false, true, true};
  const std::vector<bool> b = {false, true, false, true};
  ModelBuilder m;
  m.Input("a", kBool, {4});
  m.Input("b", kBool, {4});
  m.Node("Not", {"a"}, {"not"});
  m.Node("And", {"a", "b"}, {"and"});
  m.Node("Or", {"a", "b"}, {"or"});
  m.Node("Xor", {"a", "b"}, {"xor"});
  for (const char* name : {"not", "and", "or", "xor"}) m.Output(name, kBool, {4});
  std::vector<HostTensor> out = ImportAndRun(m, {{"a", Bools(a, {4})}, {"b", Bools(b, {4})}});
  ASSERT_EQ(out.size(), 4u);
  std::vector<std::vector<bool>> want(4);
  for (size_t i = 0; i < 4; ++i) {
    want[0].push_back(!a[i]);
    want[1].push_back(a[i] && b[i]);
    want[2].push_back(a[i] || b[i]);
    want[3].push_back(a[i] != b[i]);
  }
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(out[k].dtype, DataType::kBool);
    EXPECT_EQ(out[k].shape, Shape({4}));
    EXPECT_EQ(BoolValues(out[k]), want[k]) << "output " << k;
  }
}

TEST(OnnxNodeTest, ComparisonsBroadcast) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {2, 2, 7};
  const std::vector<std::pair<std::string, std::function<bool(float, float)>>> cases = {
      {"Less", std::less<float>()},
      {"Greater", std::greater<float>()},
      {"Equal", std::equal_to<float>()},
      {"LessOrEqual", std::less_equal<float>()},
      {"GreaterOrEqual", std::greater_equal<float>()},
  };
  ModelBuilder m;
  m.Input("a", kFloat, {2, 3});
  m.Input("b", kFloat, {3});
  for (const auto& [type, f] : cases) {
    m.Node(type, {"a", "b"}, {type + "_out"});
    m.Output(type + "_out", kBool, {2, 3});
  }
  std::vector<HostTensor> out = ImportAndRun(m, {{"a", F32(a, {2, 3})}, {"b", F32(b, {3})}});
  ASSERT_EQ(out.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(cases[k].first);
    EXPECT_EQ(out[k].dtype, DataType::kBool);
    EXPECT_EQ(out[k].shape, Shape({2, 3}));
    EXPECT_EQ(BoolValues(out[k]), Broadcast<bool>(a, {2, 3}, b, {3}, cases[k].second));
  }
}

TEST(OnnxNodeTest, PowWithAConstantExponent) {
  ModelBuilder m;
  m.Input("x", kFloat, {4});
  m.Initializer(FloatTensor("e", {}, {3.0f}));
  m.Node("Pow", {"x", "e"}, {"y"});
  m.Output("y", kFloat, {4});
  const std::vector<float> x = {-1.5f, 0.0f, 0.5f, 2.0f};
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(imported->persistables.empty());  // the exponent was folded into an attribute
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {4})}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want;
  for (float v : x) want.push_back(static_cast<float>(std::pow(v, 3.0)));
  ExpectFloats(out[0], want, {4});
}

std::vector<float> ClipRef(const std::vector<float>& x, float lo, float hi) {
  std::vector<float> out;
  for (float v : x) out.push_back(std::min(std::max(v, lo), hi));
  return out;
}

TEST(OnnxNodeTest, ClipAtOpset10TakesAttributes) {
  ModelBuilder m(10);
  m.Input("x", kFloat, {6});
  ::onnx::NodeProto* both = m.Node("Clip", {"x"}, {"y"});
  FloatAttr(both, "min", -0.5f);
  FloatAttr(both, "max", 1.0f);
  ::onnx::NodeProto* max_only = m.Node("Clip", {"x"}, {"z"});
  FloatAttr(max_only, "max", 0.25f);
  m.Output("y", kFloat, {6});
  m.Output("z", kFloat, {6});
  const std::vector<float> x = Ramp(6, -1.5f, 0.6f);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {6})}});
  ASSERT_EQ(out.size(), 2u);
  ExpectFloats(out[0], ClipRef(x, -0.5f, 1.0f), {6});
  ExpectFloats(out[1], ClipRef(x, -INFINITY, 0.25f), {6});
}

TEST(OnnxNodeTest, ClipAtOpset13TakesConstantInputs) {
  ModelBuilder m(13);
  m.Input("x", kFloat, {6});
  m.Initializer(FloatTensor("lo", {}, {-0.5f}));
  m.Initializer(FloatTensor("hi", {}, {1.0f}));
  m.Node("Clip", {"x", "lo", "hi"}, {"y"});
  m.Node("Clip", {"x", "", "hi"}, {"z"});  // max only: min is the empty (absent) input
  m.Output("y", kFloat, {6});
  m.Output("z", kFloat, {6});
  const std::vector<float> x = Ramp(6, -1.5f, 0.6f);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {6})}});
  ASSERT_EQ(out.size(), 2u);
  ExpectFloats(out[0], ClipRef(x, -0.5f, 1.0f), {6});
  ExpectFloats(out[1], ClipRef(x, -INFINITY, 1.0f), {6});
}

TEST(OnnxNodeTest, Cast) {
  ModelBuilder m;
  m.Input("x", kFloat, {5});
  m.Input("i", kInt64, {3});
  IntAttr(m.Node("Cast", {"x"}, {"xi"}), "to", kInt32);
  IntAttr(m.Node("Cast", {"i"}, {"if"}), "to", kFloat);
  m.Output("xi", kInt32, {5});
  m.Output("if", kFloat, {3});
  const std::vector<float> x = {1.75f, -2.5f, 3.0f, 0.25f, -0.75f};
  const std::vector<int64_t> i = {-3, 0, 1000000};
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {5})}, {"i", I64(i, {3})}});
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].dtype, DataType::kI32);
  std::vector<int32_t> want_i;
  for (float v : x) want_i.push_back(static_cast<int32_t>(v));  // toward zero, as ONNX
  EXPECT_EQ(out[0].ToVector<int32_t>(), want_i);
  std::vector<float> want_f;
  for (int64_t v : i) want_f.push_back(static_cast<float>(v));
  ExpectFloats(out[1], want_f, {3});
}

TEST(OnnxNodeTest, IdentityAndDropoutCopy) {
  ModelBuilder m(13);
  m.Input("x", kFloat, {2, 3});
  m.Initializer(FloatTensor("ratio", {}, {0.5f}));
  m.Node("Identity", {"x"}, {"id"});
  m.Node("Dropout", {"id", "ratio"}, {"dropped"});
  m.Output("id", kFloat, {2, 3});
  m.Output("dropped", kFloat, {2, 3});
  const std::vector<float> x = Mixed(6);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3})}});
  ASSERT_EQ(out.size(), 2u);
  ExpectFloats(out[0], x, {2, 3}, 0);
  ExpectFloats(out[1], x, {2, 3}, 0);  // inference: no scaling, nothing dropped
}

TEST(OnnxNodeTest, ConstantNodes) {
  ModelBuilder m(13);
  m.Input("x", kFloat, {2, 3});
  const std::vector<float> c = Ramp(6, 10.0f, 1.0f);
  TensorAttr(m.Node("Constant", {}, {"c"}), "value", FloatTensor("", {2, 3}, c));
  FloatAttr(m.Node("Constant", {}, {"s"}), "value_float", 0.5f);
  IntsAttr(m.Node("Constant", {}, {"ints"}), "value_ints", {4, -5, 6});
  m.Node("Add", {"x", "c"}, {"sum"});
  m.Node("Mul", {"sum", "s"}, {"y"});
  m.Output("y", kFloat, {2, 3});
  m.Output("ints", kInt64, {3});  // a constant fetched directly
  const std::vector<float> x = Mixed(6);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3})}});
  ASSERT_EQ(out.size(), 2u);
  std::vector<float> want;
  for (size_t i = 0; i < 6; ++i) want.push_back((x[i] + c[i]) * 0.5f);
  ExpectFloats(out[0], want, {2, 3});
  ASSERT_EQ(out[1].dtype, DataType::kI64);
  EXPECT_EQ(out[1].shape, Shape({3}));
  EXPECT_EQ(out[1].ToVector<int64_t>(), (std::vector<int64_t>{4, -5, 6}));
}

TEST(OnnxNodeTest, MatMul) {
  ModelBuilder m;
  m.Input("a", kFloat, {2, 3});
  const std::vector<float> w = Mixed(12, 7);
  m.Initializer(FloatTensor("w", {3, 4}, w));
  m.Node("MatMul", {"a", "w"}, {"y"});
  m.Output("y", kFloat, {2, 4});
  const std::vector<float> a = Mixed(6, 3);
  std::vector<HostTensor> out = ImportAndRun(m, {{"a", F32(a, {2, 3})}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], MatmulRef(a, w, 2, 3, 4), {2, 4});
}

TEST(OnnxNodeTest, MatMulWithVectorOperands) {
  const std::vector<float> v = Mixed(3, 5);   // [3]
  const std::vector<float> w = Mixed(12, 7);  // [3, 4]
  {
    SCOPED_TRACE("vector x matrix: [3] x [3, 4] -> [4]");
    ModelBuilder m;
    m.Input("v", kFloat, {3});
    m.Initializer(FloatTensor("w", {3, 4}, w));
    m.Node("MatMul", {"v", "w"}, {"y"});
    m.Output("y", kFloat, {4});
    std::vector<HostTensor> out = ImportAndRun(m, {{"v", F32(v, {3})}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], MatmulRef(v, w, 1, 3, 4), {4});
  }
  {
    SCOPED_TRACE("matrix x vector: [4, 3] x [3] -> [4]");
    ModelBuilder m;
    m.Input("a", kFloat, {4, 3});
    m.Input("v", kFloat, {3});
    m.Node("MatMul", {"a", "v"}, {"y"});
    m.Output("y", kFloat, {4});
    std::vector<HostTensor> out = ImportAndRun(m, {{"a", F32(w, {4, 3})}, {"v", F32(v, {3})}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], MatmulRef(w, v, 4, 3, 1), {4});
  }
  {
    SCOPED_TRACE("vector x vector: a scalar");
    ModelBuilder m;
    m.Input("a", kFloat, {3});
    m.Input("b", kFloat, {3});
    m.Node("MatMul", {"a", "b"}, {"y"});
    m.Output("y", kFloat, {});
    std::vector<HostTensor> out = ImportAndRun(m, {{"a", F32(v, {3})}, {"b", F32(v, {3})}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], MatmulRef(v, v, 1, 3, 1), {});
  }
}

TEST(OnnxNodeTest, GemmWithTransposesScalesAndBroadcastC) {
  // Y = alpha * A' B' + beta * C: A is [K, M] = [3, 2], B is [N, K] = [4, 3], C is [N].
  const std::vector<float> a = Mixed(6, 11), b = Mixed(12, 12), c = Mixed(4, 13);
  ModelBuilder m;
  m.Input("a", kFloat, {3, 2});
  m.Initializer(FloatTensor("b", {4, 3}, b));
  m.Initializer(FloatTensor("c", {4}, c));
  ::onnx::NodeProto* gemm = m.Node("Gemm", {"a", "b", "c"}, {"y"});
  IntAttr(gemm, "transA", 1);
  IntAttr(gemm, "transB", 1);
  FloatAttr(gemm, "alpha", 0.5f);
  FloatAttr(gemm, "beta", 2.0f);
  // And a plain one, C a column [M, 1].
  m.Input("p", kFloat, {2, 3});
  m.Initializer(FloatTensor("q", {3, 4}, b));
  m.Initializer(FloatTensor("col", {2, 1}, {1.0f, -1.0f}));
  m.Node("Gemm", {"p", "q", "col"}, {"z"});
  m.Output("y", kFloat, {2, 4});
  m.Output("z", kFloat, {2, 4});
  const std::vector<float> p = Mixed(6, 14);
  std::vector<HostTensor> out = ImportAndRun(m, {{"a", F32(a, {3, 2})}, {"p", F32(p, {2, 3})}});
  ASSERT_EQ(out.size(), 2u);
  const std::vector<float> prod =
      MatmulRef(TransposeRef(a, {3, 2}, {1, 0}), TransposeRef(b, {4, 3}, {1, 0}), 2, 3, 4);
  std::vector<float> want(8);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 4; ++j) want[i * 4 + j] = 0.5f * prod[i * 4 + j] + 2.0f * c[j];
  }
  ExpectFloats(out[0], want, {2, 4});
  const std::vector<float> plain = MatmulRef(p, b, 2, 3, 4);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 4; ++j) want[i * 4 + j] = plain[i * 4 + j] + (i == 0 ? 1.0f : -1.0f);
  }
  ExpectFloats(out[1], want, {2, 4});
}

TEST(OnnxNodeTest, SoftmaxAtOpset13IsAlongOneAxis) {
  ModelBuilder m(13);
  m.Input("x", kFloat, {2, 3, 4});
  IntAttr(m.Node("Softmax", {"x"}, {"y"}), "axis", 1);
  m.Node("LogSoftmax", {"x"}, {"log"});  // default axis -1
  m.Output("y", kFloat, {2, 3, 4});
  m.Output("log", kFloat, {2, 3, 4});
  const std::vector<float> x = Mixed(24, 5);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3, 4})}});
  ASSERT_EQ(out.size(), 2u);
  ExpectFloats(out[0], SoftmaxRef(x, 2, 3, 4, false), {2, 3, 4});
  ExpectFloats(out[1], SoftmaxRef(x, 6, 4, 1, true), {2, 3, 4});
}

TEST(OnnxNodeTest, SoftmaxAtOpset11FlattensFromTheAxis) {
  // Opset < 13: axis 1 of a [2, 3, 4] input means softmax over the 12 values of each row
  // of the input taken as a [2, 12] matrix, not along dimension 1 alone.
  ModelBuilder m(11);
  m.Input("x", kFloat, {2, 3, 4});
  IntAttr(m.Node("Softmax", {"x"}, {"y"}), "axis", 1);
  IntAttr(m.Node("LogSoftmax", {"x"}, {"log"}), "axis", 1);
  m.Node("Softmax", {"x"}, {"default_axis"});  // default 1 at this opset
  m.Output("y", kFloat, {2, 3, 4});
  m.Output("log", kFloat, {2, 3, 4});
  m.Output("default_axis", kFloat, {2, 3, 4});
  const std::vector<float> x = Mixed(24, 6);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3, 4})}});
  ASSERT_EQ(out.size(), 3u);
  ExpectFloats(out[0], SoftmaxRef(x, 2, 12, 1, false), {2, 3, 4});
  ExpectFloats(out[1], SoftmaxRef(x, 2, 12, 1, true), {2, 3, 4});
  ExpectFloats(out[2], SoftmaxRef(x, 2, 12, 1, false), {2, 3, 4});
}

TEST(OnnxNodeTest, ReduceSumAtOpset13TakesAxesAsAnInput) {
  ModelBuilder m(13);
  m.Input("x", kFloat, {2, 3, 4});
  m.Initializer(Int64Tensor("axes", {1}, {1}));
  m.Initializer(Int64Tensor("neg_axes", {2}, {-1, 0}));
  IntAttr(m.Node("ReduceSum", {"x", "axes"}, {"kept"}), "keepdims", 1);
  IntAttr(m.Node("ReduceSum", {"x", "neg_axes"}, {"dropped"}), "keepdims", 0);
  m.Node("ReduceSum", {"x"}, {"all"});  // no axes: every axis, keepdims 1
  IntAttr(m.Node("ReduceSum", {"x"}, {"noop"}), "noop_with_empty_axes", 1);
  m.Output("kept", kFloat, {2, 1, 4});
  m.Output("dropped", kFloat, {3});
  m.Output("all", kFloat, {1, 1, 1});
  m.Output("noop", kFloat, {2, 3, 4});
  const std::vector<float> x = Mixed(24, 8);
  const Dims dims = {2, 3, 4};
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, dims)}});
  ASSERT_EQ(out.size(), 4u);
  ExpectFloats(out[0], ReduceRef(x, dims, {1}, false), {2, 1, 4});
  ExpectFloats(out[1], ReduceRef(x, dims, {0, 2}, false), {3});
  ExpectFloats(out[2], ReduceRef(x, dims, {0, 1, 2}, false), {1, 1, 1});
  ExpectFloats(out[3], x, dims, 0);
}

TEST(OnnxNodeTest, ReduceMeanAtOpset11TakesAxesAsAnAttribute) {
  ModelBuilder m(11);
  m.Input("x", kFloat, {2, 3, 4});
  ::onnx::NodeProto* dropped = m.Node("ReduceMean", {"x"}, {"dropped"});
  IntsAttr(dropped, "axes", {0, -1});
  IntAttr(dropped, "keepdims", 0);
  IntsAttr(m.Node("ReduceMean", {"x"}, {"kept"}), "axes", {1});
  m.Output("dropped", kFloat, {3});
  m.Output("kept", kFloat, {2, 1, 4});
  const std::vector<float> x = Mixed(24, 9);
  const Dims dims = {2, 3, 4};
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, dims)}});
  ASSERT_EQ(out.size(), 2u);
  ExpectFloats(out[0], ReduceRef(x, dims, {0, 2}, true), {3});
  ExpectFloats(out[1], ReduceRef(x, dims, {1}, true), {2, 1, 4});
}

// ---------------------------------------------------------------------------------------
// Shape ops.

TEST(OnnxNodeTest, ReshapeCopiesZeroEntriesAndInfersMinusOne) {
  ModelBuilder m;
  m.Input("x", kFloat, {2, 3, 4});
  m.Initializer(Int64Tensor("s1", {2}, {0, -1}));
  m.Initializer(Int64Tensor("s2", {3}, {4, 0, -1}));
  m.Node("Reshape", {"x", "s1"}, {"a"});
  m.Node("Reshape", {"x", "s2"}, {"b"});
  m.Output("a", kFloat, {2, 12});
  m.Output("b", kFloat, {4, 3, 2});
  const std::vector<float> x = Ramp(24);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3, 4})}});
  ASSERT_EQ(out.size(), 2u);
  ExpectFloats(out[0], x, {2, 12}, 0);
  ExpectFloats(out[1], x, {4, 3, 2}, 0);
}

TEST(OnnxNodeTest, Flatten) {
  ModelBuilder m;
  m.Input("x", kFloat, {2, 3, 4});
  m.Node("Flatten", {"x"}, {"a"});  // axis 1
  IntAttr(m.Node("Flatten", {"x"}, {"b"}), "axis", 2);
  IntAttr(m.Node("Flatten", {"x"}, {"c"}), "axis", 0);
  IntAttr(m.Node("Flatten", {"x"}, {"d"}), "axis", -1);
  m.Output("a", kFloat, {2, 12});
  m.Output("b", kFloat, {6, 4});
  m.Output("c", kFloat, {1, 24});
  m.Output("d", kFloat, {6, 4});
  const std::vector<float> x = Ramp(24);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3, 4})}});
  ASSERT_EQ(out.size(), 4u);
  ExpectFloats(out[0], x, {2, 12}, 0);
  ExpectFloats(out[1], x, {6, 4}, 0);
  ExpectFloats(out[2], x, {1, 24}, 0);
  ExpectFloats(out[3], x, {6, 4}, 0);
}

TEST(OnnxNodeTest, SqueezeAndUnsqueezeAtOpset11TakeAxesAttributes) {
  ModelBuilder m(11);
  m.Input("x", kFloat, {1, 3, 1, 2});
  IntsAttr(m.Node("Squeeze", {"x"}, {"one"}), "axes", {-2});
  m.Node("Squeeze", {"x"}, {"every"});  // no axes: every size-1 dimension
  IntsAttr(m.Node("Unsqueeze", {"every"}, {"un"}), "axes", {0, 3});
  m.Output("one", kFloat, {1, 3, 2});
  m.Output("every", kFloat, {3, 2});
  m.Output("un", kFloat, {1, 3, 2, 1});
  const std::vector<float> x = Ramp(6);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {1, 3, 1, 2})}});
  ASSERT_EQ(out.size(), 3u);
  ExpectFloats(out[0], x, {1, 3, 2}, 0);
  ExpectFloats(out[1], x, {3, 2}, 0);
  ExpectFloats(out[2], x, {1, 3, 2, 1}, 0);
}

TEST(OnnxNodeTest, SqueezeAndUnsqueezeAtOpset13TakeAxesInputs) {
  ModelBuilder m(13);
  m.Input("x", kFloat, {1, 3, 1, 2});
  m.Initializer(Int64Tensor("sq", {1}, {0}));
  m.Initializer(Int64Tensor("unsq", {2}, {1, -1}));
  m.Node("Squeeze", {"x", "sq"}, {"one"});
  m.Node("Squeeze", {"x"}, {"every"});
  m.Node("Unsqueeze", {"every", "unsq"}, {"un"});
  m.Output("one", kFloat, {3, 1, 2});
  m.Output("every", kFloat, {3, 2});
  m.Output("un", kFloat, {3, 1, 2, 1});
  const std::vector<float> x = Ramp(6);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {1, 3, 1, 2})}});
  ASSERT_EQ(out.size(), 3u);
  ExpectFloats(out[0], x, {3, 1, 2}, 0);
  ExpectFloats(out[1], x, {3, 2}, 0);
  ExpectFloats(out[2], x, {3, 1, 2, 1}, 0);
}

TEST(OnnxNodeTest, Transpose) {
  ModelBuilder m;
  m.Input("x", kFloat, {2, 3, 4});
  m.Node("Transpose", {"x"}, {"reversed"});
  IntsAttr(m.Node("Transpose", {"x"}, {"given"}), "perm", {1, 0, 2});
  m.Output("reversed", kFloat, {4, 3, 2});
  m.Output("given", kFloat, {3, 2, 4});
  const std::vector<float> x = Ramp(24);
  std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3, 4})}});
  ASSERT_EQ(out.size(), 2u);
  ExpectFloats(out[0], TransposeRef(x, {2, 3, 4}, {2, 1, 0}), {4, 3, 2}, 0);
  ExpectFloats(out[1], TransposeRef(x, {2, 3, 4}, {1, 0, 2}), {3, 2, 4}, 0);
}

TEST(OnnxNodeTest, ConcatWithANegativeAxis) {
  ModelBuilder m;
  m.Input("a", kFloat, {2, 2});
  m.Input("b", kFloat, {2, 3});
  IntAttr(m.Node("Concat", {"a", "b"}, {"y"}), "axis", -1);
  m.Output("y", kFloat, {2, 5});
  const std::vector<float> a = Ramp(4, 0.0f, 1.0f), b = Ramp(6, 10.0f, 1.0f);
  std::vector<HostTensor> out = ImportAndRun(m, {{"a", F32(a, {2, 2})}, {"b", F32(b, {2, 3})}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want;
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t j = 0; j < 2; ++j) want.push_back(a[r * 2 + j]);
    for (int64_t j = 0; j < 3; ++j) want.push_back(b[r * 3 + j]);
  }
  ExpectFloats(out[0], want, {2, 5}, 0);
}

// The two halves of a [2, 4] input along axis 1.
void ExpectHalves(const std::vector<HostTensor>& out, const std::vector<float>& x) {
  ASSERT_EQ(out.size(), 2u);
  for (int64_t part = 0; part < 2; ++part) {
    std::vector<float> want;
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t j = 0; j < 2; ++j) want.push_back(x[r * 4 + part * 2 + j]);
    }
    ExpectFloats(out[part], want, {2, 2}, 0);
  }
}

TEST(OnnxNodeTest, SplitIntoEqualParts) {
  const std::vector<float> x = Ramp(8);
  {
    SCOPED_TRACE("opset 11, split attribute");
    ModelBuilder m(11);
    m.Input("x", kFloat, {2, 4});
    ::onnx::NodeProto* split = m.Node("Split", {"x"}, {"p0", "p1"});
    IntAttr(split, "axis", 1);
    IntsAttr(split, "split", {2, 2});
    m.Output("p0", kFloat, {2, 2});
    m.Output("p1", kFloat, {2, 2});
    ExpectHalves(ImportAndRun(m, {{"x", F32(x, {2, 4})}}), x);
  }
  {
    SCOPED_TRACE("opset 13, split input");
    ModelBuilder m(13);
    m.Input("x", kFloat, {2, 4});
    m.Initializer(Int64Tensor("sizes", {2}, {2, 2}));
    IntAttr(m.Node("Split", {"x", "sizes"}, {"p0", "p1"}), "axis", -1);
    m.Output("p0", kFloat, {2, 2});
    m.Output("p1", kFloat, {2, 2});
    ExpectHalves(ImportAndRun(m, {{"x", F32(x, {2, 4})}}), x);
  }
  {
    SCOPED_TRACE("opset 18, num_outputs");
    ModelBuilder m(18);
    m.Input("x", kFloat, {2, 4});
    ::onnx::NodeProto* split = m.Node("Split", {"x"}, {"p0", "p1"});
    IntAttr(split, "axis", 1);
    IntAttr(split, "num_outputs", 2);
    m.Output("p0", kFloat, {2, 2});
    m.Output("p1", kFloat, {2, 2});
    ExpectHalves(ImportAndRun(m, {{"x", F32(x, {2, 4})}}), x);
  }
}

TEST(OnnxNodeTest, SplitIntoUnequalParts) {
  const std::vector<float> x = Ramp(10);  // [2, 5]
  auto columns = [&](int64_t begin, int64_t end) {
    std::vector<float> out;
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t c = begin; c < end; ++c) out.push_back(x[static_cast<size_t>(r * 5 + c)]);
    }
    return out;
  };
  {
    SCOPED_TRACE("opset 13, sizes [1, 4]");
    ModelBuilder m(13);
    m.Input("x", kFloat, {2, 5});
    m.Initializer(Int64Tensor("sizes", {2}, {1, 4}));
    IntAttr(m.Node("Split", {"x", "sizes"}, {"p0", "p1"}), "axis", 1);
    m.Output("p0", kFloat, {2, 1});
    m.Output("p1", kFloat, {2, 4});
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 5})}});
    ASSERT_EQ(out.size(), 2u);
    ExpectFloats(out[0], columns(0, 1), {2, 1});
    ExpectFloats(out[1], columns(1, 5), {2, 4});
  }
  {
    SCOPED_TRACE("opset 18, num_outputs 3 of 5: 2, 2, 1");
    ModelBuilder m(18);
    m.Input("x", kFloat, {2, 5});
    ::onnx::NodeProto* split = m.Node("Split", {"x"}, {"p0", "p1", "p2"});
    IntAttr(split, "axis", 1);
    IntAttr(split, "num_outputs", 3);
    m.Output("p0", kFloat, {2, 2});
    m.Output("p1", kFloat, {2, 2});
    m.Output("p2", kFloat, {2, 1});
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 5})}});
    ASSERT_EQ(out.size(), 3u);
    ExpectFloats(out[0], columns(0, 2), {2, 2});
    ExpectFloats(out[1], columns(2, 4), {2, 2});
    ExpectFloats(out[2], columns(4, 5), {2, 1});
  }
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_import_test
