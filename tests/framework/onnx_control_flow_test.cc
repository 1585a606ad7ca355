// ONNX control flow and inputs fixed at import: If (tests/data/onnx/if.onnx) and Loop
// (loop.onnx) run against values computed here, both branches of the If included; the
// refusals name the node (branches that differ, scan outputs); a graph input that an op
// takes as an attribute asks for constant_inputs, and imports and runs once it is given.
#include <string>
#include <vector>

#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_control_flow_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)
using ::testing::HasSubstr;

std::string DataPath(const std::string& name) {
  return std::string(SLUICE_SOURCE_DIR) + "/tests/data/onnx/" + name;
}

std::vector<HostTensor> RunFile(const std::string& name, const HostTensor& x) {
  absl::StatusOr<OnnxImport> imported = ImportOnnxFile(DataPath(name), Runtime::Get().registry());
  EXPECT_TRUE(imported.ok()) << imported.status();
  if (!imported.ok()) return {};
  absl::StatusOr<std::vector<HostTensor>> out = RunImported(*imported, {{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : std::vector<HostTensor>{};
}

TEST(OnnxControlFlowTest, IfTakesTheBranchTheConditionPicks) {
  for (const float sign : {1.0f, -1.0f}) {
    std::vector<float> x(6);
    for (int i = 0; i < 6; ++i) x[i] = sign * (static_cast<float>(i) - 1.0f);
    float sum = 0;
    for (float v : x) sum += v;
    std::vector<float> want(6);
    for (int i = 0; i < 6; ++i) want[i] = sum > 0 ? std::max(x[i], 0.0f) * 2.0f : x[i] - 1.0f;
    const std::vector<HostTensor> out = RunFile("if.onnx", F32(x, {2, 3}));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].ToVector<float>(), want) << "sign " << sign;
  }
}

TEST(OnnxControlFlowTest, LoopRunsItsTripCount) {
  std::vector<float> x(6);
  for (int i = 0; i < 6; ++i) x[i] = 0.5f * static_cast<float>(i) - 1.0f;
  std::vector<float> a(6, 0.0f);
  for (int64_t it = 0; it < 5; ++it) {
    for (int j = 0; j < 6; ++j) a[j] = (a[j] * 0.5f + x[j]) + static_cast<float>(it);
  }
  const std::vector<HostTensor> out = RunFile("loop.onnx", F32(x, {2, 3}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ToVector<float>(), a);
}

// then: x (shape [2]); else: Concat(x, x) (shape [4]).
TEST(OnnxControlFlowTest, BranchesOfDifferentShapesAreRefused) {
  ModelBuilder m;
  m.Input("x", kFloat, {2});
  m.Input("c", kBool, {});
  m.Output("y", kFloat, {2});
  ::onnx::NodeProto* node = m.Node("If", {"c"}, {"y"}, "pick");
  ::onnx::GraphProto then_graph, else_graph;
  then_graph.set_name("then");
  auto* id = then_graph.add_node();
  id->set_op_type("Identity");
  id->add_input("x");
  id->add_output("t");
  then_graph.add_output()->set_name("t");
  else_graph.set_name("else");
  auto* cat = else_graph.add_node();
  cat->set_op_type("Concat");
  cat->add_input("x");
  cat->add_input("x");
  cat->add_output("e");
  IntAttr(cat, "axis", 0);
  else_graph.add_output()->set_name("e");
  for (auto [name, g] : {std::pair{"then_branch", &then_graph}, {"else_branch", &else_graph}}) {
    auto* attr = NewAttr(node, name, ::onnx::AttributeProto::GRAPH);
    *attr->mutable_g() = *g;
  }
  // A model newer than the linked checker, so the importer's own error shows.
  m.model().set_ir_version(10);
  m.model().mutable_opset_import(0)->set_version(21);
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("node 'pick' (If, opset 21)"));
}

// y = Reshape(x, shape) with `shape` a graph input.
ModelBuilder ReshapeOfFedShape() {
  ModelBuilder m;
  m.Input("x", kFloat, {2, 3});
  m.Input("shape", kInt64, {2});
  m.Output("y", kFloat, {3, 2});
  m.Node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  return m;
}

TEST(OnnxControlFlowTest, AnInputTakenAsAnAttributeAsksForConstantInputs) {
  absl::StatusOr<OnnxImport> imported = Import(ReshapeOfFedShape());
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(imported.status().message(),
              HasSubstr("graph input 'shape' can be fixed at import (constant_inputs)"));
  OnnxImportOptions options;
  options.constant_inputs["shape"] = I64({3, 2}, {2});
  const std::vector<HostTensor> out =
      ImportAndRun(ReshapeOfFedShape(), {{"x", F32(Ramp(6), {2, 3})}}, options);
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], Ramp(6), {3, 2}, 0);
  absl::StatusOr<OnnxImport> fixed = Import(ReshapeOfFedShape(), options);
  ASSERT_TRUE(fixed.ok());
  ASSERT_EQ(fixed->inputs.size(), 1u);  // `shape` is no longer fed
  EXPECT_EQ(fixed->inputs[0].onnx_name, "x");
  options.constant_inputs["shape"] = F32({3, 2}, {2});
  absl::StatusOr<OnnxImport> wrong = Import(ReshapeOfFedShape(), options);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("graph input 'shape' is i64"));
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_control_flow_test
