// Errors of global tensors (framework/global/global_tensor.h): ops on tensors of different
// placements, layouts with the wrong number of entries, splits that do not divide or name
// an axis the tensor lacks, placements naming ranks outside the world, bad parts, and op
// errors on the logical shapes. Every error here is found from metadata, the same on every
// rank, before anything runs: no rank is left waiting in a collective.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/eager/collectives.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/global/global_tensor.h"
#include "framework/global/placement.h"
#include "framework/global/sbp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ccl/ccl_test_util.h"
#include "vm/attrs.h"

namespace sluice::global::global_errors_test {
namespace {

using ::testing::HasSubstr;

const Sbp kB = Sbp::Broadcast();
const Sbp kP = Sbp::PartialSum();
Sbp S(int axis) { return Sbp::Split(axis); }

std::string Message(const absl::Status& status) { return std::string(status.message()); }

class GlobalErrorsTest : public ::testing::Test {
 protected:
  static eager::Context& ctx() { return ccltest::ErrorsContext(); }
  static int rank() { return eager::WorldRank(ctx()); }
  static int size() { return eager::WorldSize(ctx()); }

  static std::vector<int> AllRanks() {
    std::vector<int> ranks;
    for (int r = 0; r < size(); ++r) ranks.push_back(r);
    return ranks;
  }
  static Placement Line(DeviceType type = DeviceType::kCpu) {
    return Placement::Create(type, AllRanks()).value();
  }

  static eager::Tensor Zeros(const Shape& shape, Device device = Device(DeviceType::kCpu, 0)) {
    absl::StatusOr<eager::Tensor> t = ctx().FromVector(
        std::vector<float>(static_cast<size_t>(shape.NumElements()), 1.0f), shape, device);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : eager::Tensor();
  }

  static GlobalTensor Make(const Shape& shape, const Placement& placement, const NdSbp& sbp) {
    absl::StatusOr<GlobalTensor> g = GlobalTensor::FromWhole(ctx(), Zeros(shape), placement, sbp);
    EXPECT_TRUE(g.ok()) << g.status();
    return *g;
  }
};

TEST_F(GlobalErrorsTest, CallWithMismatchedPlacements) {
  const Shape shape({12, 24});
  const GlobalTensor on_cpu = Make(shape, Line(), {kB});
  const GlobalTensor on_sim = Make(shape, Line(DeviceType::kSim), {kB});
  const GlobalTensor on_mesh =
      Make(shape, Placement::Create(DeviceType::kCpu, AllRanks(), {1, size()}).value(), {kB, kB});
  for (const GlobalTensor* other : {&on_sim, &on_mesh}) {
    SCOPED_TRACE(other->placement().ToString());
    absl::StatusOr<GlobalTensor> sum = Add(on_cpu, *other);
    EXPECT_EQ(sum.status().code(), absl::StatusCode::kInvalidArgument) << sum.status();
    EXPECT_THAT(Message(sum.status()),
                HasSubstr(absl::StrCat("input 1 is on ", other->placement().ToString(),
                                       ", input 0 on ", on_cpu.placement().ToString())));
    absl::StatusOr<std::vector<GlobalTensor>> product = Call("matmul", {*other, on_cpu});
    EXPECT_EQ(product.status().code(), absl::StatusCode::kInvalidArgument) << product.status();
    EXPECT_THAT(Message(product.status()), HasSubstr("global op 'matmul'"));
  }
  // The same ranks in another order are another placement.
  if (size() >= 2) {
    std::vector<int> reversed = AllRanks();
    std::reverse(reversed.begin(), reversed.end());
    const GlobalTensor other =
        Make(shape, Placement::Create(DeviceType::kCpu, reversed).value(), {kB});
    EXPECT_EQ(Mul(on_cpu, other).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST_F(GlobalErrorsTest, SbpWithTheWrongNumberOfEntries) {
  const Shape shape({12, 24});
  const Placement line = Line();
  const Placement mesh = Placement::Create(DeviceType::kCpu, AllRanks(), {size(), 1}).value();
  const eager::Tensor whole = Zeros(shape);
  for (const auto& [placement, sbp] : std::vector<std::pair<Placement, NdSbp>>{
           {line, {S(0), kB}}, {line, {}}, {mesh, {S(0)}}, {mesh, {kB, kB, kB}}}) {
    SCOPED_TRACE(absl::StrCat(placement.ToString(), " ", NdSbpToString(sbp)));
    absl::StatusOr<GlobalTensor> g = GlobalTensor::FromWhole(ctx(), whole, placement, sbp);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
    EXPECT_THAT(Message(g.status()), HasSubstr(absl::StrCat("has ", sbp.size(), " entries")));
    absl::StatusOr<GlobalTensor> local =
        GlobalTensor::FromLocal(ctx(), whole, placement, sbp, shape);
    EXPECT_EQ(local.status().code(), absl::StatusCode::kInvalidArgument) << local.status();
  }
  const GlobalTensor g = Make(shape, line, {S(0)});
  absl::StatusOr<GlobalTensor> converted = g.ToSbp({kB, kB});
  EXPECT_EQ(converted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(converted.status()), HasSubstr("has 1 mesh axes"));
  EXPECT_EQ(g.ToSbp({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GlobalErrorsTest, SplitsThatDoNotFit) {
  const Placement line = Line();
  // An axis the tensor lacks.
  const eager::Tensor whole = Zeros(Shape({12, 24}));
  absl::StatusOr<GlobalTensor> missing = GlobalTensor::FromWhole(ctx(), whole, line, {S(2)});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(missing.status()), HasSubstr("splits axis 2"));
  const GlobalTensor g = Make(Shape({12, 24}), line, {kB});
  EXPECT_EQ(g.ToSbp({S(2)}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<GlobalTensor> part_missing =
      GlobalTensor::FromLocal(ctx(), Zeros(Shape({12})), line, {S(1)});
  EXPECT_EQ(part_missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(part_missing.status()), HasSubstr("splits a part of shape [12]"));
  // Parts that make another logical shape than the one given.
  absl::StatusOr<GlobalTensor> other_shape =
      GlobalTensor::FromLocal(ctx(), Zeros(Shape({2, 4})), line, {S(0)}, Shape({2 * size(), 5}));
  EXPECT_EQ(other_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(other_shape.status()),
              HasSubstr(absl::StrCat("make [", 2 * size(), ", 4], not [", 2 * size(), ", 5]")));
  if (size() < 2) return;  // one rank: every split divides (the same on every rank)
  // size + 1 rows do not split over size ranks.
  const Shape uneven({size() + 1, 12});
  absl::StatusOr<GlobalTensor> rows = GlobalTensor::FromWhole(ctx(), Zeros(uneven), line, {S(0)});
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(rows.status()),
              HasSubstr(absl::StrCat("does not split into ", size(), " equal parts")));
  const GlobalTensor b = Make(uneven, line, {kB});
  absl::StatusOr<GlobalTensor> to_split = b.ToSbp({S(0)});
  EXPECT_EQ(to_split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(b.ToSbp({S(1)}).ok());
  // On a mesh, two axes splitting one tensor axis need it to divide by both.
  if (size() == 4) {
    const Placement mesh = Placement::Parse("cpu:[[0, 1], [2, 3]]").value();
    absl::StatusOr<GlobalTensor> nested =
        GlobalTensor::FromWhole(ctx(), Zeros(Shape({6, 4})), mesh, {S(0), S(0)});
    EXPECT_EQ(nested.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(nested.status()), HasSubstr("(3 left)"));
    EXPECT_TRUE(GlobalTensor::FromWhole(ctx(), Zeros(Shape({6, 4})), mesh, {S(0), S(1)}).ok());
  }
}

TEST_F(GlobalErrorsTest, PlacementNamingARankOutsideTheWorld) {
  const eager::Tensor whole = Zeros(Shape({12, 24}));
  const std::string outside =
      absl::StrCat("names rank ", size(), ", outside the world of ", size());
  for (const Placement& placement :
       {Placement::Create(DeviceType::kCpu, {0, size()}).value(),
        Placement::Create(DeviceType::kSim, {size() + 0}).value(),
        Placement::Create(DeviceType::kCpu, {size(), 0}, {2, 1}).value()}) {
    SCOPED_TRACE(placement.ToString());
    absl::StatusOr<GlobalTensor> g =
        GlobalTensor::FromWhole(ctx(), whole, placement, NdSbp(placement.ndim(), kB));
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
    EXPECT_THAT(Message(g.status()), HasSubstr(outside));
    absl::StatusOr<GlobalTensor> local = GlobalTensor::FromLocal(
        ctx(), whole, placement, NdSbp(placement.ndim(), kB), Shape({12, 24}));
    EXPECT_EQ(local.status().code(), absl::StatusCode::kInvalidArgument) << local.status();
    EXPECT_THAT(Message(local.status()), HasSubstr(outside));
  }
}

TEST_F(GlobalErrorsTest, BadParts) {
  const Placement line = Line();
  absl::StatusOr<GlobalTensor> empty_whole =
      GlobalTensor::FromWhole(ctx(), eager::Tensor(), line, {kB});
  EXPECT_EQ(empty_whole.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(empty_whole.status()), HasSubstr("the tensor is empty"));
  absl::StatusOr<GlobalTensor> empty_part =
      GlobalTensor::FromLocal(ctx(), eager::Tensor(), line, {kB}, Shape({4}));
  EXPECT_EQ(empty_part.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(empty_part.status()), HasSubstr("the local part is empty"));
  // A part on sim for a cpu placement (FromWhole copies; FromLocal refuses).
  const eager::Tensor on_sim = Zeros(Shape({4}), Device(DeviceType::kSim, 0));
  absl::StatusOr<GlobalTensor> elsewhere = GlobalTensor::FromLocal(ctx(), on_sim, line, {kB});
  EXPECT_EQ(elsewhere.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(elsewhere.status()), HasSubstr("keeps parts on cpu"));
  absl::StatusOr<GlobalTensor> copied = GlobalTensor::FromWhole(ctx(), on_sim, line, {kB});
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->local().device(), Device(DeviceType::kCpu, 0));
  // A part on another sim device than device 0 is elsewhere too.
  const eager::Tensor on_sim1 = Zeros(Shape({4}), Device(DeviceType::kSim, 1));
  EXPECT_EQ(GlobalTensor::FromLocal(ctx(), on_sim1, Line(DeviceType::kSim), {kB}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GlobalErrorsTest, OpErrors) {
  const Placement line = Line();
  absl::StatusOr<std::vector<GlobalTensor>> none = Call("add", {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(none.status()), HasSubstr("needs an input"));
  const GlobalTensor x = Make(Shape({12, 24}), line, {S(0)});
  EXPECT_FALSE(Call("no_such_op", {x}).ok());
  // The op's own errors on the logical shapes, the same on every rank.
  absl::StatusOr<GlobalTensor> product = Matmul(x, Make(Shape({12, 24}), line, {kB}));
  EXPECT_FALSE(product.ok());
  absl::StatusOr<GlobalTensor> sum = Add(x, Make(Shape({12, 7}), line, {kB}));
  EXPECT_FALSE(sum.ok());
  absl::StatusOr<GlobalTensor> reduced = ReduceSum(x, {2});
  EXPECT_FALSE(reduced.ok());
  vm::AttrMap attrs;
  attrs.Set("perm", std::vector<int64_t>{0});
  EXPECT_FALSE(Call("transpose", {x}, attrs).ok());
}

TEST_F(GlobalErrorsTest, InputsOfDifferentContexts) {
  // The same placement and layout, but tensors of two contexts: the op refuses the second.
  const Placement line = Line();
  const GlobalTensor x = Make(Shape({12, 24}), line, {S(0)});
  absl::StatusOr<eager::Tensor> other_whole = ccltest::OpsContext().FromVector(
      std::vector<float>(12 * 24, 2.0f), Shape({12, 24}), Device(DeviceType::kCpu, 0));
  ASSERT_TRUE(other_whole.ok()) << other_whole.status();
  absl::StatusOr<GlobalTensor> y =
      GlobalTensor::FromWhole(ccltest::OpsContext(), *other_whole, line, {S(0)});
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<GlobalTensor> sum = Add(x, *y);
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kInvalidArgument) << sum.status();
}

}  // namespace
}  // namespace sluice::global::global_errors_test
