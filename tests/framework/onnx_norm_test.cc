// ONNX BatchNormalization (inference) and LayerNormalization imported and run against loops in
// the test, at the opsets whose attributes differ; their refusals, each naming the node
// (training_mode 1, statistics outputs, spatial 0, a Scale of the wrong shape); and integer
// Add, Sub, Mul, Div, Neg, Abs and Relu on values computed at run time (INT64 and INT32 graph
// inputs), Div truncating toward zero and failing the run on a zero divisor.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_norm_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)
using ::testing::HasSubstr;

// (x - mean) / sqrt(var + eps) * scale + b per channel of x [n, c, inner...].
std::vector<float> RefBatchNorm(const std::vector<float>& x, const Dims& xs,
                                const std::vector<float>& scale, const std::vector<float>& b,
                                const std::vector<float>& mean, const std::vector<float>& var,
                                double eps) {
  const int64_t c = xs.size() >= 2 ? xs[1] : 1;
  const int64_t inner = xs.size() >= 2 ? NumElements(xs) / (xs[0] * c) : 1;
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t ch = (static_cast<int64_t>(i) / inner) % c;
    out[i] = static_cast<float>((x[i] - mean[ch]) / std::sqrt(var[ch] + eps) * scale[ch] + b[ch]);
  }
  return out;
}

// Positive values for a variance.
std::vector<float> Positive(int64_t n, int seed) {
  std::vector<float> v = Mixed(n, seed);
  for (float& x : v) x = std::fabs(x) + 0.25f;
  return v;
}

// A BatchNormalization model at `opset` over X `xs` fed as "x", its parameters initializers.
ModelBuilder BatchNormModel(int64_t opset, const Dims& xs, const std::vector<float>& scale,
                            const std::vector<float>& b, const std::vector<float>& mean,
                            const std::vector<float>& var, ::onnx::NodeProto** node) {
  ModelBuilder m(opset);
  const int64_t c = static_cast<int64_t>(scale.size());
  m.Input("x", kFloat, std::vector<Dim>(xs.begin(), xs.end()));
  m.Initializer(FloatTensor("scale", {c}, scale));
  m.Initializer(FloatTensor("b", {c}, b));
  m.Initializer(FloatTensor("mean", {c}, mean));
  m.Initializer(FloatTensor("var", {c}, var));
  *node = m.Node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y"}, "bn");
  m.Output("y", kFloat, std::vector<Dim>(xs.begin(), xs.end()));
  return m;
}

TEST(OnnxNormTest, BatchNormalizationAtEachOpsetRange) {
  const Dims xs = {2, 3, 4, 5};
  const std::vector<float> x = Mixed(NumElements(xs), 1);
  const std::vector<float> scale = Mixed(3, 2), b = Mixed(3, 3), mean = Mixed(3, 4);
  const std::vector<float> var = Positive(3, 5);
  for (int64_t opset : {6, 7, 9, 14, 15, 28}) {
    SCOPED_TRACE(opset);
    ::onnx::NodeProto* node = nullptr;
    ModelBuilder m = BatchNormModel(opset, xs, scale, b, mean, var, &node);
    FloatAttr(node, "epsilon", 1e-3f);
    FloatAttr(node, "momentum", 0.5f);  // a training parameter: no effect here
    if (opset == 6) IntAttr(node, "is_test", 1);
    if (opset == 7) IntAttr(node, "spatial", 1);
    if (opset >= 14) IntAttr(node, "training_mode", 0);
    std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], RefBatchNorm(x, xs, scale, b, mean, var, 1e-3f), xs, 1e-5);
  }
}

TEST(OnnxNormTest, BatchNormalizationOfRankTwoAndOne) {
  for (const Dims& xs : {Dims{4, 3}, Dims{6}}) {
    const int64_t c = xs.size() >= 2 ? xs[1] : 1;
    const std::vector<float> x = Mixed(NumElements(xs), 6);
    const std::vector<float> scale = Mixed(c, 7), b = Mixed(c, 8), mean = Mixed(c, 9);
    const std::vector<float> var = Positive(c, 10);
    ::onnx::NodeProto* node = nullptr;
    ModelBuilder m = BatchNormModel(15, xs, scale, b, mean, var, &node);
    std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], RefBatchNorm(x, xs, scale, b, mean, var, 1e-5f), xs, 1e-5);
  }
}

TEST(OnnxNormTest, BatchNormalizationRefusesTraining) {
  const std::vector<float> c3 = {1, 2, 3};
  struct Case {
    int64_t opset;
    const char* attr;  // set to `value`
    int64_t value;
    int extra_outputs;  // running (and saved) statistics
    const char* message;
  };
  const Case cases[] = {
      {15, "training_mode", 1, 2, "training_mode 1"},
      {9, "", 0, 4, "output 1 ('stat1'"},
      {7, "", 0, 4, "inference imports only"},
      {7, "spatial", 0, 0, "spatial 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    ::onnx::NodeProto* node = nullptr;
    ModelBuilder m = BatchNormModel(c.opset, {2, 3, 4}, c3, c3, c3, c3, &node);
    if (*c.attr != '\0') IntAttr(node, c.attr, c.value);
    for (int i = 1; i <= c.extra_outputs; ++i) {
      node->add_output(absl::StrCat("stat", i));
      m.Output(absl::StrCat("stat", i), kFloat, {3});
    }
    absl::StatusOr<OnnxImport> imported = Import(m);
    ASSERT_FALSE(imported.ok());
    EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(imported.status().message(), HasSubstr("node 'bn' (BatchNormalization"));
    EXPECT_THAT(imported.status().message(), HasSubstr(c.message));
  }
}

// Rows of x [rows, cols] normalized: out, mean, inv_std_dev.
struct LayerNormRef {
  std::vector<float> out, mean, inv;
};

LayerNormRef RefLayerNorm(const std::vector<float>& x, int64_t rows, int64_t cols,
                          const std::vector<float>& scale, const std::vector<float>& b,
                          double eps) {
  LayerNormRef r;
  for (int64_t row = 0; row < rows; ++row) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < cols; ++j) m += x[row * cols + j];
    m /= static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) v += (x[row * cols + j] - m) * (x[row * cols + j] - m);
    const double inv = 1 / std::sqrt(v / static_cast<double>(cols) + eps);
    for (int64_t j = 0; j < cols; ++j) {
      r.out.push_back(
          static_cast<float>((x[row * cols + j] - m) * inv * scale[j] + (b.empty() ? 0.0 : b[j])));
    }
    r.mean.push_back(static_cast<float>(m));
    r.inv.push_back(static_cast<float>(inv));
  }
  return r;
}

TEST(OnnxNormTest, LayerNormalizationWithAndWithoutBiasAndStatistics) {
  const Dims xs = {2, 3, 4};
  const std::vector<float> x = Mixed(24, 11);
  struct Case {
    int64_t axis;  // 0: the attribute left out (-1)
    bool bias;
    bool statistics;
  };
  for (const Case& c :
       {Case{0, true, false}, Case{1, false, true}, Case{-2, true, true}, Case{2, false, false}}) {
    SCOPED_TRACE(::testing::Message() << "axis " << c.axis << " bias " << c.bias);
    const int64_t axis = c.axis == 0 ? 2 : (c.axis < 0 ? c.axis + 3 : c.axis);
    int64_t rows = 1, cols = 1;
    Dims normalized, stats;
    for (int64_t d = 0; d < 3; ++d) {
      (d < axis ? rows : cols) *= xs[d];
      if (d >= axis) normalized.push_back(xs[d]);
      stats.push_back(d < axis ? xs[d] : 1);
    }
    const std::vector<float> scale = Mixed(cols, 12);
    const std::vector<float> b = c.bias ? Mixed(cols, 13) : std::vector<float>{};
    ModelBuilder m(17);
    m.Input("x", kFloat, {2, 3, 4});
    m.Initializer(FloatTensor("scale", normalized, scale));
    std::vector<std::string> inputs = {"x", "scale"};
    if (c.bias) {
      m.Initializer(FloatTensor("b", normalized, b));
      inputs.push_back("b");
    }
    std::vector<std::string> outputs = {"y"};
    if (c.statistics) outputs = {"y", "mean", "inv"};
    ::onnx::NodeProto* node = m.Node("LayerNormalization", inputs, outputs, "ln");
    if (c.axis != 0) IntAttr(node, "axis", c.axis);
    FloatAttr(node, "epsilon", 1e-4f);
    IntAttr(node, "stash_type", 1);
    m.Output("y", kFloat, {2, 3, 4});
    if (c.statistics) {
      m.Output("mean", kFloat, std::vector<Dim>(stats.begin(), stats.end()));
      m.Output("inv", kFloat, std::vector<Dim>(stats.begin(), stats.end()));
    }
    std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
    ASSERT_EQ(out.size(), c.statistics ? 3u : 1u);
    const LayerNormRef want = RefLayerNorm(x, rows, cols, scale, b, 1e-4f);
    ExpectFloats(out[0], want.out, xs, 1e-5);
    if (c.statistics) {
      ExpectFloats(out[1], want.mean, stats, 1e-6);
      ExpectFloats(out[2], want.inv, stats, 1e-5);
    }
  }
}

TEST(OnnxNormTest, LayerNormalizationRefusals) {
  {  // A Scale of other dims than X's from axis on.
    ModelBuilder m(17);
    m.Input("x", kFloat, {2, 3, 4});
    m.Initializer(FloatTensor("scale", {3}, {1, 2, 3}));
    m.Node("LayerNormalization", {"x", "scale"}, {"y"}, "ln");
    m.Output("y", kFloat, {2, 3, 4});
    absl::StatusOr<OnnxImport> imported = Import(m);
    ASSERT_FALSE(imported.ok());
    EXPECT_THAT(imported.status().message(), HasSubstr("node 'ln' (LayerNormalization"));
    EXPECT_THAT(imported.status().message(), HasSubstr("input Scale f32[3] must be f32[4]"));
  }
  {  // Opset 16 has no LayerNormalization in the default domain.
    ModelBuilder m(16);
    m.Input("x", kFloat, {2, 4});
    m.Initializer(FloatTensor("scale", {4}, {1, 2, 3, 4}));
    m.Node("LayerNormalization", {"x", "scale"}, {"y"}, "ln");
    m.Output("y", kFloat, {2, 4});
    OnnxImportOptions options;
    absl::StatusOr<OnnxImport> imported = Import(m, options);
    ASSERT_FALSE(imported.ok());
    EXPECT_THAT(imported.status().message(), HasSubstr("LayerNormalization"));
  }
}

// ---------------------------------------------------------------------------------------
// Integer arithmetic on run-time values.

HostTensor I32(const std::vector<int32_t>& v, const Dims& dims) {
  return HostTensor::FromVector(v, Shape(dims));
}

TEST(OnnxNormTest, IntegerArithmeticOnComputedValues) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> a = {7, -7, 7, -7, kMin, 100, 0, 5};
  const std::vector<int64_t> b = {2, 2, -2, -2, -1, 7, 3, 1};
  ModelBuilder m(14);
  m.Input("a", kInt64, {8});
  m.Input("b", kInt64, {8});
  m.Node("Add", {"a", "b"}, {"sum"});
  m.Node("Sub", {"a", "b"}, {"diff"});
  m.Node("Mul", {"a", "b"}, {"prod"});
  m.Node("Div", {"a", "b"}, {"quot"});
  m.Node("Neg", {"a"}, {"neg"});
  m.Node("Abs", {"a"}, {"abs"});
  m.Node("Relu", {"a"}, {"relu"});
  for (const char* out : {"sum", "diff", "prod", "quot", "neg", "abs", "relu"}) {
    m.Output(out, kInt64, {8});
  }
  std::vector<HostTensor> out = ImportAndRun(m, {{"a", I64(a, {8})}, {"b", I64(b, {8})}});
  ASSERT_EQ(out.size(), 7u);
  std::vector<std::vector<int64_t>> want(7);
  for (size_t i = 0; i < a.size(); ++i) {
    const uint64_t ua = static_cast<uint64_t>(a[i]), ub = static_cast<uint64_t>(b[i]);
    want[0].push_back(static_cast<int64_t>(ua + ub));
    want[1].push_back(static_cast<int64_t>(ua - ub));
    want[2].push_back(static_cast<int64_t>(ua * ub));
    want[3].push_back(b[i] == -1 ? static_cast<int64_t>(0 - ua) : a[i] / b[i]);
    want[4].push_back(static_cast<int64_t>(0 - ua));
    want[5].push_back(a[i] < 0 ? static_cast<int64_t>(0 - ua) : a[i]);
    want[6].push_back(a[i] < 0 ? 0 : a[i]);
  }
  for (size_t k = 0; k < 7; ++k) {
    ASSERT_EQ(out[k].dtype, DataType::kI64) << k;
    EXPECT_EQ(out[k].ToVector<int64_t>(), want[k]) << "output " << k;
  }
  EXPECT_EQ(want[3][0], 3);  // truncation toward zero
  EXPECT_EQ(want[3][1], -3);
  EXPECT_EQ(want[3][4], kMin);  // lowest / -1 wraps
}

TEST(OnnxNormTest, Int32DivisionByZeroFailsTheRun) {
  ModelBuilder m(14);
  m.Input("a", kInt32, {3});
  m.Input("b", kInt32, {3});
  m.Node("Div", {"a", "b"}, {"q"});
  m.Output("q", kInt32, {3});
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  absl::StatusOr<std::vector<HostTensor>> fine =
      RunImported(*imported, {{"a", I32({9, -9, 1}, {3})}, {"b", I32({2, 2, 4}, {3})}});
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ((*fine)[0].ToVector<int32_t>(), std::vector<int32_t>({4, -4, 0}));
  absl::StatusOr<std::vector<HostTensor>> bad =
      RunImported(*imported, {{"a", I32({9, -9, 1}, {3})}, {"b", I32({2, 0, 4}, {3})}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("integer division by zero: element 1"));
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_norm_test
