// ONNX's trigonometric and hyperbolic functions, their inverses, Floor, Ceil and Round
// through the importer (MapUnary, framework/onnx/internal/elementwise_mappers.cc): one model
// with every node on one FLOAT input, run and checked against the C library (NaN outside a
// domain, halves to even for Round), a DOUBLE model, and the table's first opsets.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_unary_math_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)

struct Node {
  const char* type;
  double (*f)(double);
  int64_t since;  // the opset that defined the op (ONNX's operator_sets.h)
};

const Node kNodes[] = {
    {"Sin", std::sin, 7},     {"Cos", std::cos, 7},          {"Tan", std::tan, 7},
    {"Asin", std::asin, 7},   {"Acos", std::acos, 7},        {"Atan", std::atan, 7},
    {"Sinh", std::sinh, 9},   {"Cosh", std::cosh, 9},        {"Asinh", std::asinh, 9},
    {"Acosh", std::acosh, 9}, {"Atanh", std::atanh, 9},      {"Floor", std::floor, 6},
    {"Ceil", std::ceil, 6},   {"Round", std::nearbyint, 11},
};

// got[i] is want[i] within `rtol`, or NaN where want is.
template <typename T>
void ExpectValues(const HostTensor& got, const std::vector<double>& want, double rtol,
                  const std::string& what) {
  const std::vector<T> v = got.ToVector<T>();
  ASSERT_EQ(v.size(), want.size()) << what;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(v[i])) << what << " element " << i << ": " << v[i];
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(v[i], want[i]) << what << " element " << i;
    } else {
      EXPECT_NEAR(v[i], want[i], rtol * (1 + std::abs(want[i]))) << what << " element " << i;
    }
  }
}

TEST(OnnxUnaryMathTest, EveryNodeOnOneFloatInputFollowsTheCLibrary) {
  // Halves for Round, the ends of [-1, 1], values outside the inverses' domains.
  const std::vector<float> x = {-2.5f, -1.0f, -0.5f, -0.25f, 0.0f, 0.5f, 0.75f, 1.0f, 1.5f, 2.5f};
  const int64_t n = static_cast<int64_t>(x.size());
  ModelBuilder m(13);
  m.Input("x", kFloat, {n});
  for (const Node& node : kNodes) {
    const std::string out = absl::StrCat("y_", node.type);
    m.Node(node.type, {"x"}, {out});
    m.Output(out, kFloat, {n});
  }
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {n})}});
  ASSERT_EQ(out.size(), std::size(kNodes));
  for (size_t k = 0; k < std::size(kNodes); ++k) {
    std::vector<double> want;
    for (float v : x) want.push_back(static_cast<float>(kNodes[k].f(v)));
    ExpectValues<float>(out[k], want, 1e-6, kNodes[k].type);
  }
  // The rules written out: Round halves to even, Floor and Ceil, NaN outside a domain.
  EXPECT_THAT(out[13].ToVector<float>(),
              ::testing::ElementsAre(-2, -1, -0.0f, -0.0f, 0, 0, 1, 1, 2, 2));
  EXPECT_EQ(out[11].ToVector<float>()[2], -1.0f);         // Floor(-0.5)
  EXPECT_EQ(out[12].ToVector<float>()[6], 1.0f);          // Ceil(0.75)
  EXPECT_TRUE(std::isnan(out[3].ToVector<float>()[8]));   // Asin(1.5)
  EXPECT_TRUE(std::isinf(out[10].ToVector<float>()[7]));  // Atanh(1)
}

TEST(OnnxUnaryMathTest, DoubleInputsRunInDouble) {
  const std::vector<double> x = {-1.25, -0.5, 0.1, 0.5, 1.5, 3.5};
  const int64_t n = static_cast<int64_t>(x.size());
  constexpr int32_t kDouble = ::onnx::TensorProto::DOUBLE;
  ModelBuilder m(13);
  m.Input("x", kDouble, {n});
  m.Node("Tan", {"x"}, {"t"});
  m.Node("Atan", {"t"}, {"y"});  // atan(tan(x)) = x on (-pi/2, pi/2)
  m.Node("Round", {"x"}, {"r"});
  m.Output("y", kDouble, {n});
  m.Output("r", kDouble, {n});
  const std::vector<HostTensor> out =
      ImportAndRun(m, {{"x", HostTensor::FromVector(x, Shape({n}))}});
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].dtype, DataType::kF64);
  std::vector<double> want_y, want_r;
  for (double v : x) {
    want_y.push_back(std::atan(std::tan(v)));
    want_r.push_back(std::nearbyint(v));
  }
  ExpectValues<double>(out[0], want_y, 1e-15, "Atan(Tan(x))");
  ExpectValues<double>(out[1], want_r, 0, "Round(x)");
  EXPECT_NEAR(out[0].ToVector<double>()[0], -1.25, 1e-14);
  EXPECT_EQ(out[1].ToVector<double>()[5], 4.0);  // 3.5 to even
}

TEST(OnnxUnaryMathTest, TableRowsStartAtTheOpsetsThatDefinedTheOps) {
  std::vector<std::string> seen;
  for (const OnnxOpRow& row : SupportedOnnxOps()) {
    for (const Node& node : kNodes) {
      if (row.op_type != node.type) continue;
      seen.push_back(row.op_type);
      EXPECT_EQ(row.first_opset, node.since) << node.type;
    }
  }
  EXPECT_EQ(seen.size(), std::size(kNodes));
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_unary_math_test
