// The collective ops (ops/collective_ops.cc) through the eager front end
// (framework/eager/collectives.h), on every dtype and on cpu and sim:0, for sizes 0, 1, 7
// and 4096 (2^20 for a few combinations): every rank's result equals a host reference
// computed from the values each rank generates from (rank, index). Values are small
// integers, so sums are exact in every dtype and results are compared exactly. Run alone
// (one rank: each collective is a copy) and under mpirun with 2 and 3 ranks.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ccl/ccl_test_util.h"

namespace sluice::ccltest::collective_ops_test {
namespace {

using eager::Tensor;
using ::testing::HasSubstr;

enum class Kind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kRing };

struct Case {
  Kind kind;
  ReduceOp reduce = ReduceOp::kSum;
  int root = 0;

  std::string Name() const {
    switch (kind) {
      case Kind::kAllReduce:
        return absl::StrCat("all_reduce(", ep::ccl::ReduceOpName(reduce), ")");
      case Kind::kAllGather:
        return "all_gather";
      case Kind::kReduceScatter:
        return absl::StrCat("reduce_scatter(", ep::ccl::ReduceOpName(reduce), ")");
      case Kind::kBroadcast:
        return absl::StrCat("broadcast from ", root);
      case Kind::kReduce:
        return absl::StrCat("reduce(", ep::ccl::ReduceOpName(reduce), ") to ", root);
      case Kind::kRing:
        return "send/recv ring";
    }
    return "?";
  }
};

// Every op with the reductions that apply to `dtype` (no mean on bool), broadcast from and
// reduce to every root, and a send/recv ring when there is more than one rank.
std::vector<Case> CasesFor(DataType dtype, int size) {
  const bool is_bool = dtype == DataType::kBool;
  std::vector<Case> cases;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
    if (is_bool && op == ReduceOp::kMean) continue;
    cases.push_back({Kind::kAllReduce, op});
  }
  cases.push_back({Kind::kAllGather});
  cases.push_back({Kind::kReduceScatter, ReduceOp::kSum});
  cases.push_back({Kind::kReduceScatter, is_bool ? ReduceOp::kMin : ReduceOp::kMean});
  for (int root = 0; root < size; ++root) {
    cases.push_back({Kind::kBroadcast, ReduceOp::kSum, root});
    cases.push_back({Kind::kReduce, ReduceOp::kSum, root});
  }
  cases.push_back({Kind::kReduce, ReduceOp::kMax, size - 1});
  cases.push_back({Kind::kReduce, is_bool ? ReduceOp::kMin : ReduceOp::kMean, 0});
  if (size > 1) cases.push_back({Kind::kRing});
  return cases;
}

// Runs `c` on `count` elements per rank (reduce_scatter: count x size in, count out) and
// compares with the host reference.
template <typename T>
void RunCase(eager::Context& ctx, const Case& c, DataType dtype, Device device, int64_t count,
             int salt) {
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  const int64_t in_count = c.kind == Kind::kReduceScatter ? count * size : count;
  absl::StatusOr<Tensor> x =
      MakeTensor(ctx, dtype, Values<T>(rank, in_count, salt), Shape({in_count}), device);
  ASSERT_TRUE(x.ok()) << x.status();
  absl::StatusOr<Tensor> y;
  std::vector<T> want;
  Shape want_shape({count});
  switch (c.kind) {
    case Kind::kAllReduce:
      y = eager::AllReduce(*x, c.reduce);
      want = Reduction<T>(c.reduce, size, count, salt);
      break;
    case Kind::kAllGather:
      y = eager::AllGather(*x);
      for (int r = 0; r < size; ++r) {
        const std::vector<T> part = Values<T>(r, count, salt);
        want.insert(want.end(), part.begin(), part.end());
      }
      want_shape = Shape({count * size});
      break;
    case Kind::kReduceScatter: {
      y = eager::ReduceScatter(*x, c.reduce);
      const std::vector<T> full = Reduction<T>(c.reduce, size, count * size, salt);
      want.assign(full.begin() + rank * count, full.begin() + (rank + 1) * count);
      break;
    }
    case Kind::kBroadcast:
      y = eager::Broadcast(*x, c.root);
      want = Values<T>(c.root, count, salt);
      break;
    case Kind::kReduce:
      y = eager::Reduce(*x, c.root, c.reduce);
      want = rank == c.root ? Reduction<T>(c.reduce, size, count, salt)
                            : std::vector<T>(static_cast<size_t>(count), T{0});
      break;
    case Kind::kRing: {
      // Rank 0 sends first and every other rank receives first: each transfer's two ends
      // meet without a cycle of waits.
      const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
      if (rank == 0) {
        EXPECT_TRUE(eager::Send(*x, next).ok());
      }
      y = eager::Recv(ctx, dtype, Shape({count}), prev, device);
      if (rank != 0) {
        EXPECT_TRUE(eager::Send(*x, next).ok());
      }
      want = Values<T>(prev, count, salt);
      break;
    }
  }
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), dtype);
  EXPECT_EQ(y->shape(), want_shape);
  EXPECT_EQ(y->device(), device);
  absl::StatusOr<std::vector<T>> got = Read<T>(*y);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Diff(*got, want), "");
}

void RunCaseAnyDtype(eager::Context& ctx, const Case& c, DataType dtype, Device device,
                     int64_t count, int salt) {
  SCOPED_TRACE(absl::StrCat(c.Name(), " of ", DataTypeName(dtype), "[", count, "] on ",
                            device.ToString(), " (rank ", eager::WorldRank(ctx), " of ",
                            eager::WorldSize(ctx), ")"));
  VisitDtype(dtype, [&](auto tag) {
    using T = typename ElemOf<decltype(tag)::value>::type;
    RunCase<T>(ctx, c, dtype, device, count, salt);
  });
}

using OpsParam = std::tuple<const char*, DataType>;

class CollectiveOpsTest : public ::testing::TestWithParam<OpsParam> {};

TEST_P(CollectiveOpsTest, EveryOpAndSizeMatchesTheHostReference) {
  const auto [device_name, dtype] = GetParam();
  eager::Context& ctx = OpsContext();
  const Device device = Dev(device_name);
  int salt = static_cast<int>(dtype) * 1000;
  for (int64_t count : {0, 1, 7, 4096}) {
    for (const Case& c : CasesFor(dtype, eager::WorldSize(ctx))) {
      RunCaseAnyDtype(ctx, c, dtype, device, count, salt++);
    }
  }
  EXPECT_TRUE(ctx.Sync().ok());
}

INSTANTIATE_TEST_SUITE_P(DevicesAndDtypes, CollectiveOpsTest,
                         ::testing::Combine(::testing::Values("cpu", "sim:0"),
                                            ::testing::Values(DataType::kF32, DataType::kF64,
                                                              DataType::kI32, DataType::kI64,
                                                              DataType::kBool)),
                         [](const ::testing::TestParamInfo<OpsParam>& info) {
                           std::string device = std::get<0>(info.param);
                           for (char& ch : device) {
                             if (ch == ':') ch = '_';
                           }
                           return absl::StrCat(device, "_", DataTypeName(std::get<1>(info.param)));
                         });

// 2^20 elements per rank, for one combination of each op.
TEST(CollectiveOpsLargeTest, AMillionElements) {
  eager::Context& ctx = OpsContext();
  const int size = eager::WorldSize(ctx);
  constexpr int64_t kCount = int64_t{1} << 20;
  struct Large {
    Case c;
    DataType dtype;
    const char* device;
  };
  std::vector<Large> cases = {
      {{Kind::kAllReduce, ReduceOp::kSum}, DataType::kF32, "cpu"},
      {{Kind::kAllReduce, ReduceOp::kMean}, DataType::kF32, "sim:0"},
      {{Kind::kAllReduce, ReduceOp::kMax}, DataType::kI64, "sim:0"},
      {{Kind::kAllReduce, ReduceOp::kMin}, DataType::kBool, "cpu"},
      {{Kind::kAllGather}, DataType::kF64, "cpu"},
      {{Kind::kReduceScatter, ReduceOp::kSum}, DataType::kI32, "sim:0"},
      {{Kind::kBroadcast, ReduceOp::kSum, size - 1}, DataType::kF32, "sim:0"},
      {{Kind::kReduce, ReduceOp::kSum, size - 1}, DataType::kF64, "cpu"},
  };
  if (size > 1) cases.push_back({{Kind::kRing}, DataType::kF32, "sim:0"});
  int salt = 100000;
  for (const Large& l : cases) RunCaseAnyDtype(ctx, l.c, l.dtype, Dev(l.device), kCount, salt++);
  EXPECT_TRUE(ctx.Sync().ok());
}

// Tensors of more than one dimension: all_gather and reduce_scatter work along the first,
// all_reduce and broadcast keep the shape (a scalar too).
TEST(CollectiveOpsShapesTest, FirstDimensionAndScalars) {
  eager::Context& ctx = OpsContext();
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  for (const char* name : {"cpu", "sim:0"}) {
    SCOPED_TRACE(name);
    const Device device = Dev(name);
    // all_gather of [2, 3, 2] -> [2 * size, 3, 2].
    Tensor x = MakeTensor(ctx, DataType::kF32, Values<float>(rank, 12, 1), Shape({2, 3, 2}), device)
                   .value();
    absl::StatusOr<Tensor> gathered = eager::AllGather(x);
    ASSERT_TRUE(gathered.ok()) << gathered.status();
    EXPECT_EQ(gathered->shape(), Shape({2 * size, 3, 2}));
    std::vector<float> want;
    for (int r = 0; r < size; ++r) {
      const std::vector<float> part = Values<float>(r, 12, 1);
      want.insert(want.end(), part.begin(), part.end());
    }
    EXPECT_EQ(Diff(Read<float>(*gathered).value(), want), "");

    // reduce_scatter of [2 * size, 3] -> [2, 3]: rows 2 * rank, 2 * rank + 1 of the sum.
    Tensor z = MakeTensor(ctx, DataType::kI64, Values<int64_t>(rank, 6 * size, 2),
                          Shape({2 * size, 3}), device)
                   .value();
    absl::StatusOr<Tensor> scattered = eager::ReduceScatter(z);
    ASSERT_TRUE(scattered.ok()) << scattered.status();
    EXPECT_EQ(scattered->shape(), Shape({2, 3}));
    const std::vector<int64_t> sum = Reduction<int64_t>(ReduceOp::kSum, size, 6 * size, 2);
    EXPECT_EQ(Diff(Read<int64_t>(*scattered).value(),
                   std::vector<int64_t>(sum.begin() + 6 * rank, sum.begin() + 6 * rank + 6)),
              "");

    // all_reduce and broadcast of a scalar.
    Tensor s =
        MakeTensor(ctx, DataType::kF64, Values<double>(rank, 1, 3), Shape({}), device).value();
    absl::StatusOr<Tensor> reduced = eager::AllReduce(s, ReduceOp::kMax);
    ASSERT_TRUE(reduced.ok()) << reduced.status();
    EXPECT_EQ(reduced->shape(), Shape({}));
    EXPECT_EQ(Diff(Read<double>(*reduced).value(), Reduction<double>(ReduceOp::kMax, size, 1, 3)),
              "");
    absl::StatusOr<Tensor> broadcast = eager::Broadcast(s, size - 1);
    ASSERT_TRUE(broadcast.ok()) << broadcast.status();
    EXPECT_EQ(broadcast->shape(), Shape({}));
    EXPECT_EQ(Diff(Read<double>(*broadcast).value(), Values<double>(size - 1, 1, 3)), "");
  }
  EXPECT_TRUE(ctx.Sync().ok());
}

// The bucket form: several tensors of one dtype (of every size, a scalar and an empty one
// among them) reduced in one call; each output keeps its tensor's shape and holds its
// reduction.
TEST(CollectiveOpsBucketTest, SeveralTensorsInOneCall) {
  eager::Context& ctx = OpsContext();
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  const std::vector<Shape> shapes = {Shape({7}), Shape({}),     Shape({0}),
                                     Shape({1}), Shape({3, 5}), Shape({4096})};
  int salt = 500;
  for (const char* name : {"cpu", "sim:0"}) {
    for (DataType dtype :
         {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64, DataType::kBool}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
        if (dtype == DataType::kBool && op == ReduceOp::kMean) continue;
        SCOPED_TRACE(absl::StrCat("bucket all_reduce(", ep::ccl::ReduceOpName(op), ") of ",
                                  DataTypeName(dtype), " on ", name));
        VisitDtype(dtype, [&](auto tag) {
          using T = typename ElemOf<decltype(tag)::value>::type;
          std::vector<Tensor> xs;
          for (size_t k = 0; k < shapes.size(); ++k) {
            const int64_t n = shapes[k].NumElements();
            xs.push_back(MakeTensor(ctx, dtype, Values<T>(rank, n, salt + static_cast<int>(k)),
                                    shapes[k], Dev(name))
                             .value());
          }
          absl::StatusOr<std::vector<Tensor>> ys = eager::AllReduce(xs, op);
          ASSERT_TRUE(ys.ok()) << ys.status();
          ASSERT_EQ(ys->size(), shapes.size());
          for (size_t k = 0; k < shapes.size(); ++k) {
            const Tensor& y = (*ys)[k];
            EXPECT_EQ(y.shape(), shapes[k]) << "tensor " << k;
            EXPECT_EQ(y.device(), Dev(name)) << "tensor " << k;
            const std::vector<T> want =
                Reduction<T>(op, size, shapes[k].NumElements(), salt + static_cast<int>(k));
            EXPECT_EQ(Diff(Read<T>(y).value(), want), "") << "tensor " << k;
          }
        });
        salt += static_cast<int>(shapes.size());
      }
    }
  }
  // An empty bucket is no call at all.
  absl::StatusOr<std::vector<Tensor>> none = eager::AllReduce(std::vector<Tensor>{});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  EXPECT_TRUE(ctx.Sync().ok());
}

// The mean of bool values is not defined: every reducing op refuses it when called, before
// anything is enqueued (so on every rank alike), naming the reason.
TEST(CollectiveOpsBoolTest, MeanOfBoolIsRefused) {
  eager::Context& ctx = OpsContext();
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  for (const char* name : {"cpu", "sim:0"}) {
    SCOPED_TRACE(name);
    Tensor b = MakeTensor(ctx, DataType::kBool, Values<uint8_t>(rank, 2 * size, 9),
                          Shape({2 * size}), Dev(name))
                   .value();
    const std::vector<absl::Status> refused = {
        eager::AllReduce(b, ReduceOp::kMean).status(),
        eager::AllReduce(std::vector<Tensor>{b, b}, ReduceOp::kMean).status(),
        eager::ReduceScatter(b, ReduceOp::kMean).status(),
        eager::Reduce(b, 0, ReduceOp::kMean).status(),
    };
    for (const absl::Status& status : refused) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
      EXPECT_THAT(std::string(status.message()), HasSubstr("mean of bool values is not defined"));
    }
    // Nothing was enqueued: the next collective is the ranks' next call.
    absl::StatusOr<Tensor> any = eager::AllReduce(b, ReduceOp::kMax);
    ASSERT_TRUE(any.ok()) << any.status();
    EXPECT_EQ(
        Diff(Read<uint8_t>(*any).value(), Reduction<uint8_t>(ReduceOp::kMax, size, 2 * size, 9)),
        "");
  }
  EXPECT_TRUE(ctx.Sync().ok());
}

}  // namespace
}  // namespace sluice::ccltest::collective_ops_test
