// ONNX ConvTranspose imported and run against a scatter written as loops in the test (each
// input element times the kernel, added into the output): strides, pads, dilations, groups
// and a bias; output_padding within the strides and past them; output_shape (cropping, and
// growing the output on either side); auto_pad (SAME_UPPER, SAME_LOWER and VALID, and opset
// 10's reversed split); a 1-D node; and the refusals, each naming the node.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_conv_transpose_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)
using ::testing::HasSubstr;

void StringAttr(::onnx::NodeProto* node, const std::string& name, const std::string& v) {
  NewAttr(node, name, ::onnx::AttributeProto::STRING)->set_s(v);
}

// The geometry the reference scatters with: X [n, c, h, w] element (ih, iw) times tap (i, j)
// lands on output (ih * stride - begin + i * dilation, ...), kept when inside `out` [oh, ow].
struct Scatter {
  Dims strides = {1, 1}, dilations = {1, 1};
  Dims begin = {0, 0};  // pads[start] per axis (negative: the output starts before the result)
  Dims out;             // [oh, ow]
};

// Y [n, group * ws[1], oh, ow] of X [xs] and W [ws] = [c, m / group, kh, kw], plus bias b
// (may be empty).
std::vector<float> RefConvTranspose(const std::vector<float>& x, const Dims& xs,
                                    const std::vector<float>& w, const Dims& ws,
                                    const std::vector<float>& b, int64_t group, const Scatter& s) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], mg = ws[1], m = mg * group;
  const int64_t cg = c / group, oh = s.out[0], ow = s.out[1];
  std::vector<double> y(static_cast<size_t>(n * m * oh * ow), 0.0);
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t ic = 0; ic < c; ++ic) {
      for (int64_t ih = 0; ih < h; ++ih) {
        for (int64_t iw = 0; iw < wd; ++iw) {
          const double v = x[((in * c + ic) * h + ih) * wd + iw];
          for (int64_t k = 0; k < mg; ++k) {
            const int64_t im = ic / cg * mg + k;
            for (int64_t i = 0; i < ws[2]; ++i) {
              for (int64_t j = 0; j < ws[3]; ++j) {
                const int64_t y_h = ih * s.strides[0] - s.begin[0] + i * s.dilations[0];
                const int64_t y_w = iw * s.strides[1] - s.begin[1] + j * s.dilations[1];
                if (y_h < 0 || y_h >= oh || y_w < 0 || y_w >= ow) continue;
                y[((in * m + im) * oh + y_h) * ow + y_w] +=
                    v * w[((ic * mg + k) * ws[2] + i) * ws[3] + j];
              }
            }
          }
        }
      }
    }
  }
  std::vector<float> out;
  for (size_t p = 0; p < y.size(); ++p) {
    const int64_t im = static_cast<int64_t>(p) / (oh * ow) % m;
    out.push_back(static_cast<float>(y[p] + (b.empty() ? 0.0 : b[im])));
  }
  return out;
}

// A ConvTranspose node 'convt' on input x [xs] with initializers W and (when given) B.
ModelBuilder ConvTransposeModel(const Dims& xs, const Dims& ws, const std::vector<float>& w,
                                const std::vector<float>& b, int64_t opset = 13) {
  ModelBuilder m(opset);
  m.Input("x", kFloat, {xs.begin(), xs.end()});
  m.Initializer(FloatTensor("w", ws, w));
  std::vector<std::string> inputs = {"x", "w"};
  if (!b.empty()) {
    m.Initializer(FloatTensor("b", {static_cast<int64_t>(b.size())}, b));
    inputs.push_back("b");
  }
  m.Node("ConvTranspose", inputs, {"y"}, "convt");
  m.Output("y", kFloat, std::vector<Dim>(xs.size(), Dim(int64_t{-1})));
  return m;
}

::onnx::NodeProto* NodeOf(ModelBuilder& m) { return m.graph().mutable_node(0); }

// Imports and runs `m` on x, and compares with the reference's Y [n, m, s.out...].
void ExpectMatches(const ModelBuilder& m, const std::vector<float>& x, const Dims& xs,
                   const std::vector<float>& w, const Dims& ws, const std::vector<float>& b,
                   int64_t group, const Scatter& s) {
  const std::vector<float> want = RefConvTranspose(x, xs, w, ws, b, group, s);
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], want, {xs[0], ws[1] * group, s.out[0], s.out[1]});
}

TEST(OnnxConvTransposeTest, StridesPadsDilationsGroupsAndBias) {
  const Dims xs = {2, 4, 3, 4}, ws = {4, 3, 3, 2};
  const std::vector<float> x = Mixed(NumElements(xs), 1), w = Mixed(NumElements(ws), 2);
  const std::vector<float> b = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f};
  ModelBuilder m = ConvTransposeModel(xs, ws, w, b);
  IntAttr(NodeOf(m), "group", 2);
  IntsAttr(NodeOf(m), "strides", {2, 3});
  IntsAttr(NodeOf(m), "dilations", {2, 1});
  IntsAttr(NodeOf(m), "pads", {1, 0, 2, 1});
  IntsAttr(NodeOf(m), "kernel_shape", {3, 2});
  // [2 * 2 + 2 * 2 + 1 - 1 - 2, 3 * 3 + 1 + 1 - 0 - 1] = [6, 10]
  ExpectMatches(m, x, xs, w, ws, b, 2, {{2, 3}, {2, 1}, {1, 0}, {6, 10}});
}

TEST(OnnxConvTransposeTest, OutputPaddingWithinAndPastTheStride) {
  const Dims xs = {1, 2, 3, 3}, ws = {2, 3, 2, 3};
  const std::vector<float> x = Mixed(NumElements(xs), 3), w = Mixed(NumElements(ws), 4);
  {
    SCOPED_TRACE("within the strides");  // the forward conv's geometry reaches these zeros
    ModelBuilder m = ConvTransposeModel(xs, ws, w, {});
    IntsAttr(NodeOf(m), "strides", {3, 2});
    IntsAttr(NodeOf(m), "pads", {0, 1, 0, 0});
    IntsAttr(NodeOf(m), "output_padding", {2, 1});
    // [3 * 2 + 2 + 2, 2 * 2 + 3 + 1 - 1] = [10, 7]
    ExpectMatches(m, x, xs, w, ws, {}, 1, {{3, 2}, {1, 1}, {0, 1}, {10, 7}});
  }
  {
    SCOPED_TRACE("past the strides");  // unit strides, dilations 3: concatenated zeros
    ModelBuilder m = ConvTransposeModel(xs, ws, w, {});
    IntsAttr(NodeOf(m), "dilations", {3, 3});
    IntsAttr(NodeOf(m), "pads", {0, 0, 1, 0});
    IntsAttr(NodeOf(m), "output_padding", {2, 1});
    // [2 + 3 + 1 + 2 - 1, 2 + 6 + 1 + 1] = [7, 10]
    ExpectMatches(m, x, xs, w, ws, {}, 1, {{1, 1}, {3, 3}, {0, 0}, {7, 10}});
  }
}

TEST(OnnxConvTransposeTest, OutputShapeSetsThePads) {
  const Dims xs = {1, 1, 3, 3}, ws = {1, 2, 3, 3};
  const std::vector<float> x = Mixed(NumElements(xs), 5), w = Mixed(NumElements(ws), 6);
  // The full result is [3 * 2 + 3, 2 * 2 + 3] = [9, 7]; total padding = full - output_shape,
  // its odd element at the beginning (floor division, as ONNX's reference): [8, 6] crops 1
  // at the beginning, [10, 8] adds a zero at the end, [11, 5] adds one on each side of H and
  // crops one on each side of W.
  const std::vector<std::pair<Dims, Dims>> cases = {
      {{8, 6}, {1, 1}}, {{10, 8}, {0, 0}}, {{11, 5}, {-1, 1}}};
  for (const auto& [output_shape, begin] : cases) {
    SCOPED_TRACE(output_shape[0]);
    ModelBuilder m = ConvTransposeModel(xs, ws, w, {});
    IntsAttr(NodeOf(m), "strides", {3, 2});
    IntsAttr(NodeOf(m), "output_shape", output_shape);
    IntsAttr(NodeOf(m), "pads", {5, 5, 5, 5});  // ignored with output_shape
    ExpectMatches(m, x, xs, w, ws, {}, 1, {{3, 2}, {1, 1}, begin, output_shape});
  }
  {
    SCOPED_TRACE("output_padding counts in the total");
    ModelBuilder m = ConvTransposeModel(xs, ws, w, {});
    IntsAttr(NodeOf(m), "strides", {3, 2});
    IntsAttr(NodeOf(m), "output_shape", {1, 2, 10, 8});  // with N and C, as ONNX Runtime reads
    IntsAttr(NodeOf(m), "output_padding", {1, 1});
    ExpectMatches(m, x, xs, w, ws, {}, 1, {{3, 2}, {1, 1}, {0, 0}, {10, 8}});
  }
}

TEST(OnnxConvTransposeTest, AutoPadIsResolvedAtImport) {
  const Dims xs = {1, 2, 3, 4}, ws = {2, 2, 3, 2};
  const std::vector<float> x = Mixed(NumElements(xs), 7), w = Mixed(NumElements(ws), 8);
  // strides [2, 2]: SAME_* outputs [6, 8] of the full [2 * 2 + 3, 2 * 3 + 2] = [7, 8], a
  // total padding of [1, 0]: its odd element at the end for SAME_UPPER, at the beginning for
  // SAME_LOWER; opsets 1 to 10 reverse that. VALID keeps the full result.
  struct Case {
    std::string auto_pad;
    int64_t opset;
    Dims begin, out;
  };
  const std::vector<Case> cases = {{"SAME_UPPER", 13, {0, 0}, {6, 8}},
                                   {"SAME_LOWER", 13, {1, 0}, {6, 8}},
                                   {"SAME_UPPER", 10, {1, 0}, {6, 8}},
                                   {"SAME_LOWER", 10, {0, 0}, {6, 8}},
                                   {"VALID", 13, {0, 0}, {7, 8}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.auto_pad, " at opset ", c.opset));
    ModelBuilder m = ConvTransposeModel(xs, ws, w, {}, c.opset);
    StringAttr(NodeOf(m), "auto_pad", c.auto_pad);
    IntsAttr(NodeOf(m), "strides", {2, 2});
    ExpectMatches(m, x, xs, w, ws, {}, 1, {{2, 2}, {1, 1}, c.begin, c.out});
  }
}

TEST(OnnxConvTransposeTest, OneDRunsAsTwoD) {
  const Dims xs = {2, 2, 5}, ws = {2, 2, 3};
  const std::vector<float> x = Mixed(NumElements(xs), 9), w = Mixed(NumElements(ws), 10);
  const std::vector<float> b = {0.25f, -0.5f};
  ModelBuilder m = ConvTransposeModel(xs, ws, w, b);
  IntsAttr(NodeOf(m), "strides", {2});
  IntsAttr(NodeOf(m), "pads", {1, 0});
  IntsAttr(NodeOf(m), "output_padding", {1});
  // 2 * 4 + 3 + 1 - 1 = 11, computed as [N, C, 1, L].
  const std::vector<float> want =
      RefConvTranspose(x, {2, 2, 1, 5}, w, {2, 2, 1, 3}, b, 1, {{1, 2}, {1, 1}, {0, 1}, {1, 11}});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], want, {2, 2, 11});
}

TEST(OnnxConvTransposeTest, RefusalsNameTheNode) {
  struct Case {
    std::string what;
    ModelBuilder model;
    std::vector<std::string> messages;
  };
  const std::vector<float> w54(54, 0.5f);
  std::vector<Case> cases;
  {
    ModelBuilder m =
        ConvTransposeModel({1, 1, 2, 2, 2}, {1, 1, 2, 2, 2}, std::vector<float>(8), {});
    cases.push_back({"3-D", m, {"node 'convt' (ConvTranspose", "[1, 1, 2, 2, 2]", "2-D"}});
  }
  {
    ModelBuilder m = ConvTransposeModel({1, 3, 4, 4}, {2, 3, 3, 3}, w54, {});
    cases.push_back({"channels", m, {"node 'convt'", "W has shape [2, 3, 3, 3]", "3 input"}});
  }
  {
    ModelBuilder m = ConvTransposeModel({1, 2, 4, 4}, {2, 3, 3, 3}, w54, {});
    IntAttr(NodeOf(m), "group", 3);
    cases.push_back({"group", m, {"node 'convt'", "group is 3", "must divide 2"}});
  }
  {
    ModelBuilder m = ConvTransposeModel({1, 2, 4, 4}, {2, 3, 3, 3}, w54, {});
    IntsAttr(NodeOf(m), "kernel_shape", {3, 2});
    cases.push_back({"kernel_shape", m, {"node 'convt'", "differs from W's", "[3, 3]"}});
  }
  {
    ModelBuilder m = ConvTransposeModel({1, 2, 4, 4}, {2, 3, 3, 3}, w54, {});
    IntsAttr(NodeOf(m), "output_shape", {9});
    cases.push_back({"output_shape", m, {"node 'convt'", "output_shape [9] has 1", "2 spatial"}});
  }
  {
    ModelBuilder m = ConvTransposeModel({1, 2, 4, 4}, {2, 3, 3, 3}, w54, {});
    IntsAttr(NodeOf(m), "output_padding", {1, -1});
    cases.push_back({"output_padding", m, {"node 'convt'", "output_padding [1, -1]"}});
  }
  {
    ModelBuilder m = ConvTransposeModel({1, 2, 4, 4}, {2, 3, 3, 3}, w54, {});
    IntsAttr(NodeOf(m), "pads", {3, 0, 3, 0});  // full 6, cropped to 0
    cases.push_back({"pads", m, {"node 'convt'", "axis 0", "output of size 0", "full result 6"}});
  }
  {
    ModelBuilder m = ConvTransposeModel({1, 2, 4, 4}, {2, 3, 3, 3}, w54, {});
    StringAttr(NodeOf(m), "auto_pad", "SAME");
    cases.push_back({"auto_pad", m, {"node 'convt'", "auto_pad 'SAME'"}});
  }
  {
    ModelBuilder m = ConvTransposeModel({1, 2, 4, 4}, {2, 3, 3, 3}, w54, {1.0f, 2.0f});
    cases.push_back({"bias", m, {"node 'convt'", "B has shape [2]", "must be [3]"}});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ExpectError(Import(c.model), absl::StatusCode::kInvalidArgument, c.messages);
  }
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_conv_transpose_test
