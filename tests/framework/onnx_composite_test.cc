// ONNX ops the importer composes from existing Sluice ops (framework/onnx/internal/
// composite_*mappers.cc), imported and run against loops in the test: CastLike (computed and
// folded), the reductions over sum and max (axes as attribute and as input, keepdims, NaN,
// integers and bool, an empty input), RMSNormalization, Trilu, Pad in each mode (negative
// pads crop), the elementwise compositions (Sign, IsNaN, IsInf, PRelu, Shrink, Swish), the
// normalizations (LpNormalization, InstanceNormalization, GroupNormalization), Tile,
// SpaceToDepth and DepthToSpace, EyeLike. The refusals name the node and the input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_composite_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

void StringAttr(::onnx::NodeProto* node, const std::string& name, const std::string& v) {
  NewAttr(node, name, ::onnx::AttributeProto::STRING)->set_s(v);
}

// f folded over the elements of x (dims) that each output element of a reduction over `axes`
// covers, from `init`; the outputs in row-major order of the kept dimensions.
std::vector<double> ReduceRef(const std::vector<float>& x, const Dims& dims, const Dims& axes,
                              double init, const std::function<double(double, double)>& f) {
  Dims out_dims = dims;
  for (int64_t a : axes) out_dims[a] = 1;
  std::vector<double> acc(static_cast<size_t>(NumElements(out_dims)), init);
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      const int64_t coord = rest % dims[d];
      rest /= dims[d];
      o += (out_dims[d] == 1 ? 0 : coord) * stride;
      stride *= out_dims[d];
    }
    acc[o] = f(acc[o], x[i]);
  }
  return acc;
}

std::vector<float> ToFloats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

// A one-node model over x (f32, `dims`) with the node's other inputs given by the caller.
ModelBuilder OneNode(int64_t opset, const std::string& op, const Dims& dims,
                     const std::vector<std::string>& inputs, const Dims& out_dims,
                     ::onnx::NodeProto** node, int32_t out_type = kFloat) {
  ModelBuilder m(opset);
  m.Input("x", kFloat, std::vector<Dim>(dims.begin(), dims.end()));
  std::vector<std::string> all = {"x"};
  all.insert(all.end(), inputs.begin(), inputs.end());
  *node = m.Node(op, all, {"y"}, "n");
  m.Output("y", out_type, std::vector<Dim>(out_dims.begin(), out_dims.end()));
  return m;
}

TEST(OnnxCompositeTest, CastLikeTakesTheSecondInputsType) {
  ModelBuilder m(21);
  m.Input("x", kFloat, {3});
  m.Input("like", ::onnx::TensorProto::DOUBLE, {1});
  m.Initializer(FloatTensor("c", {2}, {2.75f, -1.5f}));
  m.Initializer(Int64Tensor("int_like", {1}, {0}));
  m.Node("CastLike", {"x", "like"}, {"y"});
  m.Node("CastLike", {"c", "int_like"}, {"z"});  // folded at import
  m.Output("y", ::onnx::TensorProto::DOUBLE, {3});
  m.Output("z", kInt64, {2});
  const std::vector<HostTensor> out =
      ImportAndRun(m, {{"x", F32({0.5f, -2.25f, 3.0f}, {3})},
                       {"like", HostTensor::FromVector(std::vector<double>{0.0}, Shape{1})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].ToVector<double>(), (std::vector<double>{0.5, -2.25, 3.0}));
  EXPECT_EQ(out[1].ToVector<int64_t>(), (std::vector<int64_t>{2, -1}));
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  int casts = 0;
  for (const ir::OpDesc& op : imported->program.block(0).ops()) casts += op.type == "cast";
  EXPECT_EQ(casts, 1);  // z is a constant
}

TEST(OnnxCompositeTest, SumReductionsAtBothAxesForms) {
  const Dims dims = {2, 3, 4};
  const std::vector<float> x = Mixed(24, 3);
  const auto sum = [](double a, double v) { return a + v; };
  struct Case {
    std::string op;
    std::function<double(double)> pre, post;
  };
  const std::vector<Case> cases = {
      {"ReduceSumSquare", [](double v) { return v * v; }, [](double s) { return s; }},
      {"ReduceL1", [](double v) { return std::fabs(v); }, [](double s) { return s; }},
      {"ReduceL2", [](double v) { return v * v; }, [](double s) { return std::sqrt(s); }},
      {"ReduceLogSum", [](double v) { return v + 3.0; }, [](double s) { return std::log(s); }},
      {"ReduceLogSumExp", [](double v) { return std::exp(v); },
       [](double s) { return std::log(s); }}};
  for (const Case& c : cases) {
    for (const int64_t opset : {13, 18}) {
      for (const int64_t keepdims : {0, 1}) {
        SCOPED_TRACE(c.op + " opset " + std::to_string(opset) + " keepdims " +
                     std::to_string(keepdims));
        std::vector<float> in = x;
        if (c.op == "ReduceLogSum") {
          for (float& v : in) v += 3.0f;  // positive sums
        }
        std::vector<float> pre(in.size());
        for (size_t i = 0; i < in.size(); ++i) pre[i] = static_cast<float>(c.pre(x[i]));
        std::vector<double> want = ReduceRef(pre, dims, {0, 2}, 0.0, sum);
        for (double& w : want) w = c.post(w);
        const Dims out_dims = keepdims ? Dims{1, 3, 1} : Dims{3};
        ::onnx::NodeProto* node = nullptr;
        ModelBuilder m =
            OneNode(opset, c.op, dims,
                    opset >= 18 ? std::vector<std::string>{"axes"} : std::vector<std::string>{},
                    out_dims, &node);
        if (opset >= 18) {
          m.Initializer(Int64Tensor("axes", {2}, {-1, 0}));
        } else {
          IntsAttr(node, "axes", {-1, 0});
        }
        IntAttr(node, "keepdims", keepdims);
        const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(in, dims)}});
        ASSERT_EQ(out.size(), 1u);
        ExpectFloats(out[0], ToFloats(want), out_dims, 1e-5);
      }
    }
  }
}

TEST(OnnxCompositeTest, ReduceMaxAndMinOverAxesPropagateNaN) {
  const Dims dims = {3, 4, 5};
  std::vector<float> x = Mixed(60, 5);
  x[7] = kNaN;  // element [0, 1, 2]: output element 1
  for (const std::string op : {"ReduceMax", "ReduceMin"}) {
    SCOPED_TRACE(op);
    const bool max = op == "ReduceMax";
    const std::vector<double> want =
        ReduceRef(x, dims, {0, 2}, max ? -INFINITY : INFINITY, [&](double a, double v) {
          if (std::isnan(a) || std::isnan(v)) return static_cast<double>(kNaN);
          return max ? std::max(a, v) : std::min(a, v);
        });
    ::onnx::NodeProto* node = nullptr;
    ModelBuilder m = OneNode(18, op, dims, {"axes"}, {4}, &node);
    m.Initializer(Int64Tensor("axes", {2}, {2, 0}));
    IntAttr(node, "keepdims", 0);
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, dims)}});
    ASSERT_EQ(out.size(), 1u);
    const std::vector<float> got = out[0].ToVector<float>();
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(std::isnan(got[1]));
    for (size_t i = 0; i < got.size(); ++i) {
      if (i != 1) {
        EXPECT_EQ(got[i], static_cast<float>(want[i])) << "element " << i;
      }
    }
  }
}

TEST(OnnxCompositeTest, HardmaxMarksTheFirstMaximum) {
  // [2, 3, 4] along axis 1 (opset 13), with ties: the first of the tied maxima wins.
  std::vector<float> x = Mixed(24, 9);
  x[0 * 12 + 0 * 4 + 1] = 5.0f;  // batch 0, column 1: rows 0 and 2 tie at 5
  x[0 * 12 + 2 * 4 + 1] = 5.0f;
  ModelBuilder m(13);
  m.Input("x", kFloat, {2, 3, 4});
  IntAttr(m.Node("Hardmax", {"x"}, {"y"}), "axis", 1);
  m.Output("y", kFloat, {2, 3, 4});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {2, 3, 4})}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want(24, 0.0f);
  for (int b = 0; b < 2; ++b) {
    for (int c = 0; c < 4; ++c) {
      int best = 0;
      for (int r = 1; r < 3; ++r) {
        if (x[b * 12 + r * 4 + c] > x[b * 12 + best * 4 + c]) best = r;
      }
      want[b * 12 + best * 4 + c] = 1.0f;
    }
  }
  EXPECT_EQ(want[0 * 12 + 0 * 4 + 1], 1.0f);  // the tie went to row 0
  ExpectFloats(out[0], want, {2, 3, 4}, 0.0);
}

TEST(OnnxCompositeTest, LrnSumsSquaresOverNeighbouringChannels) {
  // X [1, 5, 2]; size 4: channel c sums channels c - 1 .. c + 2 (clipped to the image).
  const std::vector<float> x = Mixed(10, 13);
  ModelBuilder m(13);
  m.Input("x", kFloat, {1, 5, 2});
  ::onnx::NodeProto* node = m.Node("LRN", {"x"}, {"y"});
  IntAttr(node, "size", 4);
  FloatAttr(node, "alpha", 0.5f);
  FloatAttr(node, "beta", 0.6f);
  FloatAttr(node, "bias", 2.0f);
  m.Output("y", kFloat, {1, 5, 2});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {1, 5, 2})}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want;
  for (int c = 0; c < 5; ++c) {
    for (int s = 0; s < 2; ++s) {
      double sum = 0;
      for (int i = std::max(0, c - 1); i <= std::min(4, c + 2); ++i) {
        sum += static_cast<double>(x[i * 2 + s]) * x[i * 2 + s];
      }
      want.push_back(static_cast<float>(x[c * 2 + s] /
                                        std::pow(2.0 + 0.5f / 4 * sum, static_cast<double>(0.6f))));
    }
  }
  ExpectFloats(out[0], want, {1, 5, 2}, 1e-5);
}

TEST(OnnxCompositeTest, SwiGluGatesTheValue) {
  const std::vector<float> a = Mixed(6, 3), b = Mixed(6, 4);
  ModelBuilder m(28);
  m.Input("a", kFloat, {2, 3});
  m.Input("b", kFloat, {2, 3});
  FloatAttr(m.Node("SwiGLU", {"a", "b"}, {"y"}), "alpha", 1.5f);
  m.Output("y", kFloat, {2, 3});
  const std::vector<HostTensor> out =
      ImportAndRun(m, {{"a", F32(a, {2, 3})}, {"b", F32(b, {2, 3})}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want;
  for (size_t i = 0; i < a.size(); ++i) {
    want.push_back(static_cast<float>(a[i] / (1 + std::exp(-1.5 * a[i])) * b[i]));
  }
  ExpectFloats(out[0], want, {2, 3}, 1e-5);
}

TEST(OnnxCompositeTest, ReduceMaxOfIntegersBoolsAndAnEmptyInput) {
  ModelBuilder m(20);
  m.Input("i", kInt64, {2, 3});
  m.Input("b", kBool, {2, 2});
  m.Input("e", kFloat, {2, 0});
  m.Initializer(Int64Tensor("axis1", {1}, {1}));
  m.Node("ReduceMin", {"i", "axis1"}, {"imin"});
  m.Node("ReduceMax", {"b", "axis1"}, {"bmax"});
  m.Node("ReduceMax", {"e", "axis1"}, {"emax"});
  m.Output("imin", kInt64, {2, 1});
  m.Output("bmax", kBool, {2, 1});
  m.Output("emax", kFloat, {2, 1});
  const std::vector<HostTensor> out =
      ImportAndRun(m, {{"i", I64({5, -7, 3, int64_t{1} << 40, 9, 2}, {2, 3})},
                       {"b", Bools({false, false, true, false}, {2, 2})},
                       {"e", F32({}, {2, 0})}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].ToVector<int64_t>(), (std::vector<int64_t>{-7, 2}));
  EXPECT_EQ(BoolValues(out[1]), (std::vector<bool>{false, true}));
  EXPECT_EQ(out[2].ToVector<float>(), (std::vector<float>{-kInf, -kInf}));
}

TEST(OnnxCompositeTest, RMSNormalizationOverTheTrailingAxes) {
  const Dims dims = {2, 3, 4};
  const std::vector<float> x = Mixed(24, 7), scale = Mixed(12, 8);
  ::onnx::NodeProto* node = nullptr;
  ModelBuilder m = OneNode(23, "RMSNormalization", dims, {"scale"}, dims, &node);
  m.Initializer(FloatTensor("scale", {3, 4}, scale));
  IntAttr(node, "axis", -2);
  FloatAttr(node, "epsilon", 1e-3f);
  std::vector<float> want(24);
  for (int64_t b = 0; b < 2; ++b) {
    double ms = 0;
    for (int64_t i = 0; i < 12; ++i) ms += x[b * 12 + i] * x[b * 12 + i] / 12.0;
    for (int64_t i = 0; i < 12; ++i) {
      want[b * 12 + i] = static_cast<float>(x[b * 12 + i] / std::sqrt(ms + 1e-3f) * scale[i]);
    }
  }
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, dims)}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], want, dims, 1e-5);
}

TEST(OnnxCompositeTest, TriluKeepsATriangle) {
  const Dims dims = {2, 3, 4};
  const std::vector<float> x = Ramp(24, 1.0f, 1.0f);
  for (const int64_t upper : {0, 1}) {
    for (const int64_t k : {-1, 0, 2}) {
      SCOPED_TRACE(std::to_string(upper) + " k " + std::to_string(k));
      ::onnx::NodeProto* node = nullptr;
      ModelBuilder m = OneNode(14, "Trilu", dims, {"k"}, dims, &node);
      m.Initializer(Int64Tensor("k", {}, {k}));
      IntAttr(node, "upper", upper);
      std::vector<float> want(24);
      for (int64_t i = 0; i < 24; ++i) {
        const int64_t r = (i / 4) % 3, c = i % 4;
        want[i] = (upper ? c - r >= k : c - r <= k) ? x[i] : 0.0f;
      }
      const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, dims)}});
      ASSERT_EQ(out.size(), 1u);
      ExpectFloats(out[0], want, dims, 0);
    }
  }
}

TEST(OnnxCompositeTest, PadInEachModeAndCropsNegativePads) {
  const Dims dims = {2, 3};
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  // Axis 1 padded by 2 before and 3 after; axis 0 cropped by 1 at the end (constant mode)
  // or padded by 1 before (the others).
  struct Case {
    std::string mode;
    std::vector<int64_t> rows;  // source rows (-1: the constant)
    std::vector<int64_t> cols;
  };
  const std::vector<Case> cases = {{"constant", {0}, {-1, -1, 0, 1, 2, -1, -1, -1}},
                                   {"edge", {0, 0, 1}, {0, 0, 0, 1, 2, 2, 2, 2}},
                                   {"reflect", {1, 0, 1}, {2, 1, 0, 1, 2, 1, 0, 1}},
                                   {"wrap", {1, 0, 1}, {1, 2, 0, 1, 2, 0, 1, 2}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mode);
    const Dims out_dims = {static_cast<int64_t>(c.rows.size()), 8};
    ::onnx::NodeProto* node = nullptr;
    ModelBuilder m = OneNode(19, "Pad", dims, {"pads", "value"}, out_dims, &node);
    const int64_t top = c.mode == "constant" ? 0 : 1, bottom = c.mode == "constant" ? -1 : 0;
    m.Initializer(Int64Tensor("pads", {4}, {top, 2, bottom, 3}));
    m.Initializer(FloatTensor("value", {}, {-9.0f}));
    StringAttr(node, "mode", c.mode);
    std::vector<float> want;
    for (int64_t r : c.rows) {
      for (int64_t col : c.cols) want.push_back(col < 0 ? -9.0f : x[r * 3 + col]);
    }
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, dims)}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], want, out_dims, 0);
  }
}

TEST(OnnxCompositeTest, ElementwiseCompositions) {
  const std::vector<float> x = {-3.0f, -0.5f, 0.0f, 0.25f, 2.0f, kNaN, kInf, -kInf};
  const Dims dims = {8};
  const std::vector<float> slope = {0.5f};
  ModelBuilder m(24);
  m.Input("x", kFloat, {8});
  m.Initializer(FloatTensor("slope", {1}, slope));
  m.Node("Sign", {"x"}, {"sign"});
  m.Node("IsNaN", {"x"}, {"nan"});
  IntAttr(m.Node("IsInf", {"x"}, {"neg_inf"}), "detect_positive", 0);
  m.Node("PRelu", {"x", "slope"}, {"prelu"});
  auto* shrink = m.Node("Shrink", {"x"}, {"shrink"});
  FloatAttr(shrink, "lambd", 1.0f);
  FloatAttr(shrink, "bias", 0.5f);
  FloatAttr(m.Node("Swish", {"x"}, {"swish"}), "alpha", 2.0f);
  for (const char* name : {"sign", "prelu", "shrink", "swish"}) m.Output(name, kFloat, {8});
  m.Output("nan", kBool, {8});
  m.Output("neg_inf", kBool, {8});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, dims)}});
  ASSERT_EQ(out.size(), 6u);
  const std::vector<float> sign = out[0].ToVector<float>(), prelu = out[1].ToVector<float>();
  const std::vector<float> shrunk = out[2].ToVector<float>(), swish = out[3].ToVector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE(x[i]);
    const float v = x[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(sign[i]) && std::isnan(prelu[i]) && std::isnan(swish[i]));
      EXPECT_EQ(shrunk[i], 0.0f);
      continue;
    }
    EXPECT_EQ(sign[i], v > 0 ? 1.0f : (v < 0 ? -1.0f : 0.0f));
    EXPECT_EQ(prelu[i], v < 0 ? v * 0.5f : v);
    EXPECT_EQ(shrunk[i], v < -1.0f ? v + 0.5f : (v > 1.0f ? v - 0.5f : 0.0f));
    if (std::isfinite(v)) {
      EXPECT_NEAR(swish[i], v / (1.0 + std::exp(-2.0 * v)), 1e-6);
    }
  }
  std::vector<bool> nan, neg_inf;
  for (float v : x) {
    nan.push_back(std::isnan(v));
    neg_inf.push_back(v == -kInf);
  }
  EXPECT_EQ(BoolValues(out[4]), nan);
  EXPECT_EQ(BoolValues(out[5]), neg_inf);
}

TEST(OnnxCompositeTest, InstanceAndGroupAndLpNormalization) {
  const Dims dims = {2, 4, 3};
  const std::vector<float> x = Mixed(24, 11), scale = Mixed(4, 12), bias = Mixed(4, 13);
  ModelBuilder m(22);
  m.Input("x", kFloat, {2, 4, 3});
  m.Initializer(FloatTensor("scale", {4}, scale));
  m.Initializer(FloatTensor("bias", {4}, bias));
  m.Node("InstanceNormalization", {"x", "scale", "bias"}, {"inst"});
  IntAttr(m.Node("GroupNormalization", {"x", "scale", "bias"}, {"group"}), "num_groups", 2);
  auto* lp = m.Node("LpNormalization", {"x"}, {"lp"});
  IntAttr(lp, "axis", 1);
  IntAttr(lp, "p", 1);
  for (const char* name : {"inst", "group", "lp"}) m.Output(name, kFloat, {2, 4, 3});
  // Standardized over `len` elements from `start` (eps 1e-5), scaled per channel.
  auto standardize = [&](std::vector<float>& out, int64_t start, int64_t len) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < len; ++i) mean += x[start + i] / static_cast<double>(len);
    for (int64_t i = 0; i < len; ++i) {
      var += (x[start + i] - mean) * (x[start + i] - mean) / static_cast<double>(len);
    }
    for (int64_t i = 0; i < len; ++i) {
      const int64_t c = ((start + i) / 3) % 4;
      out[start + i] =
          static_cast<float>((x[start + i] - mean) / std::sqrt(var + 1e-5) * scale[c] + bias[c]);
    }
  };
  std::vector<float> inst(24), group(24), lp_want(24);
  for (int64_t s = 0; s < 24; s += 3) standardize(inst, s, 3);
  for (int64_t s = 0; s < 24; s += 6) standardize(group, s, 6);
  for (int64_t i = 0; i < 24; ++i) {
    const int64_t n = i / 12, col = i % 3;
    double norm = 0;
    for (int64_t c = 0; c < 4; ++c) norm += std::fabs(x[n * 12 + c * 3 + col]);
    lp_want[i] = static_cast<float>(x[i] / norm);
  }
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, dims)}});
  ASSERT_EQ(out.size(), 3u);
  ExpectFloats(out[0], inst, dims, 1e-4);
  ExpectFloats(out[1], group, dims, 1e-4);
  ExpectFloats(out[2], lp_want, dims, 1e-5);
}

TEST(OnnxCompositeTest, TileSpaceToDepthDepthToSpaceAndEyeLike) {
  ModelBuilder m(13);
  m.Input("x", kFloat, {1, 2, 4, 6});
  m.Initializer(Int64Tensor("repeats", {4}, {2, 1, 1, 2}));
  m.Initializer(FloatTensor("square", {3, 4}, std::vector<float>(12, 7.0f)));
  m.Node("Tile", {"x", "repeats"}, {"tiled"});
  IntAttr(m.Node("SpaceToDepth", {"x"}, {"deep"}), "blocksize", 2);
  auto* back = m.Node("DepthToSpace", {"deep"}, {"back"});
  IntAttr(back, "blocksize", 2);
  StringAttr(back, "mode", "DCR");
  IntAttr(m.Node("EyeLike", {"square"}, {"eye"}), "k", 1);
  m.Output("tiled", kFloat, {2, 2, 4, 12});
  m.Output("deep", kFloat, {1, 8, 2, 3});
  m.Output("back", kFloat, {1, 2, 4, 6});
  m.Output("eye", kFloat, {3, 4});
  const std::vector<float> x = Ramp(48, 0.0f, 1.0f);
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {1, 2, 4, 6})}});
  ASSERT_EQ(out.size(), 4u);
  std::vector<float> tiled, deep(48), eye(12, 0.0f);
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t ch = 0; ch < 8; ++ch) {  // (c, h) pairs
      for (int64_t w = 0; w < 12; ++w) tiled.push_back(x[ch * 6 + w % 6]);
    }
  }
  // SpaceToDepth (DCR): out[0, (bh * 2 + bw) * 2 + c, h, w] = x[0, c, 2h + bh, 2w + bw].
  for (int64_t oc = 0; oc < 8; ++oc) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t w = 0; w < 3; ++w) {
        const int64_t c = oc % 2, bw = (oc / 2) % 2, bh = oc / 4;
        deep[(oc * 2 + h) * 3 + w] = x[(c * 4 + 2 * h + bh) * 6 + 2 * w + bw];
      }
    }
  }
  for (int64_t i = 0; i < 3; ++i) eye[i * 4 + i + 1] = 1.0f;
  ExpectFloats(out[0], tiled, {2, 2, 4, 12}, 0);
  ExpectFloats(out[1], deep, {1, 8, 2, 3}, 0);
  ExpectFloats(out[2], x, {1, 2, 4, 6}, 0);
  ExpectFloats(out[3], eye, {3, 4}, 0);
}

TEST(OnnxCompositeTest, RefusalsNameTheNodeAndInput) {
  {  // pads computed at run time
    ModelBuilder m(18);
    m.Input("x", kFloat, {2, 3});
    m.Input("pads", kInt64, {4});
    m.Node("Pad", {"x", "pads"}, {"y"}, "pad");
    m.Output("y", kFloat, {-1, -1});
    absl::StatusOr<OnnxImport> imported = Import(m);
    ASSERT_FALSE(imported.ok());
    EXPECT_THAT(imported.status().message(), HasSubstr("node 'pad' (Pad, opset 18)"));
    EXPECT_THAT(imported.status().message(), HasSubstr("'pads' (pads) must be a constant"));
  }
  {  // wrap before opset 19
    ModelBuilder m(18);
    m.Input("x", kFloat, {2, 3});
    m.Initializer(Int64Tensor("pads", {4}, {0, 1, 0, 1}));
    StringAttr(m.Node("Pad", {"x", "pads"}, {"y"}, "pad"), "mode", "wrap");
    m.Output("y", kFloat, {2, 5});
    absl::StatusOr<OnnxImport> imported = Import(m);
    ASSERT_FALSE(imported.ok());
    EXPECT_THAT(imported.status().message(), HasSubstr("mode 'wrap' is not one of"));
  }
  {  // RMSNormalization's stash_type
    ::onnx::NodeProto* node = nullptr;
    ModelBuilder m = OneNode(23, "RMSNormalization", {2, 3}, {"scale"}, {2, 3}, &node);
    m.Initializer(FloatTensor("scale", {3}, {1, 1, 1}));
    IntAttr(node, "stash_type", ::onnx::TensorProto::INT32);
    absl::StatusOr<OnnxImport> imported = Import(m);
    ASSERT_FALSE(imported.ok());
    EXPECT_THAT(imported.status().message(), HasSubstr("node 'n' (RMSNormalization, opset 23)"));
    EXPECT_THAT(imported.status().message(), HasSubstr("stash_type 6"));
  }
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_composite_test
