// ResolveOps and ChooseKernels on hand-written blocks, without a VM run: what a resolved op
// carries (operands in slot order, the "stream" attribute taken apart from the normalized
// attributes), each resolution error with the prefix resolved before it, fetch checks,
// kernel choice per device; and, through Interpreter::Build, that the error reported is
// that of the first op to fail any step (resolution, placement or kernel choice).
#include "framework/interpreter/op_resolution.h"

#include <memory>
#include <string>
#include <vector>

#include "framework/interpreter/interpreter.h"
#include "framework/interpreter/placement.h"
#include "framework/interpreter/var_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::op_resolution_test {
namespace {

using program_test::AddVar;
using program_test::Fill;
using program_test::kCpu;
using program_test::kSim;
using program_test::OnStream;
using program_test::Op;
using program_test::ScaleBy;
using program_test::Var;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const Shape kSquare({4, 4});

class OpResolutionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = program_test::NewContext(/*sim_devices=*/1);
    ASSERT_NE(context_, nullptr);
    ir::BlockDesc& b = program_.mutable_global_block();
    for (const char* name : {"x", "a", "b", "c"}) AddVar(b, Var(name, kSquare));
    AddVar(b, Var("w", kSquare, /*persistable=*/true));
  }

  ir::BlockDesc& block() { return program_.mutable_global_block(); }
  const ops::OpRegistry& registry() const { return context_->registry(); }

  ResolvedBlock Resolve(std::vector<std::string> fetches = {}) {
    absl::StatusOr<VarTable> vars = CollectVars(block(), {"x"}, fetches, kCpu, scope_);
    EXPECT_TRUE(vars.ok()) << vars.status();
    vars_ = *std::move(vars);
    return ResolveOps(block(), registry(), vars_, fetches);
  }

  int Slot(const std::string& name) const { return vars_.index_of.at(name); }

  std::unique_ptr<eager::Context> context_;
  ir::ProgramDesc program_;
  Scope scope_;
  VarTable vars_;
};

TEST_F(OpResolutionTest, ResolvedOpsCarryOperandsInSlotOrderAndTheStreamApart) {
  block().AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  // Slots given out of schema order: Y before X.
  block().AppendOp(Op("add", {{"Y", {"w"}}, {"X", {"a"}}}, {{"Out", {"b"}}}));
  block().AppendOp(
      Op("scale", {{"X", {"b"}}}, {{"Out", {"c"}}}, OnStream("compute:1", ScaleBy(2.0))));
  const ResolvedBlock resolved = Resolve({"c"});
  ASSERT_TRUE(resolved.error.ok()) << resolved.error;
  ASSERT_EQ(resolved.ops.size(), 3u);
  EXPECT_EQ(resolved.ops[0].source, 0);
  EXPECT_THAT(resolved.ops[0].inputs, ElementsAre(Slot("x")));
  EXPECT_THAT(resolved.ops[1].inputs, ElementsAre(Slot("a"), Slot("w")));
  EXPECT_THAT(resolved.ops[1].outputs, ElementsAre(Slot("b")));
  EXPECT_EQ(resolved.ops[2].stream_attr, "compute:1");
  EXPECT_FALSE(resolved.ops[2].attrs.values().contains("stream"));
  EXPECT_TRUE(resolved.ops[2].attrs.values().contains("scale"));
  EXPECT_TRUE(resolved.ops[2].attrs.values().contains("bias"));  // default added
  EXPECT_TRUE(resolved.ops[0].stream_attr.empty());
  EXPECT_THAT(resolved.fetches, ElementsAre(Slot("c")));
}

TEST_F(OpResolutionTest, AnErrorKeepsTheOpsResolvedBeforeIt) {
  block().AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  block().AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"b"}}}));
  block().AppendOp(Op("relu", {{"Y", {"b"}}}, {{"Out", {"c"}}}));
  const ResolvedBlock resolved = Resolve({"c"});
  EXPECT_EQ(resolved.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(resolved.error.message(), HasSubstr("op #2 'relu'"));
  EXPECT_THAT(resolved.error.message(), HasSubstr("unknown input slot 'Y'"));
  EXPECT_EQ(resolved.ops.size(), 2u);
  EXPECT_THAT(resolved.fetches, IsEmpty());
}

TEST_F(OpResolutionTest, ReadOfATemporaryBeforeAnyWrite) {
  block().AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"b"}}}));
  const ResolvedBlock resolved = Resolve();
  EXPECT_THAT(resolved.error.message(), HasSubstr("op #0 'exp'"));
  EXPECT_THAT(resolved.error.message(), HasSubstr("reads variable 'a' before any op writes it"));
  EXPECT_THAT(resolved.ops, IsEmpty());
}

TEST_F(OpResolutionTest, UndefinedVariablesAndUnknownOutputSlot) {
  block().AppendOp(Op("exp", {{"X", {"nope"}}}, {{"Out", {"b"}}}));
  EXPECT_THAT(Resolve().error.message(), HasSubstr("input X names undefined variable 'nope'"));

  block().mutable_ops().clear();
  block().AppendOp(Op("exp", {{"X", {"x"}}}, {{"Out", {"nope"}}}));
  EXPECT_THAT(Resolve().error.message(), HasSubstr("output Out names undefined variable 'nope'"));

  block().mutable_ops().clear();
  block().AppendOp(Op("exp", {{"X", {"x"}}}, {{"Out", {"a"}}, {"Extra", {"b"}}}));
  EXPECT_THAT(Resolve().error.message(), HasSubstr("unknown output slot 'Extra'"));
}

TEST_F(OpResolutionTest, OutputCountShapeAndFeedChecks) {
  block().AppendOp(Op("exp", {{"X", {"x"}}}, {{"Out", {"a", "b"}}}));
  const absl::Status count = Resolve().error;
  EXPECT_EQ(count.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(count.message()), HasSubstr("op #0 'exp': "));
  EXPECT_THAT(std::string(count.message()), HasSubstr("Out")) << count;

  block().mutable_ops().clear();
  AddVar(block(), Var("wide", Shape({4, 8})));
  block().AppendOp(Op("exp", {{"X", {"x"}}}, {{"Out", {"wide"}}}));
  EXPECT_THAT(Resolve().error.message(), HasSubstr("output 'wide' is declared"));

  block().mutable_ops().clear();
  block().AppendOp(Op("fill_constant", {}, {{"Out", {"x"}}}, Fill(kSquare, 1.0)));
  EXPECT_THAT(Resolve().error.message(), HasSubstr("writes feed variable 'x'"));
}

TEST_F(OpResolutionTest, UnknownOpAndBadAttributes) {
  block().AppendOp(Op("no_such_op", {}, {}));
  EXPECT_FALSE(Resolve().error.ok());

  block().mutable_ops().clear();
  block().AppendOp(Op("scale", {{"X", {"x"}}}, {{"Out", {"a"}}}, vm::AttrMap().Set("nope", 1.0)));
  const absl::Status status = Resolve().error;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("op #0 'scale'"));
}

TEST_F(OpResolutionTest, FetchOfATemporaryNothingWrites) {
  block().AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  const ResolvedBlock resolved = Resolve({"a", "b"});
  EXPECT_THAT(resolved.error.message(),
              HasSubstr("fetch 'b': no op writes it and it is neither fed nor persistable"));
  EXPECT_EQ(resolved.ops.size(), 1u);
  EXPECT_THAT(resolved.fetches, ElementsAre(Slot("a")));
  // Fed and persistable variables need no writer.
  EXPECT_TRUE(Resolve({"x", "w"}).error.ok());
}

TEST_F(OpResolutionTest, KernelsFollowThePlacedDevice) {
  block().AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  const ResolvedBlock resolved = Resolve({"a"});
  ASSERT_TRUE(resolved.error.ok());
  VarTable on_sim = vars_;
  for (VarSlot& slot : on_sim.slots) {
    if (slot.kind != VarKind::kFeed) slot.device = kSim;
  }
  PlacedBlock placed = PlaceOps(resolved, registry(), kSim, on_sim);
  ASSERT_TRUE(placed.error.ok()) << placed.error;
  ASSERT_TRUE(ChooseKernels(registry(), on_sim, placed.funcs).ok());
  for (const OpFunc& func : placed.funcs) EXPECT_NE(func.kernel, nullptr) << func.type;
  const OpFunc& relu = placed.funcs[1];
  ASSERT_EQ(relu.type, "relu");
  absl::StatusOr<const vm::OpKernel*> want =
      registry().FindKernel("relu", DeviceType::kSim, DataType::kF32);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(relu.kernel, *want);
}

// Through Build: op #1 fails placement (a bad stream), op #2 fails resolution (unknown op):
// the error names op #1.
TEST_F(OpResolutionTest, TheFirstOpToFailAnyStepIsReported) {
  block().AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  block().AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"b"}}}, OnStream("compute:many")));
  block().AppendOp(Op("no_such_op", {}, {}));
  absl::StatusOr<std::unique_ptr<Interpreter>> built =
      Interpreter::Build(program_, &context_->registry(), context_->vm(), &scope_, {"x"}, {"b"});
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(), HasSubstr("op #1 'exp'"));
  EXPECT_THAT(built.status().message(), HasSubstr("compute:many"));
  EXPECT_THAT(scope_.LocalNames(), IsEmpty());
}

}  // namespace
}  // namespace sluice::framework::op_resolution_test
