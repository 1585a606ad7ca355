// More ONNX ops the importer composes from existing Sluice ops (framework/onnx/internal/
// composite_*mappers.cc) and the constant folds they rely on, against loops in the test:
// Expand of a computed input (a where that broadcasts); GatherElements with computed and
// constant indices (negative ones wrap; out of range fails the run, or the import for a
// constant); Mod of integers computed at run time (both fmod values, mixed signs) and of
// constant floats (folded); comparisons, And, Or, Xor, Not, Max and Min of constants folding
// at import (no op in the program). The refusals name the node.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_composite_index_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)
using ::testing::HasSubstr;

TEST(OnnxCompositeIndexTest, ExpandBroadcastsAComputedInput) {
  ModelBuilder m;
  m.Input("x", kFloat, {3, 1});
  m.Initializer(Int64Tensor("shape", {3}, {2, 1, 4}));
  m.Node("Expand", {"x", "shape"}, {"y"});
  m.Output("y", kFloat, {2, 3, 4});
  const std::vector<float> x = {1.5f, -0.0f, 7.0f};
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {3, 1})}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want;
  for (int n = 0; n < 2; ++n) {
    for (float v : x) want.insert(want.end(), 4, v);
  }
  ExpectFloats(out[0], want, {2, 3, 4}, 0);
  EXPECT_TRUE(std::signbit(out[0].ToVector<float>()[4]));  // -0 copied as it is
}

// data [3, 4] along `axis` at indices [2, 3] (negative ones count from the end).
std::vector<float> GatherElementsRef(const std::vector<float>& data,
                                     const std::vector<int64_t>& idx, int64_t axis) {
  std::vector<float> out;
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 3; ++c) {
      int64_t i = idx[r * 3 + c];
      i += i < 0 ? (axis == 0 ? 3 : 4) : 0;
      out.push_back(axis == 0 ? data[i * 4 + c] : data[r * 4 + i]);
    }
  }
  return out;
}

TEST(OnnxCompositeIndexTest, GatherElementsWithComputedAndConstantIndices) {
  const std::vector<float> data = Mixed(12, 21);
  const std::vector<int64_t> idx = {2, -1, 0, 1, -3, 2};
  for (const int64_t axis : {0, 1}) {
    SCOPED_TRACE(axis);
    ModelBuilder m;
    m.Input("data", kFloat, {3, 4});
    m.Input("idx", kInt64, {2, 3});
    m.Initializer(Int64Tensor("cidx", {2, 3}, idx));
    IntAttr(m.Node("GatherElements", {"data", "idx"}, {"y"}), "axis", axis);
    IntAttr(m.Node("GatherElements", {"data", "cidx"}, {"z"}), "axis", axis);
    m.Output("y", kFloat, {2, 3});
    m.Output("z", kFloat, {2, 3});
    const std::vector<HostTensor> out =
        ImportAndRun(m, {{"data", F32(data, {3, 4})}, {"idx", I64(idx, {2, 3})}});
    ASSERT_EQ(out.size(), 2u);
    ExpectFloats(out[0], GatherElementsRef(data, idx, axis), {2, 3}, 0);
    ExpectFloats(out[1], GatherElementsRef(data, idx, axis), {2, 3}, 0);
  }
}

TEST(OnnxCompositeIndexTest, GatherElementsOutOfRangeFails) {
  ModelBuilder m;
  m.Input("data", kFloat, {3, 4});
  m.Input("idx", kInt64, {1, 2});
  m.Node("GatherElements", {"data", "idx"}, {"y"});  // axis 0: [-3, 3)
  m.Output("y", kFloat, {1, 2});
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  absl::StatusOr<std::vector<HostTensor>> run =
      RunImported(*imported, {{"data", F32(Mixed(12), {3, 4})}, {"idx", I64({0, 3}, {1, 2})}});
  EXPECT_FALSE(run.ok());
  ModelBuilder c;
  c.Input("data", kFloat, {3, 4});
  c.Initializer(Int64Tensor("idx", {1, 2}, {0, -4}));
  c.Node("GatherElements", {"data", "idx"}, {"y"}, "ge");
  c.Output("y", kFloat, {1, 2});
  imported = Import(c);
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(imported.status().message(), HasSubstr("node 'ge' (GatherElements"));
  EXPECT_THAT(imported.status().message(), HasSubstr("index -4 (element 1"));
}

TEST(OnnxCompositeIndexTest, ModOfIntegersAtRunTimeAndOfConstantFloats) {
  const std::vector<int64_t> a = {7, -7, 7, -7, 0, 6, 5};
  const std::vector<int64_t> b = {3, 3, -3, -3, 4, -3, 1};
  for (const int64_t fmod : {0, 1}) {
    SCOPED_TRACE(fmod);
    ModelBuilder m(13);
    m.Input("a", kInt64, {7});
    m.Input("b", kInt64, {7});
    m.Initializer(FloatTensor("fa", {2}, {-4.5f, 5.25f}));
    m.Initializer(FloatTensor("fb", {2}, {2.0f, -2.0f}));
    IntAttr(m.Node("Mod", {"a", "b"}, {"y"}), "fmod", fmod);
    IntAttr(m.Node("Mod", {"fa", "fb"}, {"z"}), "fmod", 1);
    m.Output("y", kInt64, {7});
    m.Output("z", kFloat, {2});
    const std::vector<HostTensor> out = ImportAndRun(m, {{"a", I64(a, {7})}, {"b", I64(b, {7})}});
    ASSERT_EQ(out.size(), 2u);
    std::vector<int64_t> want;
    for (size_t i = 0; i < a.size(); ++i) {
      int64_t r = a[i] % b[i];
      if (fmod == 0 && r != 0 && (r < 0) != (b[i] < 0)) r += b[i];
      want.push_back(r);
    }
    EXPECT_EQ(out[0].ToVector<int64_t>(), want);
    EXPECT_EQ(out[1].ToVector<float>(), (std::vector<float>{-0.5f, 1.25f}));
  }
  ModelBuilder f(13);
  f.Input("a", kFloat, {2});
  f.Initializer(FloatTensor("b", {2}, {2.0f, 3.0f}));
  IntAttr(f.Node("Mod", {"a", "b"}, {"y"}, "mod"), "fmod", 1);
  f.Output("y", kFloat, {2});
  absl::StatusOr<OnnxImport> imported = Import(f);
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(imported.status().message(), HasSubstr("node 'mod' (Mod, opset 13)"));
  EXPECT_THAT(imported.status().message(), HasSubstr("computed at run time is not supported"));
}

TEST(OnnxCompositeIndexTest, ComparisonsAndLogicalOpsOfConstantsFold) {
  ModelBuilder m(13);
  m.Input("x", kFloat, {3});
  m.Initializer(Int64Tensor("p", {3}, {1, 5, 3}));
  m.Initializer(Int64Tensor("q", {3}, {2, 5, 1}));
  m.Node("Less", {"p", "q"}, {"lt"});
  m.Node("GreaterOrEqual", {"p", "q"}, {"ge"});
  m.Node("Not", {"lt"}, {"not_lt"});
  m.Node("And", {"not_lt", "ge"}, {"both"});
  m.Node("Xor", {"lt", "ge"}, {"one"});
  m.Node("Max", {"p", "q"}, {"max"});
  IntAttr(m.Node("Cast", {"max"}, {"max_f"}), "to", kFloat);
  m.Node("Mul", {"x", "max_f"}, {"y"});
  for (const char* name : {"both", "one"}) m.Output(name, kBool, {3});
  m.Output("y", kFloat, {3});
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  std::vector<std::string> types;
  for (const ir::OpDesc& op : imported->program.block(0).ops()) types.push_back(op.type);
  EXPECT_EQ(std::count(types.begin(), types.end(), "mul"), 1);
  EXPECT_EQ(std::count(types.begin(), types.end(), "less_than"), 0);
  EXPECT_EQ(std::count(types.begin(), types.end(), "logical_and"), 0);
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32({1, 2, 3}, {3})}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(BoolValues(out[0]), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(BoolValues(out[1]), (std::vector<bool>{true, true, true}));
  ExpectFloats(out[2], {2, 10, 9}, {3}, 0);
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_composite_index_test
