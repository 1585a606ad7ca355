// PlaceOps on resolved blocks, without a VM run: copies inserted where a value crosses
// devices (right before the first reader, one copy shared by later readers), a copy made
// stale by a new write of its source and made again, fetched values copied back to cpu,
// temporaries moved by a placement rule, the "stream" attribute, and placement errors.
#include "framework/interpreter/placement.h"

#include <memory>
#include <string>
#include <vector>

#include "framework/interpreter/op_resolution.h"
#include "framework/interpreter/var_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::placement_test {
namespace {

using program_test::AddVar;
using program_test::Fill;
using program_test::kCpu;
using program_test::kSim;
using program_test::OnStream;
using program_test::Op;
using program_test::Var;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Shape kSquare({4, 4});

class PlacementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = program_test::NewContext(/*sim_devices=*/1);
    ASSERT_NE(context_, nullptr);
    for (const char* name : {"x", "a", "h", "e1", "e2", "y"}) AddVar(block(), Var(name, kSquare));
  }

  ir::BlockDesc& block() { return program_.mutable_global_block(); }

  PlacedBlock Place(const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
                    const Device& device = kSim) {
    absl::StatusOr<VarTable> vars = CollectVars(block(), feeds, fetches, device, scope_);
    EXPECT_TRUE(vars.ok()) << vars.status();
    vars_ = *std::move(vars);
    const ResolvedBlock resolved = ResolveOps(block(), context_->registry(), vars_, fetches);
    EXPECT_TRUE(resolved.error.ok()) << resolved.error;
    return PlaceOps(resolved, context_->registry(), device, vars_);
  }

  static std::vector<std::string> Types(const PlacedBlock& placed) {
    std::vector<std::string> types;
    for (const OpFunc& func : placed.funcs) types.push_back(func.type);
    return types;
  }

  int Slot(const std::string& name) const {
    for (int v = 0; v < vars_.size(); ++v) {
      if (vars_.slots[v].name == name) return v;
    }
    ADD_FAILURE() << "no slot " << name;
    return -1;
  }

  std::unique_ptr<eager::Context> context_;
  ir::ProgramDesc program_;
  Scope scope_;
  VarTable vars_;
};

TEST_F(PlacementTest, OneCopyServesEveryReaderAndFetchesComeBack) {
  // x fed (cpu); on sim: a = relu(x); y = add(a, x); y fetched.
  block().AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  block().AppendOp(Op("add", {{"X", {"a"}}, {"Y", {"x"}}}, {{"Out", {"y"}}}));
  const PlacedBlock placed = Place({"x"}, {"y"});
  ASSERT_TRUE(placed.error.ok()) << placed.error;
  EXPECT_THAT(Types(placed), ElementsAre("memcpy_h2d", "relu", "add", "memcpy_d2h"));
  EXPECT_EQ(placed.inserted_copies, 2);
  const int x_sim = Slot("x@" + kSim.ToString());
  const int y_cpu = Slot("y@" + kCpu.ToString());
  EXPECT_EQ(vars_.slots[x_sim].device, kSim);
  EXPECT_EQ(vars_.slots[x_sim].kind, VarKind::kTemp);
  EXPECT_THAT(placed.funcs[0].inputs, ElementsAre(Slot("x")));
  EXPECT_THAT(placed.funcs[1].inputs, ElementsAre(x_sim));
  EXPECT_THAT(placed.funcs[2].inputs, ElementsAre(Slot("a"), x_sim));
  EXPECT_THAT(placed.fetch_slots, ElementsAre(y_cpu));
  EXPECT_TRUE(vars_.slots[y_cpu].fetched);
  EXPECT_EQ(vars_.slots[y_cpu].device, kCpu);
  // Copies run where their placement rule says; block ops on the device, stream unset.
  ASSERT_TRUE(placed.funcs[0].stream.has_value());
  EXPECT_EQ(placed.funcs[0].stream->device, kSim);
  EXPECT_EQ(placed.funcs[0].stream->type, StreamType::kHost2Device);
  EXPECT_EQ(placed.funcs[1].device, kSim);
  EXPECT_FALSE(placed.funcs[1].stream.has_value());
  EXPECT_EQ(placed.funcs[3].stream->type, StreamType::kDevice2Host);
  EXPECT_NE(placed.funcs[0].kernel, nullptr);
  EXPECT_EQ(placed.funcs[1].kernel, nullptr);  // block ops: ChooseKernels' job
}

TEST_F(PlacementTest, ANewWriteMakesTheCopyStale) {
  // a on sim; h = d2h(a) lives on cpu (the rule's output device); e1 = exp(h) needs h on
  // sim. h is written again; e2 = exp(h) needs a new copy, not the stale one.
  block().AppendOp(Op("fill_constant", {}, {{"Out", {"a"}}}, Fill(kSquare, 1.0)));
  block().AppendOp(Op("memcpy_d2h", {{"X", {"a"}}}, {{"Out", {"h"}}}));
  block().AppendOp(Op("exp", {{"X", {"h"}}}, {{"Out", {"e1"}}}));
  block().AppendOp(Op("memcpy_d2h", {{"X", {"a"}}}, {{"Out", {"h"}}}));
  block().AppendOp(Op("exp", {{"X", {"h"}}}, {{"Out", {"e2"}}}));
  const PlacedBlock placed = Place({}, {});
  ASSERT_TRUE(placed.error.ok()) << placed.error;
  EXPECT_EQ(vars_.slots[Slot("h")].device, kCpu);
  EXPECT_THAT(Types(placed), ElementsAre("fill_constant", "memcpy_d2h", "memcpy_h2d", "exp",
                                         "memcpy_d2h", "memcpy_h2d", "exp"));
  EXPECT_EQ(placed.inserted_copies, 2);
  EXPECT_NE(placed.funcs[3].inputs, placed.funcs[6].inputs);
  EXPECT_THAT(placed.funcs[2].outputs, ElementsAre(placed.funcs[3].inputs[0]));
  EXPECT_THAT(placed.funcs[5].outputs, ElementsAre(placed.funcs[6].inputs[0]));
}

TEST_F(PlacementTest, WithoutANewWriteTheCopyIsReused) {
  block().AppendOp(Op("fill_constant", {}, {{"Out", {"a"}}}, Fill(kSquare, 1.0)));
  block().AppendOp(Op("memcpy_d2h", {{"X", {"a"}}}, {{"Out", {"h"}}}));
  block().AppendOp(Op("exp", {{"X", {"h"}}}, {{"Out", {"e1"}}}));
  block().AppendOp(Op("exp", {{"X", {"h"}}}, {{"Out", {"e2"}}}));
  const PlacedBlock placed = Place({}, {});
  ASSERT_TRUE(placed.error.ok()) << placed.error;
  EXPECT_EQ(placed.inserted_copies, 1);
  EXPECT_EQ(placed.funcs[3].inputs, placed.funcs[4].inputs);
}

TEST_F(PlacementTest, OnTheHostNothingIsCopied) {
  block().AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  const PlacedBlock placed = Place({"x"}, {"a"}, kCpu);
  ASSERT_TRUE(placed.error.ok());
  EXPECT_THAT(Types(placed), ElementsAre("relu"));
  EXPECT_THAT(placed.fetch_slots, ElementsAre(Slot("a")));
}

TEST_F(PlacementTest, StreamAttributeFixesTheStream) {
  block().AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}, OnStream("compute:1")));
  const PlacedBlock placed = Place({"x"}, {}, kCpu);
  ASSERT_TRUE(placed.error.ok());
  ASSERT_TRUE(placed.funcs[0].stream.has_value());
  EXPECT_EQ(*placed.funcs[0].stream, (StreamKey{kCpu, StreamType::kCompute, 1}));
}

TEST_F(PlacementTest, ErrorsNameTheOpAndKeepThePrefix) {
  block().AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  block().AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"e1"}}}, OnStream("compute:many")));
  PlacedBlock placed = Place({"x"}, {}, kCpu);
  EXPECT_EQ(placed.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(placed.error.message(), HasSubstr("op #1 'exp': bad stream attribute"));
  EXPECT_THAT(Types(placed), ElementsAre("relu"));

  // An op on sim writing a variable that lives on cpu (h, moved there by a d2h).
  block().mutable_ops().clear();
  block().AppendOp(Op("fill_constant", {}, {{"Out", {"a"}}}, Fill(kSquare, 1.0)));
  block().AppendOp(Op("memcpy_d2h", {{"X", {"a"}}}, {{"Out", {"h"}}}));
  block().AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"h"}}}));
  placed = Place({}, {});
  EXPECT_THAT(placed.error.message(), HasSubstr("op #2 'exp': writes 'h' which lives on cpu"));
}

}  // namespace
}  // namespace sluice::framework::placement_test
