// Control flow in the IR (framework/ir/control_flow.h): a cond and a while loop (with a
// cond inside its body) validate and round-trip through the text form; every broken rule
// is refused with an error naming the op, the block and the variable or attribute; each
// error case starts from the valid program and changes one thing, so a check that passed
// by accident would show as the valid program failing.
#include <functional>
#include <string>
#include <vector>

#include "framework/ir/control_flow.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::ir::control_flow_ir_test {
namespace {

namespace program_test = ::sluice::framework::program_test;

using ::testing::HasSubstr;

using program_test::Op;

VarDesc V(std::string name, DataType dtype, Shape shape) {
  return program_test::Var(std::move(name), std::move(shape), /*persistable=*/false, dtype);
}

void Add(BlockDesc& block, VarDesc var) { ASSERT_TRUE(block.AddVar(std::move(var)).ok()); }

// Block 0: x f32[4], i i64[], p bool[]; y = cond(p, x) (blocks 1 and 2); (x_out, i_out) =
// while(x, i) with condition block 3 (i_out < 10) and body block 4, whose cond (blocks 5,
// 6) picks x_out*2 or x_out+1 (inside the loop, x_out and i_out are the current values).
ProgramDesc Valid() {
  ProgramDesc program;
  BlockDesc& root = program.mutable_global_block();
  Add(root, V("x", DataType::kF32, Shape({4})));
  Add(root, V("i", DataType::kI64, Shape()));
  Add(root, V("p", DataType::kBool, Shape()));
  Add(root, V("y", DataType::kF32, Shape({4})));
  Add(root, V("x_out", DataType::kF32, Shape({4})));
  Add(root, V("i_out", DataType::kI64, Shape()));
  const int yes = program.AppendBlock(0);
  Add(program.mutable_block(yes), V("a", DataType::kF32, Shape({4})));
  program.mutable_block(yes).AppendOp(Op("scale", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  program.mutable_block(yes).AppendOp(Op("yield", {{"X", {"a"}}}, {}));
  const int no = program.AppendBlock(0);
  program.mutable_block(no).AppendOp(Op("yield", {{"X", {"x"}}}, {}));  // a parent's var
  // (AppendBlock may move the blocks: no BlockDesc reference is kept across it.)
  program.mutable_global_block().AppendOp(
      Op("cond", {{"Cond", {"p"}}, {"Input", {"x"}}}, {{"Out", {"y"}}},
         vm::AttrMap().Set("true_block", vm::BlockRef{yes}).Set("false_block", vm::BlockRef{no})));
  const int check = program.AppendBlock(0);
  Add(program.mutable_block(check), V("go", DataType::kBool, Shape()));
  program.mutable_block(check).AppendOp(Op("less_than", {{"X", {"i_out"}}}, {{"Out", {"go"}}}));
  program.mutable_block(check).AppendOp(Op("yield", {{"X", {"go"}}}, {}));
  const int body = program.AppendBlock(0);
  Add(program.mutable_block(body), V("odd", DataType::kBool, Shape()));
  Add(program.mutable_block(body), V("x_next", DataType::kF32, Shape({4})));
  Add(program.mutable_block(body), V("i_next", DataType::kI64, Shape()));
  const int twice = program.AppendBlock(body);
  Add(program.mutable_block(twice), V("t", DataType::kF32, Shape({4})));
  program.mutable_block(twice).AppendOp(Op("scale", {{"X", {"x_out"}}}, {{"Out", {"t"}}}));
  program.mutable_block(twice).AppendOp(Op("yield", {{"X", {"t"}}}, {}));
  const int plus = program.AppendBlock(body);
  Add(program.mutable_block(plus), V("u", DataType::kF32, Shape({4})));
  program.mutable_block(plus).AppendOp(Op("scale", {{"X", {"x_out"}}}, {{"Out", {"u"}}}));
  program.mutable_block(plus).AppendOp(Op("yield", {{"X", {"u"}}}, {}));
  BlockDesc& b = program.mutable_block(body);
  b.AppendOp(Op("is_odd", {{"X", {"i_out"}}}, {{"Out", {"odd"}}}));
  b.AppendOp(Op(
      "cond", {{"Cond", {"odd"}}}, {{"Out", {"x_next"}}},
      vm::AttrMap().Set("true_block", vm::BlockRef{twice}).Set("false_block", vm::BlockRef{plus})));
  b.AppendOp(Op("increment", {{"X", {"i_out"}}}, {{"Out", {"i_next"}}}));
  b.AppendOp(Op("yield", {{"X", {"x_next", "i_next"}}}, {}));
  program.mutable_global_block().AppendOp(Op("while", {{"X", {"x", "i"}}},
                                             {{"Out", {"x_out", "i_out"}}},
                                             vm::AttrMap()
                                                 .Set("cond_block", vm::BlockRef{check})
                                                 .Set("body_block", vm::BlockRef{body})
                                                 .Set("max_iterations", int64_t{100})
                                                 .Set("parallel_iterations", int64_t{4})));
  return program;
}

// Block indices of Valid().
constexpr int kYes = 1, kNo = 2, kCheck = 3, kBody = 4, kPlus = 6;
// Op indices in block 0.
constexpr int kCondOpIndex = 0, kWhileOpIndex = 1;

OpDesc& RootOp(ProgramDesc& program, int index) {
  return program.mutable_global_block().mutable_ops()[static_cast<size_t>(index)];
}

TEST(ControlFlowIrTest, ValidProgramValidatesAndRoundTrips) {
  const ProgramDesc program = Valid();
  ASSERT_TRUE(program.Validate().ok()) << program.Validate();
  const std::string text = program.ToText();
  EXPECT_THAT(text, HasSubstr("sluice-program 2\n"));
  EXPECT_THAT(text, HasSubstr("body_block=b:4,cond_block=b:3,max_iterations=i:100"));
  const absl::StatusOr<ProgramDesc> back = ProgramDesc::FromText(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == program);
  EXPECT_TRUE(back->Validate().ok());
}

TEST(ControlFlowIrTest, HelpersFindBlocksYieldsAndAncestorVars) {
  const ProgramDesc program = Valid();
  const OpDesc& loop = program.global_block().ops()[kWhileOpIndex];
  EXPECT_TRUE(IsControlFlowOp(loop));
  EXPECT_FALSE(IsControlFlowOp(program.block(kYes).ops()[0]));
  const std::vector<std::pair<std::string, int64_t>> refs = SubBlockRefs(loop);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0], (std::pair<std::string, int64_t>{"body_block", kBody}));
  EXPECT_EQ(refs[1], (std::pair<std::string, int64_t>{"cond_block", kCheck}));
  EXPECT_EQ(YieldedNames(program, kBody).value(), (std::vector<std::string>{"x_next", "i_next"}));
  EXPECT_EQ(YieldedNames(program, 0).status().code(), absl::StatusCode::kInvalidArgument);
  // From block 6 (inside the body), `x` is block 0's and `odd` the body's; `a` (block 1, a
  // sibling's) is not visible.
  EXPECT_EQ(ResolveVar(program, kPlus, "x"), program.global_block().FindVar("x"));
  EXPECT_EQ(ResolveVar(program, kPlus, "odd"), program.block(kBody).FindVar("odd"));
  EXPECT_EQ(ResolveVar(program, kPlus, "a"), nullptr);
}

struct Broken {
  const char* what;
  std::function<void(ProgramDesc&)> change;
  std::vector<std::string> message_parts;
};

TEST(ControlFlowIrTest, EveryBrokenRuleIsNamed) {
  const std::vector<Broken> cases = {
      {"reference past the last block",
       [](ProgramDesc& p) { RootOp(p, kCondOpIndex).attrs.Set("true_block", vm::BlockRef{99}); },
       {"block 0 op #0 'cond'", "'true_block' references block 99"}},
      {"reference to the root block",
       [](ProgramDesc& p) { RootOp(p, kCondOpIndex).attrs.Set("false_block", vm::BlockRef{0}); },
       {"block 0 op #0 'cond'", "'false_block' references block 0"}},
      {"reference to a grandchild",
       [](ProgramDesc& p) { RootOp(p, kCondOpIndex).attrs.Set("true_block", vm::BlockRef{kPlus}); },
       {"'true_block' references block 6, whose parent is 4, not 0"}},
      {"one block referenced twice",
       [](ProgramDesc& p) { RootOp(p, kCondOpIndex).attrs.Set("false_block", vm::BlockRef{kYes}); },
       {"attribute 'true_block' references block 1, already referenced by block 0 op #0 "
        "'cond' attribute 'false_block'"}},
      {"missing branch",
       [](ProgramDesc& p) { RootOp(p, kCondOpIndex).attrs.Erase("false_block"); },
       {"block 0 op #0 'cond': missing attribute 'false_block'"}},
      {"branch given as an int",
       [](ProgramDesc& p) { RootOp(p, kCondOpIndex).attrs.Set("true_block", int64_t{kYes}); },
       {"attribute 'true_block' is not a block reference"}},
      {"predicate not bool",
       [](ProgramDesc& p) { RootOp(p, kCondOpIndex).inputs[0].second = {"i"}; },
       {"block 0 op #0 'cond': predicate 'i' must be a bool scalar, not i64[]"}},
      {"two predicates",
       [](ProgramDesc& p) {
         RootOp(p, kCondOpIndex).inputs[0].second = {"p", "p"};
       },
       {"slot Cond names 2 variables, 1 expected"}},
      {"branch yields another shape",
       [](ProgramDesc& p) { p.mutable_block(kNo).mutable_ops()[0].inputs[0].second = {"p"}; },
       {"block 0 op #0 'cond': output 'y' is f32[4] but the false branch (block 2) yields 'p' "
        "bool[]"}},
      {"branch yields too many",
       [](ProgramDesc& p) {
         p.mutable_block(kYes).mutable_ops()[1].inputs[0].second = {"a", "a"};
       },
       {"the true branch (block 1) yields 2 values, 1 expected"}},
      {"branch without a yield",
       [](ProgramDesc& p) { p.mutable_block(kYes).mutable_ops().pop_back(); },
       {"block 0 op #0 'cond': block 1 does not end in a 'yield' op"}},
      {"yield not last",
       [](ProgramDesc& p) {
         auto& ops = p.mutable_block(kYes).mutable_ops();
         std::swap(ops[0], ops[1]);
       },
       {"block 1 op #0 'yield': a yield must be the last op"}},
      {"yield in the root block",
       [](ProgramDesc& p) {
         p.mutable_global_block().AppendOp(Op("yield", {{"X", {"x"}}}, {}));
       },
       {"block 0 op #2 'yield'"}},
      {"yield with outputs",
       [](ProgramDesc& p) {
         p.mutable_block(kNo).mutable_ops()[0].outputs = {{"Out", {"y"}}};
       },
       {"block 2 op #0 'yield': a yield has no outputs"}},
      {"loop variable changes shape in the body",
       [](ProgramDesc& p) { p.mutable_block(kBody).FindMutableVar("x_next")->shape = Shape({5}); },
       {"block 0 op #1 'while': loop variable 'x_out' is f32[4] but the body (block 4) yields "
        "'x_next' f32[5]"}},
      {"loop variable changes dtype in the body",
       [](ProgramDesc& p) {
         p.mutable_block(kBody).FindMutableVar("i_next")->dtype = DataType::kI32;
       },
       {"loop variable 'i_out' is i64[] but the body (block 4) yields 'i_next' i32[]"}},
      {"fewer outputs than loop variables",
       [](ProgramDesc& p) { RootOp(p, kWhileOpIndex).outputs[0].second = {"x_out"}; },
       {"block 0 op #1 'while': 2 loop variables (X) but 1 outputs (Out)"}},
      {"output of another shape",
       [](ProgramDesc& p) {
         RootOp(p, kWhileOpIndex).outputs[0].second = {"x_out", "p"};
       },
       {"output 'p' is bool[] but loop variable 'i' is i64[]"}},
      {"condition yields a float",
       [](ProgramDesc& p) { p.mutable_block(kCheck).FindMutableVar("go")->dtype = DataType::kF32; },
       {"the condition (block 3) yields 'go' must be a bool scalar, not f32[]"}},
      {"a loop variable twice",
       [](ProgramDesc& p) {
         RootOp(p, kWhileOpIndex).inputs[0].second = {"x", "x"};
       },
       {"block 0 op #1 'while': X names 'x' twice"}},
      {"an output twice",
       [](ProgramDesc& p) {
         RootOp(p, kWhileOpIndex).outputs[0].second = {"x_out", "x_out"};
       },
       {"Out names 'x_out' twice"}},
      {"an output that is a loop variable's initial value",
       [](ProgramDesc& p) {
         RootOp(p, kWhileOpIndex).outputs[0].second = {"x", "i_out"};
       },
       {"Out names 'x', which is also in X"}},
      {"yield with attributes",
       [](ProgramDesc& p) { p.mutable_block(kNo).mutable_ops()[0].attrs.Set("k", int64_t{1}); },
       {"block 2 op #0 'yield': a yield has no attributes"}},
      {"yield with another slot",
       [](ProgramDesc& p) {
         p.mutable_block(kNo).mutable_ops()[0].inputs.push_back({"Y", {"x"}});
       },
       {"block 2 op #0 'yield': a yield has one input slot, X, not 'Y'"}},
      {"missing body",
       [](ProgramDesc& p) { RootOp(p, kWhileOpIndex).attrs.Erase("body_block"); },
       {"block 0 op #1 'while': missing attribute 'body_block'"}},
      {"max_iterations 0",
       [](ProgramDesc& p) { RootOp(p, kWhileOpIndex).attrs.Set("max_iterations", int64_t{0}); },
       {"'max_iterations' must be an int of at least 1"}},
      {"parallel_iterations as a string",
       [](ProgramDesc& p) {
         RootOp(p, kWhileOpIndex).attrs.Set("parallel_iterations", std::string("4"));
       },
       {"'parallel_iterations' must be an int of at least 1"}},
      {"nested cond: branch yields another shape",
       [](ProgramDesc& p) {
         p.mutable_block(kPlus).FindMutableVar("u")->shape = Shape({2, 2});
       },
       {"block 4 op #1 'cond': output 'x_next' is f32[4] but the false branch (block 6) yields "
        "'u' f32[2, 2]"}},
  };
  ASSERT_TRUE(Valid().Validate().ok()) << Valid().Validate();
  for (const Broken& c : cases) {
    SCOPED_TRACE(c.what);
    ProgramDesc program = Valid();
    c.change(program);
    const absl::Status status = program.Validate();
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : c.message_parts) {
      EXPECT_THAT(std::string(status.message()), HasSubstr(part));
    }
  }
}

TEST(ControlFlowIrTest, OrphanSubBlocksAndOtherOpsWithBlockReferencesAreAllowed) {
  ProgramDesc program = Valid();
  // A block nobody references (autodiff may keep such blocks) and an op unknown to the IR
  // that references one: neither is control flow, so only the reference rules apply.
  const int orphan = program.AppendBlock(0);
  program.mutable_block(orphan).AppendOp(Op("fill", {}, {}));
  const int custom = program.AppendBlock(0);
  program.mutable_global_block().AppendOp(
      Op("custom_loop", {}, {}, vm::AttrMap().Set("sub_block", vm::BlockRef{custom})));
  EXPECT_TRUE(program.Validate().ok()) << program.Validate();
  // A yield in a block that a non-control-flow op references is still refused.
  program.mutable_block(custom).AppendOp(Op("yield", {{"X", {"x"}}}, {}));
  EXPECT_THAT(std::string(program.Validate().message()),
              HasSubstr("a yield must be the last op of a block that a cond or while references"));
}

}  // namespace
}  // namespace sluice::framework::ir::control_flow_ir_test
