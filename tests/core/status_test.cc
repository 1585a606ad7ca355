// Tests for core/status.h (the two propagation macros and SLUICE_CHECK) and
// core/status_from_call.h.
#include "core/status.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/status_from_call.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

absl::Status ReturnIfErrorTwice(absl::Status first, absl::Status second, int* reached) {
  SLUICE_RETURN_IF_ERROR(first);
  ++*reached;
  SLUICE_RETURN_IF_ERROR(second);
  ++*reached;
  return absl::OkStatus();
}

TEST(StatusTest, ReturnIfErrorContinuesOnOk) {
  int reached = 0;
  EXPECT_TRUE(ReturnIfErrorTwice(absl::OkStatus(), absl::OkStatus(), &reached).ok());
  EXPECT_EQ(reached, 2);
}

TEST(StatusTest, ReturnIfErrorReturnsTheFirstError) {
  int reached = 0;
  const absl::Status status =
      ReturnIfErrorTwice(absl::NotFoundError("first"), absl::InternalError("second"), &reached);
  EXPECT_EQ(status, absl::NotFoundError("first"));
  EXPECT_EQ(reached, 0);

  reached = 0;
  EXPECT_EQ(ReturnIfErrorTwice(absl::OkStatus(), absl::InternalError("second"), &reached),
            absl::InternalError("second"));
  EXPECT_EQ(reached, 1);
}

TEST(StatusTest, ReturnIfErrorEvaluatesItsArgumentOnce) {
  int calls = 0;
  auto step = [&calls]() -> absl::Status {
    ++calls;
    return absl::OkStatus();
  };
  auto run = [&]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(step());
    return absl::OkStatus();
  };
  EXPECT_TRUE(run().ok());
  EXPECT_EQ(calls, 1);
}

TEST(StatusTest, ReturnIfErrorIsOneStatement) {
  // The macro must behave as a single statement inside an unbraced if/else.
  auto run = [](bool fail) -> absl::Status {
    if (fail)
      SLUICE_RETURN_IF_ERROR(absl::AbortedError("failed"));
    else
      return absl::OkStatus();
    return absl::UnknownError("unreachable");
  };
  EXPECT_TRUE(run(false).ok());
  EXPECT_EQ(run(true), absl::AbortedError("failed"));
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError(absl::StrCat(x, " is odd"));
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  SLUICE_ASSIGN_OR_RETURN(const int half, Half(x));
  int quarter = 0;
  SLUICE_ASSIGN_OR_RETURN(quarter, Half(half));  // an existing variable
  return quarter;
}

TEST(StatusTest, AssignOrReturnAssignsDeclarationsAndVariables) {
  absl::StatusOr<int> quarter = Quarter(12);
  ASSERT_TRUE(quarter.ok()) << quarter.status();
  EXPECT_EQ(*quarter, 3);
}

TEST(StatusTest, AssignOrReturnPropagatesTheError) {
  absl::StatusOr<int> quarter = Quarter(6);  // 6 / 2 = 3 is odd
  EXPECT_EQ(quarter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(quarter.status().message(), HasSubstr("3 is odd"));
  EXPECT_EQ(Quarter(7).status().message(), "7 is odd");
}

absl::StatusOr<std::unique_ptr<int>> MakeBox(bool ok) {
  if (!ok) return absl::UnavailableError("no box");
  return std::make_unique<int>(42);
}

absl::StatusOr<int> Unbox(bool ok) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<int> box, MakeBox(ok));
  return *box;
}

TEST(StatusTest, AssignOrReturnMovesMoveOnlyValues) {
  absl::StatusOr<int> value = Unbox(true);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 42);
  EXPECT_EQ(Unbox(false).status(), absl::UnavailableError("no box"));
}

TEST(StatusTest, CheckPassesWhenTheConditionHolds) {
  int evaluations = 0;
  SLUICE_CHECK(++evaluations == 1);
  EXPECT_EQ(evaluations, 1);
}

TEST(StatusTest, CheckAbortsNamingTheCondition) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int answer = 41;
  EXPECT_DEATH(SLUICE_CHECK(answer == 42), "SLUICE_CHECK failed: answer == 42");
  EXPECT_DEATH(SLUICE_CHECK(answer == 42), "status_test.cc");
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

TEST(StatusFromCallTest, ReturnsTheCalleesStatus) {
  EXPECT_TRUE(StatusFromCall("f", [] { return absl::OkStatus(); }).ok());
  const absl::Status s = StatusFromCall("f", [] { return absl::NotFoundError("gone"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "gone");
}

TEST(StatusFromCallTest, TurnsAStandardExceptionIntoAnInternalErrorNamingTheCallee) {
  const absl::Status s =
      StatusFromCall("kernel", []() -> absl::Status { throw std::out_of_range("index 9"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "kernel threw: index 9");
}

TEST(StatusFromCallTest, TurnsANonStandardExceptionIntoAnInternalError) {
  const absl::Status s = StatusFromCall("host task", []() -> absl::Status { throw 42; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "host task threw a non-standard exception");
}

}  // namespace
}  // namespace sluice
