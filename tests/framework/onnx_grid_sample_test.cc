// ONNX GridSample through the importer (framework/onnx/internal/grid_sample_mappers.cc)
// against ONNX's reference algorithm written out here in double (denormalize, round for
// nearest, clamp or reflect the coordinate, then interpolate one axis at a time with each tap
// read under the padding mode): every mode, padding mode and align_corners on a 2-D image
// with grid points inside, on and past the borders; then the refusals, naming the node.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/onnx/onnx_import.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_grid_sample_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)

double Reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

struct Sampler {
  std::string mode, padding;
  bool align = false;
  int64_t h = 0, w = 0;
  const std::vector<float>* x = nullptr;  // one [h, w] image

  double Lo() const { return align ? 0.0 : -0.5; }
  double Hi(int64_t d) const { return align ? static_cast<double>(d - 1) : d - 0.5; }
  // The tap at integer position i of an axis of size d under the padding mode; -1: zero.
  int64_t Index(int64_t i, int64_t d) const {
    if (padding == "zeros") return i >= 0 && i < d ? i : -1;
    if (padding == "border") return std::min<int64_t>(std::max<int64_t>(i, 0), d - 1);
    return static_cast<int64_t>(Reflect(static_cast<double>(i), Lo(), Hi(d)));
  }
  double Pixel(int64_t r, int64_t c) const {
    const int64_t ri = Index(r, h), ci = Index(c, w);
    return ri < 0 || ci < 0 ? 0.0 : (*x)[ri * w + ci];
  }
  static void Coeffs(const std::string& mode, double f, double* c, int* n) {
    if (mode == "linear") {
      c[0] = 1 - f, c[1] = f, *n = 2;
      return;
    }
    const double a = -0.75;
    auto near = [&](double t) { return ((a + 2) * t - (a + 3)) * t * t + 1; };
    auto far = [&](double t) { return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a; };
    c[0] = far(f + 1), c[1] = near(f), c[2] = near(1 - f), c[3] = far(2 - f), *n = 4;
  }
  double Coordinate(double g, int64_t d) const {
    double v = align ? (g + 1) / 2 * (d - 1) : ((g + 1) * d - 1) / 2;
    if (mode == "nearest") v = std::nearbyint(v);
    if (v < Lo() || v > Hi(d)) {
      if (padding == "border") v = std::min(std::max(v, 0.0), static_cast<double>(d - 1));
      if (padding == "reflection") v = Reflect(v, Lo(), Hi(d));
    }
    return v;
  }
  double At(double gx, double gy) const {
    const double vx = Coordinate(gx, w), vy = Coordinate(gy, h);
    if (mode == "nearest") return Pixel(static_cast<int64_t>(vy), static_cast<int64_t>(vx));
    const int64_t x0 = static_cast<int64_t>(std::floor(vx)),
                  y0 = static_cast<int64_t>(std::floor(vy));
    double cx[4], cy[4];
    int n = 0;
    Coeffs(mode, vx - x0, cx, &n);
    Coeffs(mode, vy - y0, cy, &n);
    const int64_t first = n == 4 ? -1 : 0;
    double out = 0;
    for (int i = 0; i < n; ++i) {
      double row = 0;
      for (int j = 0; j < n; ++j) row += cx[j] * Pixel(y0 + first + i, x0 + first + j);
      out += cy[i] * row;
    }
    return out;
  }
};

TEST(OnnxGridSampleTest, EveryModePaddingAndAlignmentAgainstTheReference) {
  const int64_t h = 3, w = 4;
  const std::vector<float> x = Mixed(h * w, 31);
  // Grid [1, 2, 5, 2]: points inside, on the corners, and past each border (to 2.4 times).
  const std::vector<float> grid = {-1.0f, -1.0f, 1.0f,  1.0f,  0.2f,  -0.3f, -1.7f,
                                   0.4f,  2.4f,  -2.2f, 0.55f, 0.9f,  -0.9f, 1.3f,
                                   0.0f,  0.0f,  -2.6f, 3.1f,  0.33f, -0.66f};
  for (const std::string mode : {"nearest", "linear", "cubic"}) {
    for (const std::string padding : {"zeros", "border", "reflection"}) {
      for (const bool align : {false, true}) {
        SCOPED_TRACE(absl::StrCat(mode, " ", padding, " align_corners ", align));
        ModelBuilder m(20);
        m.Input("x", kFloat, {1, 1, h, w});
        m.Input("grid", kFloat, {1, 2, 5, 2});
        ::onnx::NodeProto* node = m.Node("GridSample", {"x", "grid"}, {"y"}, "gs");
        NewAttr(node, "mode", ::onnx::AttributeProto::STRING)->set_s(mode);
        NewAttr(node, "padding_mode", ::onnx::AttributeProto::STRING)->set_s(padding);
        IntAttr(node, "align_corners", align ? 1 : 0);
        m.Output("y", kFloat, {1, 1, 2, 5});
        const std::vector<HostTensor> out =
            ImportAndRun(m, {{"x", F32(x, {1, 1, h, w})}, {"grid", F32(grid, {1, 2, 5, 2})}});
        ASSERT_EQ(out.size(), 1u);
        const Sampler s{mode, padding, align, h, w, &x};
        std::vector<float> want;
        for (size_t p = 0; p < grid.size(); p += 2) {
          want.push_back(static_cast<float>(s.At(grid[p], grid[p + 1])));
        }
        ExpectFloats(out[0], want, {1, 1, 2, 5}, 1e-5);
      }
    }
  }
}

TEST(OnnxGridSampleTest, RefusalsNameTheNode) {
  ModelBuilder m(20);
  m.Input("x", kFloat, {1, 1, 3, 4});
  m.Input("grid", kFloat, {1, 2, 5, 3});  // three coordinates for two spatial axes
  m.Node("GridSample", {"x", "grid"}, {"y"}, "gs");
  m.Output("y", kFloat, {1, 1, 2, 5});
  ExpectError(Import(m), absl::StatusCode::kInvalidArgument, {"node 'gs'", "GridSample", "grid"});
  ModelBuilder bad_mode(20);
  bad_mode.Input("x", kFloat, {1, 1, 3, 4});
  bad_mode.Input("grid", kFloat, {1, 2, 5, 2});
  NewAttr(bad_mode.Node("GridSample", {"x", "grid"}, {"y"}, "gs"), "mode",
          ::onnx::AttributeProto::STRING)
      ->set_s("area");
  bad_mode.Output("y", kFloat, {1, 1, 2, 5});
  ExpectError(Import(bad_mode), absl::StatusCode::kInvalidArgument, {"node 'gs'", "'area'"});
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_grid_sample_test
