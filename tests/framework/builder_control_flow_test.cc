// framework/builder/control_flow.h: fn::Cond and fn::WhileLoop build sub-blocks inside a
// ProgramGuard (checked against the IR's rules by ProgramDesc::Validate, with captured
// inputs listed, nested calls included) and run at once on eager tensors, reading the
// predicate. Each error leaves the program exactly as it was (its text is compared).
#include <string>
#include <vector>

#include "core/status.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/persistable.h"
#include "framework/builder/program.h"
#include "framework/ir/control_flow.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"
#include "tests/framework/control_flow_programs.h"
#include "tests/framework/program_reference_runner.h"

namespace sluice::framework::builder_control_flow_test {
namespace {

using control_flow_programs::LoopWithCond;
using control_flow_programs::Nested;
using ::testing::HasSubstr;

class BuilderControlFlowTest : public ::testing::Test {
 protected:
  BuilderControlFlowTest()
      : ctx_(reference::NewCpuContext()), main_(&registry_), startup_(&registry_) {
    SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok());
  }

  const ir::OpDesc& LastOp(int block = 0) const { return main_.desc().block(block).ops().back(); }

  ops::OpRegistry registry_;
  eager::Context ctx_;
  Program main_;
  Program startup_;
};

TEST_F(BuilderControlFlowTest, StaticCondBuildsTwoBranchBlocks) {
  ProgramGuard guard(main_, startup_);
  const Var x = Data("x", Shape({4})).value();
  const Var w = Data("w", Shape({4})).value();
  const Var p = Data("p", Shape(), DataType::kBool).value();
  absl::StatusOr<std::vector<Value>> out = fn::Cond(
      p,
      [&]() -> absl::StatusOr<std::vector<Value>> {
        SLUICE_ASSIGN_OR_RETURN(Value y, fn::Mul(x, w));
        return std::vector<Value>{y};
      },
      [&]() -> absl::StatusOr<std::vector<Value>> { return std::vector<Value>{x}; });
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].var().name(), "cond_0.out_0");
  EXPECT_EQ((*out)[0].var().shape(), Shape({4}));
  EXPECT_EQ(main_.current_block(), 0);
  const ir::ProgramDesc& desc = main_.desc();
  ASSERT_TRUE(desc.Validate().ok()) << desc.Validate() << "\n" << desc.ToText();
  ASSERT_EQ(desc.num_blocks(), 3);
  const ir::OpDesc& cond = LastOp();
  EXPECT_EQ(cond.type, "cond");
  EXPECT_EQ(cond.Input("Cond"), std::vector<std::string>{"p"});
  // Both captured variables, in order of first use; the predicate is not among them.
  EXPECT_EQ(cond.Input("Input"), (std::vector<std::string>{"x", "w"}));
  EXPECT_EQ(cond.attrs.GetBlock("true_block").value(), vm::BlockRef{1});
  EXPECT_EQ(cond.attrs.GetBlock("false_block").value(), vm::BlockRef{2});
  EXPECT_EQ(desc.block(1).parent_idx(), 0);
  EXPECT_EQ(desc.block(1).ops().front().type, "mul");
  EXPECT_EQ(ir::YieldedNames(desc, 2).value(), std::vector<std::string>{"x"});
  // The branch's temporary lives in the branch's block, not block 0.
  const std::string product = ir::YieldedNames(desc, 1).value()[0];
  EXPECT_TRUE(desc.block(1).HasVar(product));
  EXPECT_FALSE(desc.global_block().HasVar(product));
}

TEST_F(BuilderControlFlowTest, StaticWhileWithACondInsideItsBody) {
  ProgramGuard guard(main_, startup_);
  const Var x = Data("x", Shape({4})).value();
  const Var go = Data("go", Shape(), DataType::kBool).value();
  const Var odd = Data("odd", Shape(), DataType::kBool).value();
  fn::WhileOptions options;
  options.max_iterations = 1000;
  options.parallel_iterations = 4;
  absl::StatusOr<std::vector<Value>> out = fn::WhileLoop(
      [&](const std::vector<Value>&) -> absl::StatusOr<Value> { return Value(go); },
      [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
        SLUICE_ASSIGN_OR_RETURN(Value scaled, fn::Scale(vars[0], 1.0001, 0.5));
        return fn::Cond(
            odd, [&]() -> absl::StatusOr<std::vector<Value>> { return std::vector<Value>{scaled}; },
            [&]() -> absl::StatusOr<std::vector<Value>> {
              SLUICE_ASSIGN_OR_RETURN(Value twice, fn::Scale(scaled, 2.0));
              return std::vector<Value>{twice};
            });
      },
      {x}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].var().name(), "while_0.out_0");
  const ir::ProgramDesc& desc = main_.desc();
  ASSERT_TRUE(desc.Validate().ok()) << desc.Validate() << "\n" << desc.ToText();
  const ir::OpDesc& loop = LastOp();
  EXPECT_EQ(loop.type, "while");
  EXPECT_EQ(loop.Input("X"), std::vector<std::string>{"x"});
  // `go` (read by the condition) and `odd` (by the body's cond) come from outside; `x` is
  // the loop variable, not a capture.
  EXPECT_EQ(loop.Input("Input"), (std::vector<std::string>{"go", "odd"}));
  EXPECT_EQ(loop.attrs.GetInt("max_iterations").value(), 1000);
  EXPECT_EQ(loop.attrs.GetInt("parallel_iterations").value(), 4);
  const int body = static_cast<int>(loop.attrs.GetBlock("body_block").value().index);
  const ir::OpDesc& inner = desc.block(body).ops()[desc.block(body).ops().size() - 2];
  EXPECT_EQ(inner.type, "cond");
  // The inner cond captures the body's own `scaled` (the body's first op makes it); `odd`
  // is its predicate, not a capture.
  EXPECT_EQ(inner.Input("Input"), desc.block(body).ops()[0].Output("Out"));
  EXPECT_EQ(inner.Input("Cond"), std::vector<std::string>{"odd"});
  for (const auto& [attr, index] : ir::SubBlockRefs(inner)) {
    EXPECT_EQ(desc.block(static_cast<int>(index)).parent_idx(), body) << attr;
  }
  EXPECT_EQ(desc.num_blocks(), 5);
  // The text form carries it all.
  EXPECT_TRUE(*ir::ProgramDesc::FromText(desc.ToText()) == desc);
}

TEST_F(BuilderControlFlowTest, WhileInsideWhileGivesTheEagerNumbers) {
  const std::vector<float> xv = {0.25f, -0.5f};
  const std::vector<float> bv = {1.0f, 0.125f};
  eager::Tensor i = ctx_.FromVector(std::vector<float>{0}, Shape()).value();
  eager::Tensor x = ctx_.FromVector(xv, Shape({2})).value();
  eager::Tensor b = ctx_.FromVector(bv, Shape({2})).value();
  absl::StatusOr<std::vector<Value>> eager_out = Nested(i, i, x, b);
  ASSERT_TRUE(eager_out.ok()) << eager_out.status();
  const std::vector<float> want = (*eager_out)[1].tensor().ToVector<float>().value();
  // Each outer iteration maps x to 3x + 2b: three of them give 27x + 26b.
  EXPECT_EQ(want, (std::vector<float>{27 * 0.25f + 26 * 1.0f, 27 * -0.5f + 26 * 0.125f}));

  std::string result;
  {
    ProgramGuard guard(main_, startup_);
    const Var si = Data("i", Shape()).value();
    const Var sx = Data("x", Shape({2})).value();
    const Var sb = Data("b", Shape({2})).value();
    absl::StatusOr<std::vector<Value>> built = Nested(si, si, sx, sb);
    ASSERT_TRUE(built.ok()) << built.status();
    result = (*built)[1].var().name();
  }
  ASSERT_TRUE(main_.desc().Validate().ok()) << main_.desc().Validate();
  EXPECT_EQ(main_.desc().num_blocks(), 5);  // outer cond and body; inner cond and body
  reference::Scope scope;
  ASSERT_TRUE(reference::Feed(ctx_, &scope, "i", std::vector<float>{0}, Shape()).ok());
  ASSERT_TRUE(reference::Feed(ctx_, &scope, "x", xv, Shape({2})).ok());
  ASSERT_TRUE(reference::Feed(ctx_, &scope, "b", bv, Shape({2})).ok());
  const absl::Status ran = reference::RunProgram(ctx_, main_.desc(), &scope);
  ASSERT_TRUE(ran.ok()) << ran;
  EXPECT_EQ(reference::Fetch<float>(scope, result).value(), want);
}

TEST_F(BuilderControlFlowTest, ErrorsNameTheProblemAndLeaveTheProgramAsItWas) {
  ProgramGuard guard(main_, startup_);
  const Var x = Data("x", Shape({4})).value();
  const Var v = Data("v", Shape({3})).value();
  const Var p = Data("p", Shape(), DataType::kBool).value();
  auto just = [](Value value) {
    return [value]() -> absl::StatusOr<std::vector<Value>> { return std::vector<Value>{value}; };
  };
  const std::string before = main_.desc().ToText();
  auto expect_unchanged = [&](const absl::Status& status, const std::string& part) {
    EXPECT_FALSE(status.ok()) << part;
    EXPECT_THAT(std::string(status.message()), HasSubstr(part));
    EXPECT_EQ(main_.desc().ToText(), before) << part;
    EXPECT_EQ(main_.current_block(), 0) << part;
  };
  expect_unchanged(fn::Cond(x, just(x), just(x)).status(),
                   "cond: the predicate must be a bool scalar, not f32[4]");
  expect_unchanged(
      fn::Cond(p, just(x), just(v)).status(),
      "cond: value 0 is f32[4] ('x') in the true branch but f32[3] ('v') in the false");
  expect_unchanged(
      fn::Cond(p, just(x),
               []() -> absl::StatusOr<std::vector<Value>> { return std::vector<Value>{}; })
          .status(),
      "the true branch returns 1 values but the false branch 0");
  expect_unchanged(fn::Cond(p, just(x),
                            []() -> absl::StatusOr<std::vector<Value>> {
                              return absl::InternalError("branch failed");
                            })
                       .status(),
                   "branch failed");
  // A value made in the true branch is not visible from the false one.
  Value made = x;
  auto make = [&]() -> absl::StatusOr<std::vector<Value>> {
    SLUICE_ASSIGN_OR_RETURN(made, fn::Relu(x));
    return std::vector<Value>{made};
  };
  expect_unchanged(
      fn::Cond(p, make,
               [&]() -> absl::StatusOr<std::vector<Value>> { return std::vector<Value>{made}; })
          .status(),
      "cannot see");
  // Feeds belong to block 0.
  expect_unchanged(fn::Cond(p, just(x),
                            []() -> absl::StatusOr<std::vector<Value>> {
                              SLUICE_ASSIGN_OR_RETURN(Var fed, Data("late", Shape({4})));
                              return std::vector<Value>{fed};
                            })
                       .status(),
                   "Data('late'): feeds belong to the global block");
  auto forever = [&](const std::vector<Value>&) -> absl::StatusOr<Value> { return Value(p); };
  auto same = [](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
    return vars;
  };
  expect_unchanged(
      fn::WhileLoop(forever,
                    [&](const std::vector<Value>&) -> absl::StatusOr<std::vector<Value>> {
                      return std::vector<Value>{v};
                    },
                    {x})
          .status(),
      "while_loop: the body returns f32[3] for loop variable 0, which is f32[4]");
  expect_unchanged(
      fn::WhileLoop([&](const std::vector<Value>&) -> absl::StatusOr<Value> { return Value(x); },
                    same, {x})
          .status(),
      "while_loop: the condition must be a bool scalar, not f32[4]");
  expect_unchanged(fn::WhileLoop(forever, same, {x, x}).status(),
                   "'x' is given twice as a loop variable");
  expect_unchanged(fn::WhileLoop(forever, same, {}).status(), "while_loop: no loop variables");
  fn::WhileOptions zero;
  zero.max_iterations = 0;
  expect_unchanged(fn::WhileLoop(forever, same, {x}, zero).status(),
                   "max_iterations must be at least 1, not 0");
  eager::Tensor t = ctx_.FromVector(std::vector<float>{1, 2, 3, 4}, Shape({4})).value();
  expect_unchanged(fn::WhileLoop(forever, same, {x, t}).status(),
                   "loop variable 1 is an eager Tensor but loop variable 0 is not");
  expect_unchanged(fn::Cond(p, just(x), just(t)).status(),
                   "cond: the false branch's value 0 is an eager Tensor in a static cond");
  // A failure after a nested call succeeded: the nested blocks go too.
  expect_unchanged(
      fn::WhileLoop(forever,
                    [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_RETURN_IF_ERROR(fn::Cond(p, just(x), just(x)).status());
                      return absl::InternalError("body failed after a cond");
                    },
                    {x})
          .status(),
      "body failed after a cond");
  // Writing a variable of an enclosing block from a branch.
  expect_unchanged(fn::Cond(
                       p,
                       [&]() -> absl::StatusOr<std::vector<Value>> {
                         SLUICE_RETURN_IF_ERROR(AppendOpInto(main_, "relu", {{x}}, {{v}}));
                         return std::vector<Value>{x};
                       },
                       just(x))
                       .status(),
                   "is a variable of an enclosing block");
  // Parameters belong to block 0.
  expect_unchanged(
      fn::Cond(
          p,
          [&]() -> absl::StatusOr<std::vector<Value>> {
            SLUICE_ASSIGN_OR_RETURN(
                Var w, CreatePersistable(main_, startup_, {"w", Shape({4}), DataType::kF32, true},
                                         "fill_constant", vm::AttrMap()));
            return std::vector<Value>{w};
          },
          just(x))
          .status(),
      "create parameters and other persistables outside cond branches");
  // A predicate made inside a branch is not visible after it.
  Value inner_pred = p;
  ASSERT_TRUE(fn::Cond(
                  p,
                  [&]() -> absl::StatusOr<std::vector<Value>> {
                    SLUICE_ASSIGN_OR_RETURN(inner_pred, fn::LogicalNot(p));
                    return std::vector<Value>{x};
                  },
                  just(x))
                  .ok());
  const std::string after_one = main_.desc().ToText();
  const absl::Status hidden = fn::Cond(inner_pred, just(x), just(x)).status();
  EXPECT_THAT(std::string(hidden.message()), HasSubstr("a block this one cannot see"));
  EXPECT_EQ(main_.desc().ToText(), after_one);
}

TEST_F(BuilderControlFlowTest, OutputNamesSkipTakenOnes) {
  ProgramGuard guard(main_, startup_);
  const Var x = Data("x", Shape({4})).value();
  const Var p = Data("p", Shape(), DataType::kBool).value();
  ASSERT_TRUE(Data("cond_0.out_1", Shape({4})).ok());  // a feed that takes a generated name
  auto both = [&]() -> absl::StatusOr<std::vector<Value>> { return std::vector<Value>{x, x}; };
  absl::StatusOr<std::vector<Value>> out = fn::Cond(p, both, both);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].var().name(), "cond_1.out_0");
  EXPECT_EQ((*out)[1].var().name(), "cond_1.out_1");
  EXPECT_TRUE(main_.desc().Validate().ok()) << main_.desc().Validate();
}

TEST_F(BuilderControlFlowTest, EagerCondRefusesStaticResults) {
  eager::Tensor p = fn::FillConstant(Shape(), 1, DataType::kBool, &ctx_).value().tensor();
  ProgramGuard guard(main_, startup_);
  const Var x = Data("x", Shape({4})).value();
  auto static_x = [&]() -> absl::StatusOr<std::vector<Value>> { return std::vector<Value>{x}; };
  EXPECT_THAT(std::string(fn::Cond(p, static_x, static_x).status().message()),
              HasSubstr("cond: the true branch returned a static Var as value 0 in an eager cond"));
}

TEST_F(BuilderControlFlowTest, StaticMaxIterationsIsEnforcedWhenTheProgramRuns) {
  std::string result;
  {
    ProgramGuard guard(main_, startup_);
    const Var x = Data("x", Shape({1})).value();
    const Var go = Data("go", Shape(), DataType::kBool).value();
    fn::WhileOptions options;
    options.max_iterations = 4;
    absl::StatusOr<std::vector<Value>> out =
        fn::WhileLoop([&](const std::vector<Value>&) -> absl::StatusOr<Value> { return Value(go); },
                      [](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                        SLUICE_ASSIGN_OR_RETURN(Value y, fn::Scale(vars[0], 2.0));
                        return std::vector<Value>{y};
                      },
                      {x}, options);
    ASSERT_TRUE(out.ok()) << out.status();
  }
  reference::Scope scope;
  ASSERT_TRUE(reference::Feed(ctx_, &scope, "x", std::vector<float>{1}, Shape({1})).ok());
  scope["go"] = fn::FillConstant(Shape(), 1, DataType::kBool, &ctx_).value().tensor();
  EXPECT_THAT(std::string(reference::RunProgram(ctx_, main_.desc(), &scope).message()),
              HasSubstr("'while': more than 4 iterations"));
}

// Eager: the predicate is read and the chosen function runs at once.
TEST_F(BuilderControlFlowTest, EagerCondRunsTheTakenBranchOnly) {
  eager::Tensor x = ctx_.FromVector(std::vector<float>{1, 2, 3, 4}, Shape({4})).value();
  for (bool pred : {true, false}) {
    int true_calls = 0, false_calls = 0;
    eager::Tensor p =
        fn::FillConstant(Shape(), pred ? 1 : 0, DataType::kBool, &ctx_).value().tensor();
    absl::StatusOr<std::vector<Value>> out = fn::Cond(
        p,
        [&]() -> absl::StatusOr<std::vector<Value>> {
          ++true_calls;
          SLUICE_ASSIGN_OR_RETURN(Value y, fn::Scale(x, 2.0));
          return std::vector<Value>{y};
        },
        [&]() -> absl::StatusOr<std::vector<Value>> {
          ++false_calls;
          return std::vector<Value>{x};
        });
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(true_calls, pred ? 1 : 0);
    EXPECT_EQ(false_calls, pred ? 0 : 1);
    const std::vector<float> got = (*out)[0].tensor().ToVector<float>().value();
    EXPECT_EQ(got, pred ? std::vector<float>({2, 4, 6, 8}) : std::vector<float>({1, 2, 3, 4}));
  }
  eager::Tensor not_bool = ctx_.FromVector(std::vector<float>{1}, Shape()).value();
  auto none = []() -> absl::StatusOr<std::vector<Value>> { return std::vector<Value>{}; };
  EXPECT_THAT(std::string(fn::Cond(not_bool, none, none).status().message()),
              HasSubstr("cond: the predicate must be a bool scalar, not f32[]"));
}

TEST_F(BuilderControlFlowTest, EagerWhileReadsItsConditionEachIteration) {
  eager::Tensor x = ctx_.FromVector(std::vector<float>{1, -1}, Shape({2})).value();
  int conditions = 0;
  // The condition is computed on the host from a counter (five runs of the body), then
  // made a tensor: the loop reads it back like any predicate.
  auto five = [&](const std::vector<Value>&) -> absl::StatusOr<Value> {
    return fn::FillConstant(Shape(), conditions++ < 5 ? 1 : 0, DataType::kBool, &ctx_);
  };
  auto twice = [](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
    SLUICE_ASSIGN_OR_RETURN(Value y, fn::Scale(vars[0], 2.0));
    return std::vector<Value>{y};
  };
  absl::StatusOr<std::vector<Value>> out = fn::WhileLoop(five, twice, {x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(conditions, 6);
  EXPECT_EQ((*out)[0].tensor().ToVector<float>().value(), (std::vector<float>{32, -32}));

  // Zero iterations: the loop variables come back as they were.
  conditions = 5;
  out = fn::WhileLoop(five, twice, {x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().ToVector<float>().value(), (std::vector<float>{1, -1}));

  conditions = 0;
  fn::WhileOptions three;
  three.max_iterations = 3;
  EXPECT_THAT(std::string(fn::WhileLoop(five, twice, {x}, three).status().message()),
              HasSubstr("while_loop: more than 3 iterations (max_iterations)"));
  conditions = 0;
  auto grows = [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
    SLUICE_ASSIGN_OR_RETURN(Value y, fn::Concat({vars[0], vars[0]}));
    return std::vector<Value>{y};
  };
  EXPECT_THAT(std::string(fn::WhileLoop(five, grows, {x}).status().message()),
              HasSubstr("the body returns f32[4] for loop variable 0, which is f32[2] "
                        "(iteration 0)"));
}

// A loop whose condition is computed by ops: i counts up to n, x doubles each time.
TEST_F(BuilderControlFlowTest, EagerWhileWithAComputedCondition) {
  eager::Tensor i = ctx_.FromVector(std::vector<int64_t>{0}, Shape()).value();
  eager::Tensor n = ctx_.FromVector(std::vector<int64_t>{7}, Shape()).value();
  eager::Tensor x = ctx_.FromVector(std::vector<float>{0.5f}, Shape({1})).value();
  absl::StatusOr<std::vector<Value>> out =
      fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                    [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                      SLUICE_ASSIGN_OR_RETURN(Value next_x, fn::Scale(vars[1], 2.0));
                      return std::vector<Value>{next_i, next_x};
                    },
                    {i, x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].tensor().ToVector<int64_t>().value(), std::vector<int64_t>{7});
  EXPECT_EQ((*out)[1].tensor().ToVector<float>().value(), std::vector<float>{64.0f});
}

// One loop function, two modes: a static program (run by the reference runner, which
// follows the IR's control-flow rules) gives the eager numbers. The body has a cond whose
// predicate changes every iteration.
TEST_F(BuilderControlFlowTest, SameNumbersEagerlyAndThroughAProgram) {
  const std::vector<float> xv = {0.5f, -1.0f, 2.0f};
  eager::Tensor i = ctx_.FromVector(std::vector<float>{0}, Shape()).value();
  eager::Tensor n = ctx_.FromVector(std::vector<float>{9}, Shape()).value();
  eager::Tensor x = ctx_.FromVector(xv, Shape({3})).value();
  eager::Tensor w = ctx_.FromVector(std::vector<float>{1, 1, 1}, Shape({3})).value();
  absl::StatusOr<std::vector<Value>> eager_out = LoopWithCond(i, n, x, w);
  ASSERT_TRUE(eager_out.ok()) << eager_out.status();
  const std::vector<float> want = (*eager_out)[1].tensor().ToVector<float>().value();
  EXPECT_EQ((*eager_out)[0].tensor().ToVector<float>().value(), std::vector<float>{9});

  std::vector<Value> static_out;
  {
    ProgramGuard guard(main_, startup_);
    const Var si = Data("i", Shape()).value();
    const Var sn = Data("n", Shape()).value();
    const Var sx = Data("x", Shape({3})).value();
    const Var sw = Data("w", Shape({3})).value();
    absl::StatusOr<std::vector<Value>> built = LoopWithCond(si, sn, sx, sw);
    ASSERT_TRUE(built.ok()) << built.status();
    static_out = *built;
  }
  ASSERT_TRUE(main_.desc().Validate().ok()) << main_.desc().Validate();
  reference::Scope scope;
  ASSERT_TRUE(reference::Feed(ctx_, &scope, "i", std::vector<float>{0}, Shape()).ok());
  ASSERT_TRUE(reference::Feed(ctx_, &scope, "n", std::vector<float>{9}, Shape()).ok());
  ASSERT_TRUE(reference::Feed(ctx_, &scope, "x", xv, Shape({3})).ok());
  ASSERT_TRUE(reference::Feed(ctx_, &scope, "w", std::vector<float>{1, 1, 1}, Shape({3})).ok());
  const absl::Status ran = reference::RunProgram(ctx_, main_.desc(), &scope);
  ASSERT_TRUE(ran.ok()) << ran;
  EXPECT_EQ(reference::Fetch<float>(scope, static_out[1].var().name()).value(), want);
  EXPECT_EQ(reference::Fetch<float>(scope, static_out[0].var().name()).value(),
            std::vector<float>{9});
  // The loop ran: the result is not the input.
  EXPECT_NE(want, xv);
}

}  // namespace
}  // namespace sluice::framework::builder_control_flow_test
