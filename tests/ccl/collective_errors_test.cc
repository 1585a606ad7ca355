// Collective errors: ranks that disagree on a call (shape, dtype, reduction, kind, root, a
// transfer's two ends) get InvalidArgument on every rank, naming each rank's call, and the
// communicator still works afterwards; a bad root or peer, a transfer to oneself, an
// 'nranks' attribute that is not the world's size, and malformed calls each get an error
// naming the problem. Errors of a call that passed inference surface when the op runs: at
// Context::Sync or when the output is read.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ccl/ccl_test_util.h"

namespace sluice::ccltest::collective_errors_test {
namespace {

using eager::Tensor;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

template <typename T>
Tensor Make(eager::Context& ctx, DataType dtype, const Shape& shape, const char* device, int salt) {
  return MakeTensor(ctx, dtype, Values<T>(eager::WorldRank(ctx), shape.NumElements(), salt), shape,
                    Dev(device))
      .value();
}

// After an error: an all_reduce that every rank makes alike still gives the sum.
void ExpectAllReduceWorks(eager::Context& ctx, const char* device) {
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  Tensor x = Make<float>(ctx, DataType::kF32, Shape({5}), device, 77);
  absl::StatusOr<Tensor> y = eager::AllReduce(x);
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<std::vector<float>> got = Read<float>(*y);
  ASSERT_TRUE(got.ok()) << "rank " << rank << ": " << got.status();
  EXPECT_EQ(Diff(*got, Reduction<float>(ReduceOp::kSum, size, 5, 77)), "");
  EXPECT_TRUE(ctx.Sync().ok());
}

class CollectiveErrorsTest : public ::testing::TestWithParam<const char*> {
 protected:
  eager::Context& ctx() { return ErrorsContext(); }
  int rank() { return eager::WorldRank(ctx()); }
  int size() { return eager::WorldSize(ctx()); }
  Device device() { return Dev(GetParam()); }
};

// Rank 1 passes another shape: every rank's read of the output fails with InvalidArgument
// naming both calls, the context's Sync reports it too, and the next matching collective
// works.
TEST_P(CollectiveErrorsTest, RanksDisagreeingOnAShape) {
  if (size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  Tensor x = Make<float>(ctx(), DataType::kF32, Shape({rank() == 1 ? 5 : 4}), GetParam(), 1);
  absl::StatusOr<Tensor> y = eager::AllReduce(x);
  ASSERT_TRUE(y.ok()) << y.status();  // inference sees this rank's call alone
  absl::StatusOr<std::vector<float>> got = Read<float>(*y);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  EXPECT_THAT(Message(got.status()), AllOf(HasSubstr(absl::StrCat("rank ", rank(), " of ", size())),
                                           HasSubstr("ranks disagree on all_reduce(sum)"),
                                           HasSubstr("rank 0 calls all_reduce(sum) of f32[4]"),
                                           HasSubstr("rank 1 calls all_reduce(sum) of f32[5]")));
  const absl::Status synced = ctx().Sync();
  EXPECT_EQ(synced.code(), absl::StatusCode::kInvalidArgument) << synced;
  EXPECT_THAT(Message(synced), HasSubstr("ranks disagree"));
  ExpectAllReduceWorks(ctx(), GetParam());
}

// The same number of elements in another shape is a disagreement too.
TEST_P(CollectiveErrorsTest, RanksDisagreeingOnTheDimensionsOfOneCount) {
  if (size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  Tensor x = Make<float>(ctx(), DataType::kF32, rank() == 1 ? Shape({3, 2}) : Shape({2, 3}),
                         GetParam(), 2);
  absl::StatusOr<Tensor> y = eager::Broadcast(x, 0);
  ASSERT_TRUE(y.ok()) << y.status();
  const absl::Status status = ctx().Sync();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(Message(status), AllOf(HasSubstr("ranks disagree"),
                                     HasSubstr("rank 0 calls broadcast of f32[2, 3] with root 0"),
                                     HasSubstr("rank 1 calls broadcast of f32[3, 2] with root 0")));
  EXPECT_FALSE(y->ToBytes().ok());
  ExpectAllReduceWorks(ctx(), GetParam());
}

// Rank 1 passes i32 where the others pass f32.
TEST_P(CollectiveErrorsTest, RanksDisagreeingOnADtype) {
  if (size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  Tensor x = rank() == 1 ? Make<int32_t>(ctx(), DataType::kI32, Shape({6}), GetParam(), 3)
                         : Make<float>(ctx(), DataType::kF32, Shape({6}), GetParam(), 3);
  absl::StatusOr<Tensor> y = eager::AllGather(x);
  ASSERT_TRUE(y.ok()) << y.status();
  const absl::Status status = ctx().Sync();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(Message(status),
              AllOf(HasSubstr("ranks disagree"), HasSubstr("rank 0 calls all_gather of f32[6]"),
                    HasSubstr("rank 1 calls all_gather of i32[6]")));
  ExpectAllReduceWorks(ctx(), GetParam());
}

// Rank 1 reduces with max, the others with sum; then rank 1 calls another kind of
// collective; then another root.
TEST_P(CollectiveErrorsTest, RanksDisagreeingOnTheReductionKindOrRoot) {
  if (size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  Tensor x = Make<double>(ctx(), DataType::kF64, Shape({2 * size()}), GetParam(), 4);
  {
    absl::StatusOr<Tensor> y =
        eager::ReduceScatter(x, rank() == 1 ? ReduceOp::kMax : ReduceOp::kSum);
    ASSERT_TRUE(y.ok()) << y.status();
    const absl::Status status = ctx().Sync();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(
        Message(status),
        AllOf(
            HasSubstr("ranks disagree"),
            HasSubstr(absl::StrCat("rank 0 calls reduce_scatter(sum) of f64[", 2 * size(), "]")),
            HasSubstr(absl::StrCat("rank 1 calls reduce_scatter(max) of f64[", 2 * size(), "]"))));
  }
  {
    absl::StatusOr<Tensor> y = rank() == 1 ? eager::Broadcast(x, 0) : eager::AllReduce(x);
    ASSERT_TRUE(y.ok()) << y.status();
    const absl::Status status = ctx().Sync();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status),
                AllOf(HasSubstr("ranks disagree"), HasSubstr("rank 0 calls all_reduce(sum) of f64"),
                      HasSubstr("rank 1 calls broadcast of f64")));
  }
  {
    absl::StatusOr<Tensor> y = eager::Reduce(x, rank() == 1 ? 1 : 0);
    ASSERT_TRUE(y.ok()) << y.status();
    const absl::Status status = ctx().Sync();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), AllOf(HasSubstr("ranks disagree"), HasSubstr("with root 0"),
                                       HasSubstr("with root 1")));
  }
  ExpectAllReduceWorks(ctx(), GetParam());
}

// Several disagreements in a row, then many matching calls: the ranks' call counts stay in
// step (a failed call counts on none of them).
TEST_P(CollectiveErrorsTest, RepeatedDisagreementsLeaveTheCommunicatorInStep) {
  if (size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  for (int i = 0; i < 3; ++i) {
    Tensor x = Make<float>(ctx(), DataType::kF32, Shape({rank() == 1 ? 2 + i : 1}), GetParam(), i);
    ASSERT_TRUE(eager::AllReduce(x).ok());
  }
  EXPECT_EQ(ctx().Sync().code(), absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < 5; ++i) ExpectAllReduceWorks(ctx(), GetParam());
}

// The two ends of a transfer disagree on the shape (rank 1 expects more), then on the kind
// (ranks 0 and 1 both send): InvalidArgument on both ends naming both calls; the other
// ranks take no part. Then a matching pair works.
TEST_P(CollectiveErrorsTest, TransferEndsDisagree) {
  if (size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  Tensor x = Make<float>(ctx(), DataType::kF32, Shape({3}), GetParam(), 5);
  if (rank() == 0) {
    EXPECT_TRUE(eager::Send(x, 1).ok());
  } else if (rank() == 1) {
    EXPECT_TRUE(eager::Recv(ctx(), DataType::kF32, Shape({4}), 0, device()).ok());
  }
  absl::Status status = ctx().Sync();
  if (rank() < 2) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(
        Message(status),
        AllOf(HasSubstr("ranks disagree on a transfer"), HasSubstr("rank 0 calls send of f32[3]"),
              HasSubstr("to rank 1"), HasSubstr("from rank 0"), HasSubstr("f32[4]")));
  } else {
    EXPECT_TRUE(status.ok()) << status;
  }
  if (rank() < 2) {
    EXPECT_TRUE(eager::Send(x, 1 - rank()).ok());
  }
  status = ctx().Sync();
  if (rank() < 2) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status),
                AllOf(HasSubstr("ranks disagree on a transfer"), HasSubstr("rank 0 calls send"),
                      HasSubstr("rank 1 calls send")));
  }
  // A matching pair: 0 -> 1.
  if (rank() == 0) {
    EXPECT_TRUE(eager::Send(x, 1).ok());
  } else if (rank() == 1) {
    absl::StatusOr<Tensor> y = eager::Recv(ctx(), DataType::kF32, Shape({3}), 0, device());
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(Diff(Read<float>(*y).value(), Values<float>(0, 3, 5)), "");
  }
  EXPECT_TRUE(ctx().Sync().ok());
  ExpectAllReduceWorks(ctx(), GetParam());
}

// A root or peer outside the world: a negative one is refused at the call; one past the
// last rank when the op runs, naming the rank and the world's size. The same on every rank,
// and nothing moves, so the communicator is unharmed.
TEST_P(CollectiveErrorsTest, RootOrPeerOutsideTheWorld) {
  Tensor x = Make<float>(ctx(), DataType::kF32, Shape({3}), GetParam(), 6);
  const std::string outside =
      absl::StrCat("rank ", size(), " is outside the world of ", size(), " rank");
  for (int kind = 0; kind < 4; ++kind) {
    SCOPED_TRACE(kind);
    absl::Status called;
    switch (kind) {
      case 0:
        called = eager::Broadcast(x, size()).status();
        break;
      case 1:
        called = eager::Reduce(x, size()).status();
        break;
      case 2:
        called = eager::Send(x, size());
        break;
      case 3:
        called = eager::Recv(ctx(), DataType::kF32, Shape({3}), size(), device()).status();
        break;
    }
    ASSERT_TRUE(called.ok()) << called;
    const absl::Status status = ctx().Sync();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), HasSubstr(outside));
  }
  const absl::Status negative[] = {
      eager::Broadcast(x, -1).status(), eager::Reduce(x, -1).status(), eager::Send(x, -1),
      eager::Recv(ctx(), DataType::kF32, Shape({3}), -1, device()).status()};
  for (const absl::Status& status : negative) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), HasSubstr("is -1; expected >= 0"));
  }
  EXPECT_TRUE(ctx().Sync().ok());
  ExpectAllReduceWorks(ctx(), GetParam());
}

// A transfer to this rank itself.
TEST_P(CollectiveErrorsTest, TransferToItself) {
  Tensor x = Make<float>(ctx(), DataType::kF32, Shape({2}), GetParam(), 7);
  ASSERT_TRUE(eager::Send(x, rank()).ok());
  absl::Status status = ctx().Sync();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(Message(status), HasSubstr(absl::StrCat("rank ", rank(), " cannot send to itself")));
  absl::StatusOr<Tensor> y = eager::Recv(ctx(), DataType::kF32, Shape({2}), rank(), device());
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Message(y->ToBytes().status()),
              HasSubstr(absl::StrCat("rank ", rank(), " cannot recv to itself")));
  EXPECT_FALSE(ctx().Sync().ok());
  ExpectAllReduceWorks(ctx(), GetParam());
}

// 'nranks' (filled in by the front end) set by hand to another size: the kernel refuses it
// naming both sizes; inference refuses one that is not positive or does not divide.
TEST_P(CollectiveErrorsTest, NranksNotTheWorldsSize) {
  Tensor x = Make<float>(ctx(), DataType::kF32, Shape({2 * (size() + 1)}), GetParam(), 8);
  const std::string want =
      absl::StrCat("attribute 'nranks' is ", size() + 1, " but the world has ", size(), " rank");
  for (const char* op : {"all_gather", "reduce_scatter"}) {
    SCOPED_TRACE(op);
    vm::AttrMap attrs;
    attrs.Set("nranks", int64_t{size() + 1});
    absl::StatusOr<std::vector<Tensor>> y = ctx().Call(op, {{x}}, attrs);
    ASSERT_TRUE(y.ok()) << y.status();
    const absl::Status status = ctx().Sync();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), AllOf(HasSubstr(op), HasSubstr(want)));
  }
  {
    vm::AttrMap attrs;
    attrs.Set("nranks", int64_t{0});
    const absl::Status status = ctx().Call("all_gather", {{x}}, attrs).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), HasSubstr("attribute 'nranks' is 0; expected >= 1"));
  }
  {
    vm::AttrMap attrs;
    attrs.Set("nranks", int64_t{4 * (size() + 1)});  // does not divide 2 * (size + 1)
    const absl::Status status = ctx().Call("reduce_scatter", {{x}}, attrs).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), HasSubstr("must have a first dimension divisible by nranks"));
  }
  {
    // all_gather without 'nranks' at all: the attribute has no default.
    const absl::Status status = ctx().Call("all_gather", {{x}}).status();
    EXPECT_FALSE(status.ok());
    EXPECT_THAT(Message(status), HasSubstr("nranks"));
  }
  EXPECT_TRUE(ctx().Sync().ok());
  ExpectAllReduceWorks(ctx(), GetParam());
}

// Calls refused before anything is enqueued: an unknown reduction, a bucket of two dtypes
// or two devices, a scalar to gather, a first dimension that does not split.
TEST_P(CollectiveErrorsTest, MalformedCallsAreRefusedAtTheCall) {
  Tensor x = Make<float>(ctx(), DataType::kF32, Shape({2 * size() + 1}), GetParam(), 9);
  Tensor i = Make<int32_t>(ctx(), DataType::kI32, Shape({2}), GetParam(), 9);
  Tensor other = Make<float>(ctx(), DataType::kF32, Shape({2}),
                             std::string(GetParam()) == "cpu" ? "sim:1" : "cpu", 9);
  {
    vm::AttrMap attrs;
    attrs.Set("reduce", std::string("prod"));
    const absl::Status status = ctx().Call("all_reduce", {{x}}, attrs).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status),
                AllOf(HasSubstr("unknown reduction 'prod'"), HasSubstr("sum, mean, max or min")));
  }
  {
    const absl::Status status = eager::AllReduce(std::vector<Tensor>{x, i}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), HasSubstr("every X must have one dtype"));
  }
  {
    const absl::Status status = eager::AllReduce(std::vector<Tensor>{x, other}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), HasSubstr("every operand must be on one device"));
  }
  {
    Tensor s = Make<float>(ctx(), DataType::kF32, Shape({}), GetParam(), 9);
    const absl::Status status = eager::AllGather(s).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), HasSubstr("at least one dimension"));
  }
  if (size() > 1) {
    const absl::Status status = eager::ReduceScatter(x).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), HasSubstr("divisible by nranks"));
  }
  EXPECT_FALSE(eager::AllReduce(Tensor()).ok());
  EXPECT_TRUE(ctx().Sync().ok());
  ExpectAllReduceWorks(ctx(), GetParam());
}

// An all_reduce of several tensors is one packed call on a host communicator; the ranks
// compare the parts' element counts, so a rank packing tensors of 4 and 3 elements where
// the others pack 3 and 4 is reported, not summed across tensor boundaries.
TEST_P(CollectiveErrorsTest, RanksDisagreeingOnTheTensorsOfABucket) {
  if (size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  const std::vector<int64_t> counts =
      rank() == 1 ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4};
  std::vector<Tensor> xs;
  for (int64_t n : counts)
    xs.push_back(Make<float>(ctx(), DataType::kF32, Shape({n}), GetParam(), 10));
  absl::StatusOr<std::vector<Tensor>> ys = eager::AllReduce(xs);
  ASSERT_TRUE(ys.ok()) << ys.status();
  const absl::Status status = ctx().Sync();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(Message(status),
              AllOf(HasSubstr("ranks disagree"), HasSubstr("rank 0"), HasSubstr("rank 1")));
  ExpectAllReduceWorks(ctx(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, CollectiveErrorsTest, ::testing::Values("cpu", "sim:0"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "cpu" ? "cpu" : "sim_0";
                         });

}  // namespace
}  // namespace sluice::ccltest::collective_errors_test
