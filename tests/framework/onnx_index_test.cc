// ONNX's Gather, Slice, Where, Erf and Gelu through the importer (framework/onnx/internal/
// index_mappers.cc, activation_mappers.cc): computed inputs map onto the gather, slice, where
// and erf ops and run against loops in the test (negative indices and steps, INT32 and INT64
// indices, both Slice forms, broadcasting); all-constant nodes still fold at import (no op in
// the program); Gelu's exact and tanh forms against their formulas. The refusals name the node
// and the input: Slice's starts computed at run time, a constant index out of range (at
// import), a computed one (at run time), an unknown approximate. The table rows' limits say
// what the mappings refuse.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_index_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)
using ::testing::HasSubstr;

::onnx::TensorProto Int32Tensor(const std::string& name, const Dims& dims,
                                const std::vector<int32_t>& values) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(kInt32);
  for (int64_t d : dims) t.add_dims(d);
  for (int32_t v : values) t.add_int32_data(v);
  return t;
}

void StringAttr(::onnx::NodeProto* node, const std::string& name, const std::string& v) {
  NewAttr(node, name, ::onnx::AttributeProto::STRING)->set_s(v);
}

// The op types of the imported program's global block.
std::vector<std::string> OpTypes(const OnnxImport& imported) {
  std::vector<std::string> types;
  for (const ir::OpDesc& op : imported.program.block(0).ops()) types.push_back(op.type);
  return types;
}

TEST(OnnxIndexTest, GatherOfAGraphInputWithConstantIndices) {
  // x [3, 4] along axis 1 at [[2, -1], [0, 1]]: Out [3, 2, 2].
  ModelBuilder m;
  m.Input("x", kFloat, {3, 4});
  m.Initializer(Int64Tensor("idx", {2, 2}, {2, -1, 0, 1}));
  IntAttr(m.Node("Gather", {"x", "idx"}, {"y"}), "axis", 1);
  m.Output("y", kFloat, {3, 2, 2});
  const std::vector<float> x = Mixed(12);
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {3, 4})}});
  ASSERT_EQ(out.size(), 1u);
  const int64_t cols[] = {2, 3, 0, 1};
  std::vector<float> want;
  for (int r = 0; r < 3; ++r) {
    for (int64_t c : cols) want.push_back(x[r * 4 + c]);
  }
  ExpectFloats(out[0], want, {3, 2, 2}, 0);
}

TEST(OnnxIndexTest, GatherOfComputedIndicesInt32AndInt64) {
  for (const int32_t index_type : {kInt32, kInt64}) {
    SCOPED_TRACE(index_type);
    // An embedding lookup: a constant table [5, 2], computed ids [4] (a scalar axis 0).
    ModelBuilder m;
    m.Initializer(FloatTensor("table", {5, 2}, Ramp(10)));
    m.Input("ids", index_type, {4});
    m.Node("Gather", {"table", "ids"}, {"y"});
    m.Output("y", kFloat, {4, 2});
    const std::vector<int64_t> ids = {4, -5, 1, 4};
    HostTensor feed =
        index_type == kInt64
            ? I64(ids, {4})
            : HostTensor::FromVector(std::vector<int32_t>(ids.begin(), ids.end()), Shape({4}));
    absl::StatusOr<OnnxImport> imported = Import(m);
    ASSERT_TRUE(imported.ok()) << imported.status();
    EXPECT_THAT(OpTypes(*imported), ::testing::Contains("gather"));
    absl::StatusOr<std::vector<HostTensor>> out = RunImported(*imported, {{"ids", feed}});
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> table = Ramp(10);
    std::vector<float> want;
    for (int64_t id : ids) {
      const int64_t row = id < 0 ? id + 5 : id;
      want.push_back(table[row * 2]);
      want.push_back(table[row * 2 + 1]);
    }
    ExpectFloats((*out)[0], want, {4, 2}, 0);

    // A computed index out of range fails the run, naming it.
    HostTensor bad = index_type == kInt64
                         ? I64({0, 5, 1, 2}, {4})
                         : HostTensor::FromVector(std::vector<int32_t>{0, 5, 1, 2}, Shape({4}));
    absl::StatusOr<std::vector<HostTensor>> failed = RunImported(*imported, {{"ids", bad}});
    ASSERT_FALSE(failed.ok());
    EXPECT_THAT(failed.status().message(), HasSubstr("Index[1] = 5 is out of range [-5, 5)"));
  }
}

TEST(OnnxIndexTest, GatherConstantIndexOutOfRangeFailsAtImportNamingTheNode) {
  ModelBuilder m;
  m.Input("x", kFloat, {3, 4});
  m.Initializer(Int32Tensor("idx", {3}, {0, 4, 1}));
  IntAttr(m.Node("Gather", {"x", "idx"}, {"y"}, "pick"), "axis", -1);
  m.Output("y", kFloat, {3, 3});
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("node 'pick' (Gather"));
  EXPECT_THAT(imported.status().message(),
              HasSubstr("index 4 (element 1 of the indices) is out of range [-4, 4) for axis 1"));
}

TEST(OnnxIndexTest, AllConstantNodesStillFoldAtImport) {
  // Shape arithmetic as exporters emit it: every input an initializer, so no op is added.
  ModelBuilder m;
  m.Input("x", kFloat, {2, 3});
  m.Initializer(Int64Tensor("dims", {4}, {2, 3, 4, 5}));
  m.Initializer(Int64Tensor("pick", {}, {-1}));
  m.Initializer(Int64Tensor("from", {1}, {1}));
  m.Initializer(Int64Tensor("to", {1}, {3}));
  m.Node("Gather", {"dims", "pick"}, {"last"});
  m.Node("Slice", {"dims", "from", "to"}, {"middle"});
  m.Node("Shape", {"x"}, {"shape"});
  m.Output("last", kInt64, {});
  m.Output("middle", kInt64, {2});
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  for (const std::string& type : OpTypes(*imported)) {
    EXPECT_NE(type, "gather");
    EXPECT_NE(type, "slice");
  }
  absl::StatusOr<std::vector<HostTensor>> out =
      RunImported(*imported, {{"x", F32(Mixed(6), {2, 3})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].ToVector<int64_t>(), std::vector<int64_t>({5}));
  EXPECT_EQ((*out)[1].ToVector<int64_t>(), std::vector<int64_t>({3, 4}));
}

// x[start:end:step] per axis by ONNX's rules, walked one step at a time.
std::vector<int64_t> Kept(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  start = step > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
  end = step > 0 ? std::clamp<int64_t>(end, 0, dim) : std::clamp<int64_t>(end, -1, dim - 1);
  std::vector<int64_t> kept;
  for (int64_t i = start; step > 0 ? i < end : i > end; i += step) kept.push_back(i);
  return kept;
}

TEST(OnnxIndexTest, SliceOfAGraphInputBothForms) {
  const std::vector<float> x = Mixed(4 * 6, 3);
  for (const int64_t opset : {9, 13}) {
    SCOPED_TRACE(opset);
    // Axis 1 from -1 back to 0 by -2 (opset 13) or by 1 from 1 to the end (opset 9, which has
    // no steps); axis 0 from 1 to past the end.
    ModelBuilder m(opset);
    m.Input("x", kFloat, {4, 6});
    ::onnx::NodeProto* node = nullptr;
    const int64_t step = opset >= 10 ? -2 : 1;
    const int64_t start1 = opset >= 10 ? -1 : 1;
    const int64_t end1 = opset >= 10 ? 0 : 1000;
    if (opset >= 10) {
      m.Initializer(Int64Tensor("starts", {2}, {start1, 1}));
      m.Initializer(Int64Tensor("ends", {2}, {end1, 100}));
      m.Initializer(Int64Tensor("axes", {2}, {-1, 0}));
      m.Initializer(Int64Tensor("steps", {2}, {step, 1}));
      node = m.Node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
    } else {
      node = m.Node("Slice", {"x"}, {"y"});
      IntsAttr(node, "starts", {start1, 1});
      IntsAttr(node, "ends", {end1, 100});
      IntsAttr(node, "axes", {1, 0});
    }
    const std::vector<int64_t> rows = Kept(4, 1, 100, 1);
    const std::vector<int64_t> cols = Kept(6, start1, end1, step);
    const Dims dims = {static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols.size())};
    m.Output("y", kFloat, {dims[0], dims[1]});
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {4, 6})}});
    ASSERT_EQ(out.size(), 1u);
    std::vector<float> want;
    for (int64_t r : rows) {
      for (int64_t c : cols) want.push_back(x[r * 6 + c]);
    }
    ExpectFloats(out[0], want, dims, 0);
  }
}

TEST(OnnxIndexTest, SliceWithComputedStartsIsRefusedNamingTheInput) {
  ModelBuilder m;
  m.Input("x", kFloat, {4, 6});
  m.Input("starts", kInt64, {1});
  m.Initializer(Int64Tensor("ends", {1}, {3}));
  m.Node("Slice", {"x", "starts", "ends"}, {"y"}, "cut");
  m.Output("y", kFloat, {-1, 6});
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("node 'cut' (Slice"));
  EXPECT_THAT(imported.status().message(),
              HasSubstr("input 1 'starts' (starts) must be a constant"));
}

TEST(OnnxIndexTest, WhereBroadcastsComputedOperands) {
  // Cond [2, 1] and X [1, 3] fed, Y a scalar initializer: Out [2, 3].
  ModelBuilder m;
  m.Input("c", kBool, {2, 1});
  m.Input("x", kFloat, {1, 3});
  m.Initializer(FloatTensor("y", {}, {-7.5f}));
  m.Node("Where", {"c", "x", "y"}, {"out"});
  m.Output("out", kFloat, {2, 3});
  const std::vector<float> x = {1.5f, -2.0f, 3.25f};
  const std::vector<HostTensor> out =
      ImportAndRun(m, {{"c", Bools({false, true}, {2, 1})}, {"x", F32(x, {1, 3})}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {-7.5f, -7.5f, -7.5f, 1.5f, -2.0f, 3.25f}, {2, 3}, 0);
}

TEST(OnnxIndexTest, ErfMapsOntoTheErfOp) {
  ModelBuilder m(9);
  m.Input("x", kFloat, {7});
  m.Node("Erf", {"x"}, {"y"});
  m.Output("y", kFloat, {7});
  const std::vector<float> x = {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 2.5f};
  const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {7})}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want;
  for (float v : x) want.push_back(std::erf(v));
  ExpectFloats(out[0], want, {7}, 1e-6);
}

TEST(OnnxIndexTest, GeluBothFormsFollowTheirFormulas) {
  const std::vector<float> x = {-4.0f, -1.5f, -0.5f, 0.0f, 0.25f, 1.0f, 3.0f};
  for (const char* approximate : {"", "none", "tanh"}) {
    SCOPED_TRACE(approximate);
    ModelBuilder m(20);
    m.Input("x", kFloat, {7});
    ::onnx::NodeProto* node = m.Node("Gelu", {"x"}, {"y"});
    if (*approximate != '\0') StringAttr(node, "approximate", approximate);
    m.Output("y", kFloat, {7});
    const std::vector<HostTensor> out = ImportAndRun(m, {{"x", F32(x, {7})}});
    ASSERT_EQ(out.size(), 1u);
    std::vector<float> want;
    for (float f : x) {
      const double v = f;
      const double gate = std::string(approximate) == "tanh"
                              ? std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))
                              : std::erf(v / std::sqrt(2.0));
      want.push_back(static_cast<float>(0.5 * v * (1 + gate)));
    }
    ExpectFloats(out[0], want, {7}, 1e-6);
  }
  ModelBuilder bad(20);
  bad.Input("x", kFloat, {7});
  StringAttr(bad.Node("Gelu", {"x"}, {"y"}, "act"), "approximate", "sigmoid");
  bad.Output("y", kFloat, {7});
  absl::StatusOr<OnnxImport> refused = Import(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("node 'act' (Gelu"));
  EXPECT_THAT(refused.status().message(), HasSubstr("approximate='sigmoid'"));
}

TEST(OnnxIndexTest, TableRowsSayWhatTheMappingsRefuse) {
  std::vector<std::string> seen;
  for (const OnnxOpRow& row : SupportedOnnxOps()) {
    if (row.op_type == "Gather" || row.op_type == "Slice" || row.op_type == "Where" ||
        row.op_type == "Erf" || row.op_type == "Gelu") {
      seen.push_back(row.op_type);
      EXPECT_THAT(row.limits, ::testing::Not(HasSubstr("no kernel"))) << row.op_type;
      EXPECT_THAT(row.limits, ::testing::Not(HasSubstr("constant inputs only"))) << row.op_type;
    }
    if (row.op_type == "Slice") {
      EXPECT_THAT(row.limits, HasSubstr("must be constants"));
    }
    if (row.op_type == "Erf") {
      EXPECT_EQ(row.first_opset, 9);
    }
  }
  EXPECT_THAT(seen, ::testing::UnorderedElementsAre("Gather", "Slice", "Where", "Erf", "Gelu"));
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_index_test
