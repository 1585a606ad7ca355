// ONNX Conv, MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool imported and run
// against loops in the test: groups, strides, pads, dilations and a bias; auto_pad
// (SAME_UPPER, SAME_LOWER, VALID) resolved at import; 1-D nodes; ceil_mode and
// count_include_pad; padding that never wins a max; and the refusals, each naming the node
// (an Indices output, storage_order, 3-D inputs, a kernel_shape that is not W's).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_conv_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)
using ::testing::HasSubstr;

// Graph output `name`, FLOAT of rank `rank`, its dims left to the checker's inference.
void FloatOutput(ModelBuilder& m, const std::string& name, size_t rank) {
  m.Output(name, kFloat, std::vector<Dim>(rank, Dim(int64_t{-1})));
}

void StringAttr(::onnx::NodeProto* node, const std::string& name, const std::string& v) {
  NewAttr(node, name, ::onnx::AttributeProto::STRING)->set_s(v);
}

// A 2-D window: kernel, strides, dilations [h, w], pads [top, left, bottom, right].
struct Window {
  Dims kernel, strides, dilations, pads;
  bool ceil_mode = false;

  int64_t Out(int axis, int64_t in) const {
    const double size = static_cast<double>(in + pads[axis] + pads[axis + 2] -
                                            dilations[axis] * (kernel[axis] - 1) - 1) /
                            static_cast<double>(strides[axis]) +
                        1;
    int64_t out = static_cast<int64_t>(ceil_mode ? std::ceil(size) : std::floor(size));
    if (ceil_mode && (out - 1) * strides[axis] >= in + pads[axis]) --out;
    return out;
  }
  int64_t At(int axis, int64_t o, int64_t t) const {
    return o * strides[axis] - pads[axis] + t * dilations[axis];
  }
};

// Out [n, m, oh, ow] of X [n, c, h, w] and W [m, c / groups, kh, kw], plus bias b (may be
// empty).
std::vector<float> RefConv(const std::vector<float>& x, const Dims& xs, const std::vector<float>& w,
                           const Dims& ws, const std::vector<float>& b, int64_t groups,
                           const Window& win, Dims* out_dims) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], m = ws[0];
  const int64_t oh = win.Out(0, h), ow = win.Out(1, wd), cg = c / groups, mg = m / groups;
  *out_dims = {n, m, oh, ow};
  std::vector<float> out;
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t im = 0; im < m; ++im) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t z = 0; z < ow; ++z) {
          double acc = b.empty() ? 0.0 : b[im];
          for (int64_t cc = 0; cc < cg; ++cc) {
            for (int64_t i = 0; i < ws[2]; ++i) {
              for (int64_t j = 0; j < ws[3]; ++j) {
                const int64_t ih = win.At(0, y, i), iw = win.At(1, z, j);
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                const int64_t ic = im / mg * cg + cc;
                acc += static_cast<double>(x[((in * c + ic) * h + ih) * wd + iw]) *
                       w[((im * cg + cc) * ws[2] + i) * ws[3] + j];
              }
            }
          }
          out.push_back(static_cast<float>(acc));
        }
      }
    }
  }
  return out;
}

// A max pool (average false) or an average pool of X [n, c, h, w].
std::vector<float> RefPool(const std::vector<float>& x, const Dims& xs, const Window& win,
                           bool average, bool count_include_pad, Dims* out_dims) {
  const int64_t h = xs[2], w = xs[3], oh = win.Out(0, h), ow = win.Out(1, w);
  *out_dims = {xs[0], xs[1], oh, ow};
  std::vector<float> out;
  for (int64_t p = 0; p < xs[0] * xs[1]; ++p) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t z = 0; z < ow; ++z) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t rows = 0, cols = 0;
        for (int64_t i = 0; i < win.kernel[0]; ++i) {
          const int64_t ih = win.At(0, y, i);
          rows += count_include_pad ? (ih < h + win.pads[2]) : (ih >= 0 && ih < h);
        }
        for (int64_t j = 0; j < win.kernel[1]; ++j) {
          const int64_t iw = win.At(1, z, j);
          cols += count_include_pad ? (iw < w + win.pads[3]) : (iw >= 0 && iw < w);
        }
        for (int64_t i = 0; i < win.kernel[0]; ++i) {
          for (int64_t j = 0; j < win.kernel[1]; ++j) {
            const int64_t ih = win.At(0, y, i), iw = win.At(1, z, j);
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            const double v = x[(p * h + ih) * w + iw];
            best = std::max(best, v);
            sum += v;
          }
        }
        out.push_back(static_cast<float>(average ? sum / static_cast<double>(rows * cols) : best));
      }
    }
  }
  return out;
}

// A Conv node on input x [xs] with initializers W and (when given) B.
ModelBuilder ConvModel(const Dims& xs, const Dims& ws, const std::vector<float>& w,
                       const std::vector<float>& b, int64_t ir_version = 8) {
  ModelBuilder m(13, ir_version);
  m.Input("x", kFloat, {xs.begin(), xs.end()});
  m.Initializer(FloatTensor("w", ws, w));
  std::vector<std::string> inputs = {"x", "w"};
  if (!b.empty()) {
    m.Initializer(FloatTensor("b", {ws[0]}, b));
    inputs.push_back("b");
  }
  m.Node("Conv", inputs, {"y"}, "conv");
  FloatOutput(m, "y", xs.size());
  return m;
}

::onnx::NodeProto* NodeOf(ModelBuilder& m) { return m.graph().mutable_node(0); }

TEST(OnnxConvTest, ConvWithGroupsStridesPadsDilationsAndBias) {
  const Dims xs = {2, 4, 5, 6}, ws = {6, 2, 3, 2};
  const std::vector<float> x = Mixed(NumElements(xs), 1), w = Mixed(NumElements(ws), 2);
  const std::vector<float> b = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f};
  const Window win{{3, 2}, {2, 1}, {1, 2}, {1, 0, 2, 1}};
  ModelBuilder m = ConvModel(xs, ws, w, b);
  IntAttr(NodeOf(m), "group", 2);
  IntsAttr(NodeOf(m), "strides", win.strides);
  IntsAttr(NodeOf(m), "pads", win.pads);
  IntsAttr(NodeOf(m), "dilations", win.dilations);
  IntsAttr(NodeOf(m), "kernel_shape", {3, 2});
  Dims out_dims;
  const std::vector<float> want = RefConv(x, xs, w, ws, b, 2, win, &out_dims);
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], want, out_dims);
}

TEST(OnnxConvTest, ConvAutoPadIsResolvedAtImport) {
  const Dims xs = {1, 2, 5, 6}, ws = {3, 2, 2, 3};
  const std::vector<float> x = Mixed(NumElements(xs), 3), w = Mixed(NumElements(ws), 4);
  // strides [2, 2]: out = ceil(in / 2) = [3, 3]; total padding [2 * 2 + 2 - 5, 2 * 2 + 3 - 6]
  // = [1, 1], the odd one at the end (SAME_UPPER) or the beginning (SAME_LOWER).
  const std::vector<std::pair<std::string, Dims>> cases = {
      {"SAME_UPPER", {0, 0, 1, 1}}, {"SAME_LOWER", {1, 1, 0, 0}}, {"VALID", {0, 0, 0, 0}}};
  for (const auto& [auto_pad, pads] : cases) {
    SCOPED_TRACE(auto_pad);
    ModelBuilder m = ConvModel(xs, ws, w, {});
    StringAttr(NodeOf(m), "auto_pad", auto_pad);
    IntsAttr(NodeOf(m), "strides", {2, 2});
    Dims out_dims;
    const std::vector<float> want =
        RefConv(x, xs, w, ws, {}, 1, {{2, 3}, {2, 2}, {1, 1}, pads}, &out_dims);
    if (auto_pad != "VALID") {
      EXPECT_EQ(out_dims, (Dims{1, 3, 3, 3}));
    }
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], want, out_dims);
  }
}

// A 1-D Conv runs as the 2-D op on [N, C, 1, L].
TEST(OnnxConvTest, Conv1dRunsAsTwoD) {
  const Dims xs = {2, 3, 7}, ws = {4, 3, 3};
  const std::vector<float> x = Mixed(NumElements(xs), 5), w = Mixed(NumElements(ws), 6);
  const std::vector<float> b = {1, 2, 3, 4};
  ModelBuilder m = ConvModel(xs, ws, w, b);
  IntsAttr(NodeOf(m), "strides", {2});
  IntsAttr(NodeOf(m), "pads", {1, 2});
  Dims out_dims;
  const std::vector<float> want = RefConv(x, {2, 3, 1, 7}, w, {4, 3, 1, 3}, b, 1,
                                          {{1, 3}, {1, 2}, {1, 1}, {0, 1, 0, 2}}, &out_dims);
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], want, {out_dims[0], out_dims[1], out_dims[3]});
}

ModelBuilder PoolModel(const std::string& op, const Dims& xs, int64_t ir_version = 8) {
  ModelBuilder m(13, ir_version);
  m.Input("x", kFloat, {xs.begin(), xs.end()});
  m.Node(op, {"x"}, {"y"}, "pool");
  FloatOutput(m, "y", xs.size());
  return m;
}

TEST(OnnxConvTest, MaxPoolPaddingNeverWinsWithCeilModeAndDilations) {
  const Dims xs = {2, 3, 7, 6};
  std::vector<float> x = Mixed(NumElements(xs), 7);
  for (float& v : x) v = -std::fabs(v) - 0.5f;  // all negative: zeros would win any padding
  const Window win{{3, 2}, {2, 2}, {1, 2}, {1, 1, 2, 0}, true};
  ModelBuilder m = PoolModel("MaxPool", xs);
  IntsAttr(NodeOf(m), "kernel_shape", win.kernel);
  IntsAttr(NodeOf(m), "strides", win.strides);
  IntsAttr(NodeOf(m), "dilations", win.dilations);
  IntsAttr(NodeOf(m), "pads", win.pads);
  IntAttr(NodeOf(m), "ceil_mode", 1);
  Dims out_dims;
  const std::vector<float> want = RefPool(x, xs, win, false, false, &out_dims);
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], want, out_dims, 0);
  for (float v : out[0].ToVector<float>()) EXPECT_LT(v, 0.0f);
}

TEST(OnnxConvTest, AveragePoolCountIncludePadAndCeilMode) {
  const Dims xs = {1, 2, 5, 5};
  const std::vector<float> x = Mixed(NumElements(xs), 8);
  const Window win{{3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true};
  for (const int64_t include : {0, 1}) {
    SCOPED_TRACE(include);
    ModelBuilder m = PoolModel("AveragePool", xs);
    IntsAttr(NodeOf(m), "kernel_shape", win.kernel);
    IntsAttr(NodeOf(m), "strides", win.strides);
    IntsAttr(NodeOf(m), "pads", win.pads);
    IntAttr(NodeOf(m), "ceil_mode", 1);
    IntAttr(NodeOf(m), "count_include_pad", include);
    Dims out_dims;
    const std::vector<float> want = RefPool(x, xs, win, true, include != 0, &out_dims);
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], want, out_dims);
  }
}

TEST(OnnxConvTest, ThreeDimensionalConvAgainstLoops) {
  // X [2, 4, 5, 4, 3], W [6, 2, 2, 3, 2] in 2 groups; strides [2, 1, 1], pads
  // [1, 1, 0, 0, 1, 1], dilations [2, 1, 2]; bias.
  const Dims xs = {2, 4, 5, 4, 3}, ws = {6, 2, 2, 3, 2};
  const Dims strides = {2, 1, 1}, pads = {1, 1, 0, 0, 1, 1}, dilations = {2, 1, 2};
  const std::vector<float> x = Mixed(NumElements(xs), 21), w = Mixed(NumElements(ws), 22),
                           b = Mixed(6, 23);
  Dims out(5);
  out[0] = 2;
  out[1] = 6;
  for (int a = 0; a < 3; ++a) {
    out[2 + a] =
        (xs[2 + a] + pads[a] + pads[a + 3] - dilations[a] * (ws[2 + a] - 1) - 1) / strides[a] + 1;
  }
  std::vector<float> want;
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t m = 0; m < 6; ++m) {
      const int64_t g = m / 3;
      for (int64_t od = 0; od < out[2]; ++od) {
        for (int64_t oh = 0; oh < out[3]; ++oh) {
          for (int64_t ow = 0; ow < out[4]; ++ow) {
            double acc = b[m];
            for (int64_t cc = 0; cc < 2; ++cc) {
              for (int64_t i = 0; i < 2; ++i) {
                for (int64_t j = 0; j < 3; ++j) {
                  for (int64_t k = 0; k < 2; ++k) {
                    const int64_t id = od * strides[0] - pads[0] + i * dilations[0];
                    const int64_t ih = oh * strides[1] - pads[1] + j * dilations[1];
                    const int64_t iw = ow * strides[2] - pads[2] + k * dilations[2];
                    if (id < 0 || id >= 5 || ih < 0 || ih >= 4 || iw < 0 || iw >= 3) continue;
                    const int64_t c = g * 2 + cc;
                    acc += static_cast<double>(x[(((n * 4 + c) * 5 + id) * 4 + ih) * 3 + iw]) *
                           w[(((m * 2 + cc) * 2 + i) * 3 + j) * 2 + k];
                  }
                }
              }
            }
            want.push_back(static_cast<float>(acc));
          }
        }
      }
    }
  }
  ModelBuilder m(13);
  m.Input("x", kFloat, {xs.begin(), xs.end()});
  m.Initializer(FloatTensor("w", ws, w));
  m.Initializer(FloatTensor("b", {6}, b));
  ::onnx::NodeProto* node = m.Node("Conv", {"x", "w", "b"}, {"y"}, "conv");
  IntsAttr(node, "strides", strides);
  IntsAttr(node, "pads", pads);
  IntsAttr(node, "dilations", dilations);
  IntAttr(node, "group", 2);
  FloatOutput(m, "y", 5);
  const std::vector<HostTensor> got = ImportAndRun(m, {{"x", F32(x, xs)}});
  ASSERT_EQ(got.size(), 1u);
  ExpectFloats(got[0], want, out, 1e-5);
}

TEST(OnnxConvTest, ThreeDimensionalPoolsAgainstLoops) {
  // X [1, 2, 5, 6, 4]; kernel [2, 3, 2], strides [2, 2, 1], pads [1, 0, 1, 0, 1, 1],
  // dilations [1, 1, 2], ceil_mode; max, average with and without the padding, LpPool p = 2.
  const Dims xs = {1, 2, 5, 6, 4};
  const std::vector<float> x = Mixed(NumElements(xs), 17);
  const Dims kernel = {2, 3, 2}, strides = {2, 2, 1}, pads = {1, 0, 1, 0, 1, 1},
             dilations = {1, 1, 2};
  // Per axis a: Window's 2-D helpers over the pair (a, a): Out and At read index a and a + 2.
  auto axis_window = [&](int a) {
    return Window{{kernel[a], kernel[a]},
                  {strides[a], strides[a]},
                  {dilations[a], dilations[a]},
                  {pads[a], pads[a], pads[a + 3], pads[a + 3]},
                  true};
  };
  const Window wd = axis_window(0), wh = axis_window(1), ww = axis_window(2);
  const int64_t od = wd.Out(0, 5), oh = wh.Out(0, 6), ow = ww.Out(0, 4);
  for (const std::string op : {"MaxPool", "AveragePool0", "AveragePool1", "LpPool"}) {
    SCOPED_TRACE(op);
    const bool include = op == "AveragePool1" || op == "LpPool";
    std::vector<float> want;
    for (int64_t ch = 0; ch < 2; ++ch) {
      for (int64_t a = 0; a < od; ++a) {
        for (int64_t b = 0; b < oh; ++b) {
          for (int64_t c = 0; c < ow; ++c) {
            double best = -std::numeric_limits<double>::infinity(), sum = 0, squares = 0;
            int64_t count = 0;
            for (int64_t i = 0; i < kernel[0]; ++i) {
              for (int64_t j = 0; j < kernel[1]; ++j) {
                for (int64_t k = 0; k < kernel[2]; ++k) {
                  const int64_t id = wd.At(0, a, i), ih = wh.At(0, b, j), iw = ww.At(0, c, k);
                  const bool inside = id >= 0 && id < 5 && ih >= 0 && ih < 6 && iw >= 0 && iw < 4;
                  const bool in_pads = id < 5 + pads[3] && ih < 6 + pads[4] && iw < 4 + pads[5];
                  count += include ? in_pads : inside;
                  if (!inside) continue;
                  const double v = x[(((ch * 5 + id) * 6 + ih) * 4) + iw];
                  best = std::max(best, v);
                  sum += v;
                  squares += v * v;
                }
              }
            }
            want.push_back(static_cast<float>(op == "MaxPool"  ? best
                                              : op == "LpPool" ? std::sqrt(squares)
                                                               : sum / static_cast<double>(count)));
          }
        }
      }
    }
    // Opset 19: AveragePool's and LpPool's dilations are newer than opset 13.
    ModelBuilder m(19);
    m.Input("x", kFloat, {xs.begin(), xs.end()});
    m.Node(op.substr(0, op.size() - (op[op.size() - 1] <= '1' ? 1 : 0)), {"x"}, {"y"}, "pool");
    FloatOutput(m, "y", xs.size());
    IntsAttr(NodeOf(m), "kernel_shape", kernel);
    IntsAttr(NodeOf(m), "strides", strides);
    IntsAttr(NodeOf(m), "pads", pads);
    IntsAttr(NodeOf(m), "dilations", dilations);
    IntAttr(NodeOf(m), "ceil_mode", 1);
    if (op.rfind("AveragePool", 0) == 0) IntAttr(NodeOf(m), "count_include_pad", include);
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], want, {1, 2, od, oh, ow}, 1e-5);
  }
}

TEST(OnnxConvTest, PoolsAutoPadAndOneD) {
  const Dims xs = {1, 2, 9};
  const std::vector<float> x = Mixed(NumElements(xs), 9);
  // SAME_UPPER, kernel 4, stride 2: out ceil(9 / 2) = 5, total (5 - 1) * 2 + 4 - 9 = 3: [1, 2].
  for (const std::string op : {"MaxPool", "AveragePool"}) {
    SCOPED_TRACE(op);
    ModelBuilder m = PoolModel(op, xs);
    IntsAttr(NodeOf(m), "kernel_shape", {4});
    IntsAttr(NodeOf(m), "strides", {2});
    StringAttr(NodeOf(m), "auto_pad", "SAME_UPPER");
    Dims out_dims;
    const std::vector<float> want = RefPool(x, {1, 2, 1, 9}, {{1, 4}, {1, 2}, {1, 1}, {0, 1, 0, 2}},
                                            op == "AveragePool", false, &out_dims);
    EXPECT_EQ(out_dims[3], 5);
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, xs)}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], want, {1, 2, 5});
  }
}

TEST(OnnxConvTest, GlobalPoolsReduceEverySpatialAxis) {
  for (const Dims& xs : {Dims{2, 3, 4, 5}, Dims{2, 3, 6}}) {
    const std::vector<float> x = Mixed(NumElements(xs), 10);
    const int64_t planes = xs[0] * xs[1], size = NumElements(xs) / planes;
    std::vector<float> mean, max;
    for (int64_t p = 0; p < planes; ++p) {
      double sum = 0, best = -1e30;
      for (int64_t i = 0; i < size; ++i) {
        sum += x[p * size + i];
        best = std::max(best, static_cast<double>(x[p * size + i]));
      }
      mean.push_back(static_cast<float>(sum / static_cast<double>(size)));
      max.push_back(static_cast<float>(best));
    }
    Dims out_dims = {xs[0], xs[1]};
    out_dims.resize(xs.size(), 1);
    for (const std::string op : {"GlobalAveragePool", "GlobalMaxPool"}) {
      SCOPED_TRACE(op);
      const std::vector<HostTensor> out = ImportAndRun(PoolModel(op, xs), {{"x", F32(x, xs)}});
      ASSERT_EQ(out.size(), 1u);
      ExpectFloats(out[0], op == "GlobalMaxPool" ? max : mean, out_dims);
    }
  }
}

// The mapper's own checks are what a model newer than the linked ONNX library meets (its
// checker skipped): kNewIr marks the cases ONNX's checker would catch first.
constexpr int64_t kNewIr = 1000;

TEST(OnnxConvTest, RefusalsNameTheNode) {
  struct Case {
    std::string what;
    ModelBuilder model;
    std::vector<std::string> messages;
  };
  std::vector<Case> cases;
  {
    ModelBuilder m = PoolModel("MaxPool", {1, 1, 4, 4});
    IntsAttr(NodeOf(m), "kernel_shape", {2, 2});
    NodeOf(m)->add_output("indices");
    cases.push_back({"indices", m, {"node 'pool' (MaxPool", "Indices output"}});
  }
  {
    ModelBuilder m = PoolModel("MaxPool", {1, 1, 4, 4});
    IntsAttr(NodeOf(m), "kernel_shape", {2, 2});
    IntAttr(NodeOf(m), "storage_order", 1);
    cases.push_back({"storage_order", m, {"node 'pool'", "storage_order=1"}});
  }
  {
    ModelBuilder m = PoolModel("AveragePool", {1, 1, 3, 3, 3, 3});
    IntsAttr(NodeOf(m), "kernel_shape", {2, 2, 2, 2});
    cases.push_back({"4-D", m, {"node 'pool' (AveragePool", "[1, 1, 3, 3, 3, 3]", "3-D"}});
  }
  {
    ModelBuilder m = PoolModel("MaxPool", {1, 1, 4, 4}, kNewIr);
    cases.push_back({"no kernel", m, {"node 'pool'", "'kernel_shape' is required"}});
  }
  {
    ModelBuilder m = ConvModel({1, 2, 5, 5}, {3, 2, 3, 3}, std::vector<float>(54, 0.5f), {});
    IntsAttr(NodeOf(m), "kernel_shape", {3, 2});
    cases.push_back({"kernel_shape", m, {"node 'conv' (Conv", "differs from W's", "[3, 3]"}});
  }
  {
    ModelBuilder m =
        ConvModel({1, 2, 5, 5}, {3, 2, 3, 3}, std::vector<float>(54, 0.5f), {}, kNewIr);
    IntsAttr(NodeOf(m), "pads", {1, 1});
    cases.push_back({"pads", m, {"node 'conv'", "'pads' has 2 entries", "needs 4"}});
  }
  {
    ModelBuilder m = ConvModel({1, 2, 5, 5}, {3, 2, 3, 3}, std::vector<float>(54, 0.5f), {});
    StringAttr(NodeOf(m), "auto_pad", "SAME");
    cases.push_back({"auto_pad", m, {"node 'conv'", "auto_pad 'SAME'"}});
  }
  {
    ModelBuilder m = ConvModel({1, 4, 5, 5}, {3, 2, 3, 3}, std::vector<float>(54, 0.5f), {});
    cases.push_back({"channels", m, {"node 'conv' (Conv", "W f32[3, 2, 3, 3]", "C / groups = 4"}});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<OnnxImport> imported = Import(c.model);
    ASSERT_FALSE(imported.ok());
    EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument) << imported.status();
    for (const std::string& part : c.messages) {
      EXPECT_THAT(imported.status().message(), HasSubstr(part));
    }
  }
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_conv_test
