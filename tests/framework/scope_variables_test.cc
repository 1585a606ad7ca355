// ReadVariable / WriteVariable: one scope variable read to and written from the host by
// name; a write is seen by the next run, a read sees what the last run wrote; a write of
// another dtype or shape replaces the variable; errors name the variable.
#include "framework/io/scope_variables.h"

#include <memory>
#include <vector>

#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::io::scope_variables_test {
namespace {

using program_test::AddVar;
using program_test::Op;
using program_test::Var;
using ::testing::HasSubstr;

class ScopeVariablesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = program_test::NewContext();
    ASSERT_NE(context_, nullptr);
    executor_ = std::make_unique<Executor>(&context_->registry(), context_->vm());
  }

  std::unique_ptr<eager::Context> context_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ScopeVariablesTest, WriteIsSeenByTheNextRunAndReadSeesItsResult) {
  Scope scope;
  ASSERT_TRUE(
      WriteVariable(*executor_, &scope, "w", HostTensor::FromVector<float>({1, 2, 3}, Shape({3})))
          .ok());
  // w = w * 2 (scale), a persistable updated in place.
  ir::ProgramDesc program;
  ir::BlockDesc& block = program.mutable_global_block();
  AddVar(block, Var("w", Shape({3}), /*persistable=*/true));
  AddVar(block, Var("t", Shape({3})));
  vm::AttrMap attrs;
  attrs.Set("scale", 2.0);
  block.AppendOp(Op("scale", {{"X", {"w"}}}, {{"Out", {"t"}}}, attrs));
  block.AppendOp(Op("assign", {{"X", {"t"}}}, {{"Out", {"w"}}}, {}));
  ASSERT_TRUE(executor_->Run(program, {}, {}, &scope).ok());
  absl::StatusOr<HostTensor> read = ReadVariable(*executor_, &scope, "w");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->dtype, DataType::kF32);
  EXPECT_EQ(read->shape, Shape({3}));
  EXPECT_EQ(read->ToVector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST_F(ScopeVariablesTest, WriteOfAnotherDtypeOrShapeReplacesTheVariable) {
  Scope scope;
  ASSERT_TRUE(
      WriteVariable(*executor_, &scope, "v", HostTensor::FromVector<float>({1, 2}, Shape({2})))
          .ok());
  ASSERT_TRUE(WriteVariable(*executor_, &scope, "v",
                            HostTensor::FromVector<int64_t>({7, 8, 9}, Shape({3, 1})))
                  .ok());
  absl::StatusOr<HostTensor> read = ReadVariable(*executor_, &scope, "v");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->dtype, DataType::kI64);
  EXPECT_EQ(read->shape, Shape({3, 1}));
  EXPECT_EQ(read->ToVector<int64_t>(), (std::vector<int64_t>{7, 8, 9}));
}

TEST_F(ScopeVariablesTest, ErrorsNameTheVariable) {
  Scope scope;
  absl::StatusOr<HostTensor> missing = ReadVariable(*executor_, &scope, "nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("'nope'"));
  HostTensor short_value = HostTensor::FromVector<float>({1, 2}, Shape({3}));
  const absl::Status bad = WriteVariable(*executor_, &scope, "w", short_value);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("'w'"));
  EXPECT_EQ(scope.Find("w"), nullptr);  // nothing stored
  EXPECT_EQ(WriteVariable(*executor_, &scope, "", short_value).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::framework::io::scope_variables_test
