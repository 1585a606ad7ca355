// The importer's limits on what a model's values may ask of it (framework/onnx/internal/): each
// case once crashed, overflowed, allocated without bound or computed the wrong thing, and is
// now refused naming the node, or imports and runs. Opsets newer than the linked ONNX (18 on)
// skip ONNX's checker, so the importer's own checks are what is tested.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "framework/onnx/onnx_import.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_limits_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)

void StringAttr(::onnx::NodeProto* node, const std::string& name, const std::string& v) {
  NewAttr(node, name, ::onnx::AttributeProto::STRING)->set_s(v);
}

TEST(OnnxLimitsTest, ResizeRefusesWhatItCannotComputeAndExtrapolatesEverything) {
  auto resize = [](const std::vector<float>& roi, const Dims& axes, const Dims& x_dims) {
    ModelBuilder m(19);
    m.Input("x", kFloat, {x_dims.begin(), x_dims.end()});
    m.Initializer(FloatTensor("roi", {static_cast<int64_t>(roi.size())}, roi));
    m.Initializer(Int64Tensor("sizes", {static_cast<int64_t>(axes.size())},
                              std::vector<int64_t>(axes.size(), 3)));
    ::onnx::NodeProto* node = m.Node("Resize", {"x", "roi", "", "sizes"}, {"y"}, "resize");
    StringAttr(node, "mode", "linear");
    StringAttr(node, "coordinate_transformation_mode", "tf_crop_and_resize");
    FloatAttr(node, "extrapolation_value", 7.5f);
    IntsAttr(node, "axes", axes);
    m.Output("y", kFloat, {1, 1, 3, 3});
    return m;
  };
  ExpectError(Import(resize({0, 0, 1, 1}, {2, 2}, {1, 1, 4, 4})),
              absl::StatusCode::kInvalidArgument, {"node 'resize'", "axis 2 twice"});
  ExpectError(Import(resize({0, 0, 1, 1}, {2, 3}, {1, 1, 0, 4})),
              absl::StatusCode::kInvalidArgument, {"node 'resize'", "empty"});
  ExpectError(Import(resize({0, std::nanf(""), 1, 1}, {2, 3}, {1, 1, 4, 4})),
              absl::StatusCode::kInvalidArgument, {"node 'resize'", "roi"});
  // A region of interest wholly past the input: every output point is the extrapolation.
  const std::vector<HostTensor> out = ImportAndRun(resize({2, 2, 3, 3}, {2, 3}, {1, 1, 4, 4}),
                                                   {{"x", F32(Ramp(16), {1, 1, 4, 4})}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], std::vector<float>(9, 7.5f), {1, 1, 3, 3});
}

TEST(OnnxLimitsTest, EmptyInputsDoNotDivideByZero) {
  {
    SCOPED_TRACE("LRN over [0, 3, 2]");
    ModelBuilder m(13);
    m.Input("x", kFloat, {0, 3, 2});
    IntAttr(m.Node("LRN", {"x"}, {"y"}), "size", 3);
    m.Output("y", kFloat, {0, 3, 2});
    EXPECT_TRUE(Import(m).ok()) << Import(m).status();
  }
  {
    SCOPED_TRACE("Hardmax (opset 11) over [0, 4] at axis 1");
    ModelBuilder m(11);
    m.Input("x", kFloat, {0, 4});
    IntAttr(m.Node("Hardmax", {"x"}, {"y"}), "axis", 1);
    m.Output("y", kFloat, {0, 4});
    EXPECT_TRUE(Import(m).ok()) << Import(m).status();
  }
}

TEST(OnnxLimitsTest, WindowAttributesAreBounded) {
  {
    SCOPED_TRACE("a kernel whose volume overflows");
    ModelBuilder m(18);
    m.Input("x", kFloat, {1, 1, 4, 4});
    IntsAttr(m.Node("MaxPool", {"x"}, {"y"}, "pool"), "kernel_shape",
             {int64_t{3037000500}, int64_t{3037000500}});
    m.Output("y", kFloat, {1, 1, 1, 1});
    ExpectError(Import(m), absl::StatusCode::kInvalidArgument, {"node 'pool'", "kernel_shape"});
  }
  {
    SCOPED_TRACE("a 3-D Conv with a negative depth pad");
    ModelBuilder m(18);
    m.Input("x", kFloat, {1, 1, 4, 3, 3});
    m.Initializer(FloatTensor("w", {1, 1, 2, 1, 1}, {1, 1}));
    IntsAttr(m.Node("Conv", {"x", "w"}, {"y"}, "conv"), "pads", {-1, 0, 0, 0, 0, 0});
    m.Output("y", kFloat, {1, 1, 2, 3, 3});
    ExpectError(Import(m), absl::StatusCode::kInvalidArgument, {"node 'conv'", "not negative"});
  }
  {
    SCOPED_TRACE("LpPool with ceil_mode whose last window passes the padding");
    ModelBuilder m(18);
    m.Input("x", kFloat, {1, 1, 5, 5});
    ::onnx::NodeProto* node = m.Node("LpPool", {"x"}, {"y"}, "lp");
    IntsAttr(node, "kernel_shape", {2, 2});
    IntsAttr(node, "strides", {2, 2});
    IntAttr(node, "ceil_mode", 1);
    m.Output("y", kFloat, {1, 1, 3, 3});
    ExpectError(Import(m), absl::StatusCode::kInvalidArgument, {"node 'lp'", "ceil_mode"});
  }
}

TEST(OnnxLimitsTest, AttentionHeadRatioIsBounded) {
  // Empty sequences make a huge head count a valid shape; repeating K's head 8192 times is
  // refused instead of made.
  ModelBuilder m(23);
  m.Input("q", kFloat, {1, 8192, 0, 4});
  m.Input("k", kFloat, {1, 1, 0, 4});
  m.Input("v", kFloat, {1, 1, 0, 4});
  m.Node("Attention", {"q", "k", "v"}, {"y"}, "attn");
  m.Output("y", kFloat, {1, 8192, 0, 4});
  ExpectError(Import(m), absl::StatusCode::kInvalidArgument, {"node 'attn'", "8192"});
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_limits_test
