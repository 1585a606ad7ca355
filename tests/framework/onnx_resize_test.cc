// ONNX Resize and Upsample through the importer (framework/onnx/internal/resize_mappers.cc):
// nearest upsampling is one gather (no arithmetic op in the program) and repeats elements;
// linear downsampling with half_pixel and align_corners and cubic upsampling against values
// worked out by hand from ONNX's formulas; sizes with keep_aspect_ratio_policy; resized axes
// named by `axes`; tf_crop_and_resize's extrapolation. Scales computed at run time and an
// unknown mode are refused naming the node.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "framework/onnx/onnx_import.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_resize_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)

// A Resize of x [1, 1, h, w] at opset 19 with constant scales (or sizes when `sizes` is not
// empty) and the given string attributes.
ModelBuilder ResizeModel(const Dims& in, const Dims& out, const std::vector<float>& scales,
                         const Dims& sizes,
                         const std::vector<std::pair<std::string, std::string>>& attrs,
                         const Dims& axes = {}) {
  ModelBuilder m(19);
  m.Input("x", kFloat, std::vector<Dim>(in.begin(), in.end()));
  std::vector<std::string> inputs = {"x", "", ""};
  if (!scales.empty()) {
    m.Initializer(FloatTensor("scales", {static_cast<int64_t>(scales.size())}, scales));
    inputs[2] = "scales";
  } else {
    m.Initializer(Int64Tensor("sizes", {static_cast<int64_t>(sizes.size())}, sizes));
    inputs.push_back("sizes");
  }
  ::onnx::NodeProto* node = m.Node("Resize", inputs, {"y"}, "resize");
  for (const auto& [name, value] : attrs) {
    NewAttr(node, name, ::onnx::AttributeProto::STRING)->set_s(value);
  }
  if (!axes.empty()) IntsAttr(node, "axes", axes);
  m.Output("y", kFloat, std::vector<Dim>(out.begin(), out.end()));
  return m;
}

TEST(OnnxResizeTest, NearestUpsamplingIsOneGather) {
  const std::vector<float> x = {1, 2, 3, 4};
  ModelBuilder m = ResizeModel({1, 1, 2, 2}, {1, 1, 4, 6}, {1, 1, 2, 3}, {}, {});
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  for (const auto& op : imported->program.global_block().ops()) {
    EXPECT_EQ(op.type, "gather");
  }
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {1, 1, 2, 2})}});
  ASSERT_EQ(out.size(), 1u);
  // half_pixel, round_prefer_floor: rows 0 0 1 1; columns 0 0 0 1 1 1 (x = (j + 0.5) / 3 - 0.5).
  ExpectFloats(out[0], {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4},
               {1, 1, 4, 6});
}

TEST(OnnxResizeTest, LinearDownsamplingHalfPixelAndAlignCorners) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};  // [1, 1, 2, 4]
  {
    SCOPED_TRACE("half_pixel: out [1, 2] at source (1.5, 1.5) and (1.5, 4.5) - 1 in 1-based");
    ModelBuilder m =
        ResizeModel({1, 1, 2, 4}, {1, 1, 1, 2}, {1, 1, 0.6f, 0.6f}, {}, {{"mode", "linear"}});
    // Rows: y = 0 -> x = 0.5 / 0.6 - 0.5 = 0.3333: rows 0 and 1 with weights 2/3 and 1/3.
    // Columns: 4 * 0.6 = 2.4 -> 2 outputs at (j + 0.5) / 0.6 - 0.5: 0.3333 and 2.0.
    const double r = 0.5 / 0.6f - 0.5;
    const double c0 = 0.5 / 0.6f - 0.5;
    const double c1 = 1.5 / 0.6f - 0.5;
    auto at = [&](double row, double col) {
      auto v = [&](int i, int j) { return static_cast<double>(x[i * 4 + j]); };
      const int i0 = static_cast<int>(row), j0 = static_cast<int>(col);
      const double fi = row - i0, fj = col - j0;
      const int j1 = std::min(j0 + 1, 3);
      return (1 - fi) * ((1 - fj) * v(i0, j0) + fj * v(i0, j1)) +
             fi * ((1 - fj) * v(i0 + 1, j0) + fj * v(i0 + 1, j1));
    };
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {1, 1, 2, 4})}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], {static_cast<float>(at(r, c0)), static_cast<float>(at(r, c1))},
                 {1, 1, 1, 2});
  }
  {
    SCOPED_TRACE("align_corners: the corners are kept");
    ModelBuilder m =
        ResizeModel({1, 1, 2, 4}, {1, 1, 2, 2}, {}, {1, 1, 2, 2},
                    {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}});
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {1, 1, 2, 4})}});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], {1, 4, 5, 8}, {1, 1, 2, 2});
  }
}

TEST(OnnxResizeTest, CubicUpsamplingMatchesTheKernel) {
  // One row of 4, upsampled 2x along the last axis (axes [3]); asymmetric, so output j sits at
  // x = j / 2: even j hit a source element exactly, odd j sit halfway between two.
  const std::vector<float> x = {0, 1, 4, 9};
  ModelBuilder m =
      ResizeModel({1, 1, 1, 4}, {1, 1, 1, 8}, {2}, {},
                  {{"mode", "cubic"}, {"coordinate_transformation_mode", "asymmetric"}}, {3});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {1, 1, 1, 4})}});
  ASSERT_EQ(out.size(), 1u);
  // Keys' kernel with a = -0.75 at distances 1.5, 0.5, 0.5, 1.5: -0.09375, 0.59375 (each
  // twice); indices clamped to the edges.
  auto half = [&](int left) {
    auto v = [&](int i) { return static_cast<double>(x[std::clamp(i, 0, 3)]); };
    return static_cast<float>(-0.09375 * v(left - 1) + 0.59375 * v(left) + 0.59375 * v(left + 1) -
                              0.09375 * v(left + 2));
  };
  ExpectFloats(out[0], {0, half(0), 1, half(1), 4, half(2), 9, half(3)}, {1, 1, 1, 8}, 1e-5);
}

TEST(OnnxResizeTest, SizesWithNotLargerKeepTheAspectRatio) {
  // [2, 4] to sizes [4, 4] not_larger: scale min(2, 1) = 1, so nothing changes.
  const std::vector<float> x = Ramp(8);
  ModelBuilder m = ResizeModel({1, 1, 2, 4}, {1, 1, 2, 4}, {}, {4, 4},
                               {{"keep_aspect_ratio_policy", "not_larger"}}, {2, 3});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {1, 1, 2, 4})}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], x, {1, 1, 2, 4});
}

TEST(OnnxResizeTest, UpsampleRepeatsElements) {
  ModelBuilder m(9);
  m.Input("x", kFloat, {1, 2});
  m.Initializer(FloatTensor("scales", {2}, {2, 3}));
  m.Node("Upsample", {"x", "scales"}, {"y"});
  m.Output("y", kFloat, {2, 6});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32({5, 7}, {1, 2})}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {5, 5, 5, 7, 7, 7, 5, 5, 5, 7, 7, 7}, {2, 6});
}

TEST(OnnxResizeTest, RefusalsNameTheNode) {
  {
    SCOPED_TRACE("scales fed at run time");
    ModelBuilder m(19);
    m.Input("x", kFloat, {1, 1, 2, 2});
    m.Input("scales", kFloat, {4});
    m.Node("Resize", {"x", "", "scales"}, {"y"}, "resize");
    m.Output("y", kFloat, {1, 1, 4, 4});
    ExpectError(Import(m), absl::StatusCode::kInvalidArgument,
                {"node 'resize'", "scales", "constant_inputs"});
  }
  {
    SCOPED_TRACE("an unknown mode");
    ModelBuilder m =
        ResizeModel({1, 1, 2, 2}, {1, 1, 4, 4}, {1, 1, 2, 2}, {}, {{"mode", "bicubic"}});
    ExpectError(Import(m), absl::StatusCode::kInvalidArgument, {"node 'resize'", "bicubic"});
  }
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_resize_test
