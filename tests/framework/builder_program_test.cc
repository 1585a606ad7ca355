// framework/builder/program.h: Data and AppendOp build checked, normalized ops with inferred
// output variables; unique names; the ProgramGuard stack nests and restores per thread; and
// every error names the op and operand and leaves the program unchanged.
#include <thread>

#include "core/status.h"
#include "framework/builder/program.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"

namespace sluice::framework::builder_program_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BuilderProgramTest : public ::testing::Test {
 protected:
  BuilderProgramTest() { SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok()); }

  const ir::BlockDesc& block(const Program& p) const { return p.desc().global_block(); }

  ops::OpRegistry registry_;
};

TEST_F(BuilderProgramTest, DataAndAppendOpInferOutputs) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  absl::StatusOr<Var> x = Data("x", Shape({4, 3}));
  absl::StatusOr<Var> y = Data("y", Shape({3, 5}), DataType::kF64);
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(x->desc().stop_gradient);
  EXPECT_FALSE(x->desc().persistable);
  EXPECT_EQ(y->dtype(), DataType::kF64);

  absl::StatusOr<Var> w = Data("w", Shape({3, 5}));
  ASSERT_TRUE(w.ok());
  auto out = AppendOp(main, "matmul", {{*x}, {*w}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  ASSERT_EQ((*out)[0].size(), 1u);
  const Var& product = (*out)[0][0];
  EXPECT_EQ(product.name(), "matmul_0.out");
  EXPECT_EQ(product.shape(), Shape({4, 5}));
  EXPECT_EQ(product.dtype(), DataType::kF32);
  EXPECT_FALSE(product.stop_gradient());
  EXPECT_EQ(product.program(), &main);

  ASSERT_EQ(block(main).ops().size(), 1u);
  const ir::OpDesc& op = block(main).ops()[0];
  EXPECT_EQ(op.type, "matmul");
  EXPECT_THAT(op.Input("X"), ElementsAre("x"));
  EXPECT_THAT(op.Input("Y"), ElementsAre("w"));
  EXPECT_THAT(op.Output("Out"), ElementsAre("matmul_0.out"));
  // Normalized: defaults stored.
  EXPECT_EQ(op.attrs.GetInt("transpose_x").value(), 0);
  EXPECT_EQ(op.attrs.GetInt("transpose_y").value(), 0);
  // Nothing went to the startup program.
  EXPECT_TRUE(block(startup).ops().empty());
  EXPECT_TRUE(block(startup).vars().empty());
}

TEST_F(BuilderProgramTest, MultiAndVariadicOutputsAreNamedPerSlot) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  Var x = Data("x", Shape({4, 6})).value();
  auto parts =
      AppendOp(main, "split", {{x}}, vm::AttrMap().Set("num", int64_t{3}).Set("axis", int64_t{1}));
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ((*parts)[0].size(), 3u);
  EXPECT_EQ((*parts)[0][0].name(), "split_0.out_0");
  EXPECT_EQ((*parts)[0][2].name(), "split_0.out_2");
  EXPECT_EQ((*parts)[0][1].shape(), Shape({4, 2}));

  Var label = Data("label", Shape({4, 1}), DataType::kI64).value();
  auto xent = AppendOp(main, "softmax_with_cross_entropy", {{x}, {label}});
  ASSERT_TRUE(xent.ok()) << xent.status();
  EXPECT_EQ((*xent)[0][0].name(), "softmax_with_cross_entropy_0.softmax");
  EXPECT_EQ((*xent)[1][0].name(), "softmax_with_cross_entropy_0.loss");
  EXPECT_EQ((*xent)[1][0].shape(), Shape({4, 1}));

  // Explicit counts for a variadic output slot are checked against inference.
  auto wrong = AppendOp(main, "split", {{x}}, vm::AttrMap().Set("num", int64_t{2}), {3});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BuilderProgramTest, UniqueNamesCountPerPrefixAndSkipTakenNames) {
  Program main(&registry_);
  EXPECT_EQ(main.UniqueName("add"), "add_0");
  EXPECT_EQ(main.UniqueName("add"), "add_1");
  EXPECT_EQ(main.UniqueName("linear"), "linear_0");
  ir::VarDesc taken;
  taken.name = "mul_0";
  ASSERT_TRUE(CreateVar(main, taken).ok());
  EXPECT_EQ(main.UniqueName("mul"), "mul_1");

  // A data variable named like a generated output does not collide with it.
  Program other(&registry_), startup(&registry_);
  ProgramGuard guard(other, startup);
  Var x = Data("relu_0.out", Shape({2})).value();
  auto y = AppendOp(other, "relu", {{x}});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ((*y)[0][0].name(), "relu_1.out");
}

TEST_F(BuilderProgramTest, GuardsNestAndRestore) {
  EXPECT_EQ(CurrentMainProgram(), nullptr);
  EXPECT_EQ(CurrentStartupProgram(), nullptr);
  Program main1(&registry_), startup1(&registry_), main2(&registry_), startup2(&registry_);
  {
    ProgramGuard outer(main1, startup1);
    EXPECT_EQ(CurrentMainProgram(), &main1);
    EXPECT_EQ(CurrentStartupProgram(), &startup1);
    {
      ProgramGuard inner(main2, startup2);
      EXPECT_EQ(CurrentMainProgram(), &main2);
      EXPECT_EQ(CurrentStartupProgram(), &startup2);
      ASSERT_TRUE(Data("x", Shape({1})).ok());
    }
    EXPECT_EQ(CurrentMainProgram(), &main1);
    EXPECT_EQ(CurrentStartupProgram(), &startup1);
    ASSERT_TRUE(Data("x", Shape({1})).ok());  // main1's own x: no clash with main2's

    // The stack is per thread: another thread sees no guard.
    Program* seen = &main1;
    std::thread other([&seen] { seen = CurrentMainProgram(); });
    other.join();
    EXPECT_EQ(seen, nullptr);
  }
  EXPECT_EQ(CurrentMainProgram(), nullptr);
  EXPECT_TRUE(main1.desc().global_block().HasVar("x"));
  EXPECT_TRUE(main2.desc().global_block().HasVar("x"));
}

TEST_F(BuilderProgramTest, DataOutsideAGuardFails) {
  absl::StatusOr<Var> x = Data("x", Shape({2}));
  EXPECT_EQ(x.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(x.status().message(), HasSubstr("ProgramGuard"));
}

TEST_F(BuilderProgramTest, DuplicateDataNameFailsNamingIt) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  ASSERT_TRUE(Data("images", Shape({2})).ok());
  absl::StatusOr<Var> again = Data("images", Shape({3}));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("images"));
  EXPECT_EQ(block(main).vars().size(), 1u);
}

TEST_F(BuilderProgramTest, UnknownOpIsNotFoundNamingIt) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  Var x = Data("x", Shape({2})).value();
  auto out = AppendOp(main, "frobnicate", {{x}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(out.status().message(), HasSubstr("frobnicate"));
  EXPECT_TRUE(block(main).ops().empty());
}

TEST_F(BuilderProgramTest, BadShapesFailNamingTheOpAndAppendNothing) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  Var x = Data("x", Shape({4, 3})).value();
  Var w = Data("w", Shape({4, 5})).value();
  auto out = AppendOp(main, "matmul", {{x}, {w}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("matmul"));
  EXPECT_TRUE(block(main).ops().empty());
  EXPECT_EQ(block(main).vars().size(), 2u);

  Var z = Data("z", Shape({4, 2})).value();
  auto sum = AppendOp(main, "add", {{x}, {z}});
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sum.status().message(), HasSubstr("add"));
  EXPECT_TRUE(block(main).ops().empty());
}

TEST_F(BuilderProgramTest, WrongArityAndAttributesFailNamingTheOperand) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  Var x = Data("x", Shape({2, 2})).value();
  auto missing = AppendOp(main, "add", {{x}});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("'Y'"));
  EXPECT_THAT(missing.status().message(), HasSubstr("add"));

  auto two = AppendOp(main, "relu", {{x, x}});
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(two.status().message(), HasSubstr("relu"));

  auto attr = AppendOp(main, "relu", {{x}}, vm::AttrMap().Set("alpha", 0.5));
  EXPECT_EQ(attr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(attr.status().message(), HasSubstr("alpha"));

  auto empty = AppendOp(main, "relu", {{Var()}});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(block(main).ops().empty());
}

TEST_F(BuilderProgramTest, InputsOfAnotherProgramFail) {
  Program main1(&registry_), startup1(&registry_), main2(&registry_), startup2(&registry_);
  Var a, b;
  {
    ProgramGuard guard(main1, startup1);
    a = Data("a", Shape({3})).value();
  }
  {
    ProgramGuard guard(main2, startup2);
    b = Data("b", Shape({3})).value();
  }
  auto out = AppendOp(main1, "add", {{a}, {b}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("add"));
  EXPECT_THAT(out.status().message(), HasSubstr("'b'"));
  EXPECT_THAT(out.status().message(), HasSubstr("another Program"));
  EXPECT_TRUE(main1.desc().global_block().ops().empty());
}

TEST_F(BuilderProgramTest, StreamAttributeIsStoredButNotNormalized) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  Var x = Data("x", Shape({2, 3})).value();
  auto out =
      AppendOp(main, "softmax", {{x}}, vm::AttrMap().Set("stream", std::string("compute:1")));
  ASSERT_TRUE(out.ok()) << out.status();
  const ir::OpDesc& op = block(main).ops()[0];
  EXPECT_EQ(op.attrs.GetString("stream").value(), "compute:1");
  EXPECT_EQ(op.attrs.GetInt("axis").value(), -1);  // the schema default, filled in

  auto bad = AppendOp(main, "softmax", {{x}}, vm::AttrMap().Set("stream", int64_t{1}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("stream"));
}

TEST_F(BuilderProgramTest, AppendOpIntoChecksTheExistingOutputs) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  ir::VarDesc p;
  p.name = "p";
  p.shape = Shape({3});
  p.persistable = true;
  Var param = CreateVar(main, p).value();
  Var grad = Data("g", Shape({3})).value();
  Var lr = Data("lr", Shape({1})).value();
  Var wrong = Data("wrong", Shape({4})).value();

  absl::Status bad = AppendOpInto(main, "sgd", {{param}, {grad}, {lr}}, {{wrong}});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("sgd"));
  EXPECT_THAT(bad.message(), HasSubstr("wrong"));
  EXPECT_EQ(AppendOpInto(main, "sgd", {{param}, {grad}, {lr}}, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(block(main).ops().empty());

  ASSERT_TRUE(AppendOpInto(main, "sgd", {{param}, {grad}, {lr}}, {{param}}).ok());
  const ir::OpDesc& op = block(main).ops()[0];
  EXPECT_THAT(op.Output("ParamOut"), ElementsAre("p"));
  EXPECT_THAT(op.Input("Param"), ElementsAre("p"));
}

}  // namespace
}  // namespace sluice::framework::builder_program_test
