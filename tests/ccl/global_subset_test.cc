// Global tensors on placements that leave ranks out (framework/global/global_tensor.h):
// a rank outside the placement has no parallel id and no part, gets the ops' metadata
// (logical shape, layout, dtype) without running anything (its VM sees no op call), and
// Whole() there is FailedPrecondition; the ranks inside compute as if the placement were
// their whole world, their collectives in groups that leave the others out. Meaningful
// with two ranks or more: alone, each test skips before its first collective (the world's
// size is the same on every rank).
//
// Each test runs in a context of its own, made on first use (on every rank, in the same
// test), which keeps the tests independent; DisjointGroupsInOneContext below makes
// different groups in one context.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/eager/collectives.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/global/boxing.h"
#include "framework/global/global_tensor.h"
#include "framework/global/placement.h"
#include "framework/global/sbp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ccl/ccl_test_util.h"
#include "vm/counters.h"

namespace sluice::global::global_subset_test {
namespace {

using ccltest::Diff;
using ccltest::Read;

const Sbp kB = Sbp::Broadcast();
const Sbp kP = Sbp::PartialSum();
Sbp S(int axis) { return Sbp::Split(axis); }

struct Host {
  std::vector<int64_t> dims;
  std::vector<float> data;
};

Host Value(const std::vector<int64_t>& dims, int salt) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  Host h{dims, std::vector<float>(static_cast<size_t>(n))};
  for (size_t i = 0; i < h.data.size(); ++i) {
    h.data[i] = static_cast<float>(static_cast<int64_t>((i * 37 + salt * 101 + i / 5) % 13) - 6);
  }
  return h;
}

Host Slice(const Host& x, int axis, int64_t parts, int64_t index) {
  int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= x.dims[a];
  for (size_t a = axis + 1; a < x.dims.size(); ++a) inner *= x.dims[a];
  const int64_t len = x.dims[axis], block = len / parts;
  Host out{x.dims, {}};
  out.dims[axis] = block;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = index * block; j < (index + 1) * block; ++j) {
      for (int64_t i = 0; i < inner; ++i) {
        out.data.push_back(x.data[static_cast<size_t>((o * len + j) * inner + i)]);
      }
    }
  }
  return out;
}

Host HostMatmul(const Host& x, const Host& w) {
  const int64_t m = x.dims[0], k = x.dims[1], n = w.dims[1];
  Host out{{m, n}, std::vector<float>(static_cast<size_t>(m * n), 0.0f)};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t l = 0; l < k; ++l) out.data[i * n + j] += x.data[i * k + l] * w.data[l * n + j];
    }
  }
  return out;
}

Host CanonicalPart(const Host& whole, const Placement& placement, const NdSbp& sbp,
                   const std::vector<int64_t>& coords) {
  Host x = whole;
  for (int d = 0; d < placement.ndim(); ++d) {
    if (sbp[d].is_split()) {
      x = Slice(x, sbp[d].axis, placement.hierarchy()[d], coords[d]);
    } else if (sbp[d].is_partial_sum() && coords[d] != 0) {
      for (float& v : x.data) v = 0.0f;
    }
  }
  return x;
}

bool HasPartialSum(const NdSbp& sbp) {
  return std::any_of(sbp.begin(), sbp.end(), [](const Sbp& s) { return s.is_partial_sum(); });
}

std::vector<NdSbp> Layouts(int ndim) {
  const std::vector<Sbp> one = {S(0), S(1), kB, kP};
  std::vector<NdSbp> layouts;
  if (ndim == 1) {
    for (const Sbp& s : one) layouts.push_back({s});
    return layouts;
  }
  for (const Sbp& a : one) {
    for (const Sbp& b : one) layouts.push_back({a, b});
  }
  return layouts;
}

eager::Context NewContext() { return ccltest::NewContext(/*check_sync=*/false); }

class GlobalSubsetTest : public ::testing::Test {
 protected:
  static int rank(const eager::Context& c) { return eager::WorldRank(c); }
  static int size(const eager::Context& c) { return eager::WorldSize(c); }

  static eager::Tensor OnCpu(eager::Context& c, const Host& h) {
    absl::StatusOr<eager::Tensor> t =
        c.FromVector(h.data, Shape(h.dims), Device(DeviceType::kCpu, 0));
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : eager::Tensor();
  }

  // Outside the placement: metadata only.
  static void ExpectOutside(const absl::StatusOr<GlobalTensor>& t, const Placement& placement,
                            const NdSbp& sbp, const Shape& shape) {
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->placement(), placement);
    EXPECT_EQ(NdSbpToString(t->sbp()), NdSbpToString(sbp));
    EXPECT_EQ(t->shape(), shape);
    EXPECT_EQ(t->dtype(), DataType::kF32);
    EXPECT_EQ(t->parallel_id(), std::nullopt);
    EXPECT_FALSE(t->local().valid());
    absl::StatusOr<eager::Tensor> whole = t->Whole();
    EXPECT_EQ(whole.status().code(), absl::StatusCode::kFailedPrecondition) << whole.status();
    EXPECT_THAT(std::string(whole.status().message()),
                ::testing::HasSubstr("outside placement " + placement.ToString()));
  }

  // Inside: the layout, this rank's part (unless partial sums leave it open) and the whole.
  static void ExpectInside(const absl::StatusOr<GlobalTensor>& t, const Placement& placement,
                           const NdSbp& sbp, const Host& want, int world_rank) {
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(NdSbpToString(t->sbp()), NdSbpToString(sbp));
    EXPECT_EQ(t->shape(), Shape(want.dims));
    const std::optional<int> id = placement.ParallelId(world_rank);
    ASSERT_TRUE(id.has_value());
    EXPECT_EQ(t->parallel_id(), id);
    ASSERT_TRUE(t->local().valid());
    EXPECT_EQ(t->local().device(), placement.device());
    EXPECT_EQ(t->local().shape(), LocalShape(Shape(want.dims), placement, sbp).value());
    if (!HasPartialSum(sbp)) {
      absl::StatusOr<std::vector<float>> part = Read<float>(t->local());
      ASSERT_TRUE(part.ok()) << part.status();
      EXPECT_EQ(Diff(*part, CanonicalPart(want, placement, sbp, placement.Coordinates(*id)).data),
                "")
          << "local part";
    }
    absl::StatusOr<eager::Tensor> whole = t->Whole();
    ASSERT_TRUE(whole.ok()) << whole.status();
    absl::StatusOr<std::vector<float>> got = Read<float>(*whole);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Diff(*got, want.data), "") << "Whole()";
  }

  // The ops of a small chain on `placement`: checked inside, metadata outside, where the VM
  // must run no op call for them.
  static void RunChain(eager::Context& c, const Placement& placement) {
    const int me = rank(c);
    const bool inside = placement.ParallelId(me).has_value();
    const Host x = Value({12, 24}, 1), w = Value({24, 36}, 2);
    const eager::Tensor xt = OnCpu(c, x), wt = OnCpu(c, w);
    EXPECT_TRUE(c.Sync().ok());
    const vm::VmStats before = c.vm()->stats();

    absl::StatusOr<GlobalTensor> gx = GlobalTensor::FromWhole(c, xt, placement, {S(0)});
    absl::StatusOr<GlobalTensor> gw = GlobalTensor::FromWhole(c, wt, placement, {kB});
    ASSERT_TRUE(gx.ok()) << gx.status();
    ASSERT_TRUE(gw.ok()) << gw.status();
    absl::StatusOr<GlobalTensor> y = Matmul(*gx, *gw);  // S(0)
    ASSERT_TRUE(y.ok()) << y.status();
    absl::StatusOr<GlobalTensor> r = Relu(*y);  // S(0)
    ASSERT_TRUE(r.ok()) << r.status();
    absl::StatusOr<GlobalTensor> s = ReduceSum(*r, {0});  // P
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<GlobalTensor> b = s->ToSbp({kB});                         // all_reduce
    absl::StatusOr<GlobalTensor> a = Add(*gx, *gx);                          // S(0)
    absl::StatusOr<GlobalTensor> t = gx->ToSbp({S(1)});                      // all_gather, slice
    absl::StatusOr<GlobalTensor> p = Matmul(*t, gw->ToSbp({S(0)}).value());  // P
    absl::StatusOr<GlobalTensor> q = Relu(*p);                               // boxed to B

    Host relu = HostMatmul(x, w);
    for (float& v : relu.data) v = std::max(v, 0.0f);
    Host column_sums{{36}, std::vector<float>(36, 0.0f)};
    for (int64_t i = 0; i < 12; ++i) {
      for (int64_t j = 0; j < 36; ++j) column_sums.data[j] += relu.data[i * 36 + j];
    }
    Host doubled = x;
    for (float& v : doubled.data) v *= 2;
    const Host product = HostMatmul(x, w);
    if (!inside) {
      SCOPED_TRACE(absl::StrCat("rank ", me, " outside ", placement.ToString()));
      ExpectOutside(gx, placement, {S(0)}, Shape({12, 24}));
      ExpectOutside(y, placement, {S(0)}, Shape({12, 36}));
      ExpectOutside(r, placement, {S(0)}, Shape({12, 36}));
      ExpectOutside(s, placement, {kP}, Shape({36}));
      ExpectOutside(b, placement, {kB}, Shape({36}));
      ExpectOutside(a, placement, {S(0)}, Shape({12, 24}));
      ExpectOutside(t, placement, {S(1)}, Shape({12, 24}));
      ExpectOutside(p, placement, {kP}, Shape({12, 36}));
      ExpectOutside(q, placement, {kB}, Shape({12, 36}));
      const vm::VmStats after = c.vm()->stats();
      EXPECT_EQ(after.instructions, before.instructions) << "instructions ran outside";
      EXPECT_EQ(after.op_calls, before.op_calls) << "ops ran outside the placement";
      EXPECT_EQ(after.host_to_device_copies, before.host_to_device_copies);
      EXPECT_EQ(after.device_to_host_copies, before.device_to_host_copies);
      return;
    }
    SCOPED_TRACE(absl::StrCat("rank ", me, " inside ", placement.ToString()));
    ExpectInside(gx, placement, {S(0)}, x, me);
    ExpectInside(y, placement, {S(0)}, product, me);
    ExpectInside(r, placement, {S(0)}, relu, me);
    ExpectInside(s, placement, {kP}, column_sums, me);
    ExpectInside(b, placement, {kB}, column_sums, me);
    ExpectInside(a, placement, {S(0)}, doubled, me);
    ExpectInside(t, placement, {S(1)}, x, me);
    ExpectInside(p, placement, {kP}, product, me);
    ExpectInside(q, placement, {kB}, relu, me);
    EXPECT_TRUE(c.Sync().ok());
  }

  // Every pair of layouts on `placement`, from FromWhole sources.
  static void RunConversions(eager::Context& c, const Placement& placement) {
    const int me = rank(c);
    const bool inside = placement.ParallelId(me).has_value();
    const Host x = Value({12, 24}, 3);
    const eager::Tensor xt = OnCpu(c, x);
    EXPECT_TRUE(c.Sync().ok());
    const vm::VmStats before = c.vm()->stats();
    for (const NdSbp& from : Layouts(placement.ndim())) {
      for (const NdSbp& to : Layouts(placement.ndim())) {
        SCOPED_TRACE(absl::StrCat(placement.ToString(), " ", NdSbpToString(from), " -> ",
                                  NdSbpToString(to), ", rank ", me));
        absl::StatusOr<GlobalTensor> g = GlobalTensor::FromWhole(c, xt, placement, from);
        ASSERT_TRUE(g.ok()) << g.status();
        absl::StatusOr<GlobalTensor> converted = g->ToSbp(to);
        if (inside) {
          ExpectInside(converted, placement, to, x, me);
        } else {
          ASSERT_TRUE(converted.ok()) << converted.status();
          EXPECT_FALSE(converted->local().valid());
          EXPECT_EQ(converted->sbp(), to);
        }
      }
    }
    EXPECT_TRUE(c.Sync().ok());
    if (!inside) {
      EXPECT_EQ(c.vm()->stats().op_calls, before.op_calls) << "ops ran outside the placement";
    }
  }
};

TEST_F(GlobalSubsetTest, LastRankLeftOut) {
  static eager::Context* const c = new eager::Context(NewContext());
  if (size(*c) < 2) GTEST_SKIP() << "needs a rank outside the placement";
  // Ranks 0 .. size - 2; 12 rows split over 1, 2 or 3 of them.
  std::vector<int> ranks;
  for (int r = 0; r + 1 < size(*c); ++r) ranks.push_back(r);
  RunChain(*c, Placement::Create(DeviceType::kCpu, ranks).value());
  RunConversions(*c, Placement::Create(DeviceType::kCpu, ranks).value());
}

TEST_F(GlobalSubsetTest, RankOneAlone) {
  static eager::Context* const c = new eager::Context(NewContext());
  if (size(*c) < 2) GTEST_SKIP() << "needs a rank outside the placement";
  // Rank 1 computes alone (its groups are itself), on cpu, sim and a 1 x 1 mesh.
  RunChain(*c, Placement::Parse("cpu:[1]").value());
  RunChain(*c, Placement::Parse("sim:[1]").value());
  RunConversions(*c, Placement::Parse("cpu:[[1]]").value());
}

TEST_F(GlobalSubsetTest, FirstRankLeftOutOfTwoDimensionalMeshes) {
  static eager::Context* const c = new eager::Context(NewContext());
  if (size(*c) < 2) GTEST_SKIP() << "needs a rank outside the placement";
  // Ranks 1 .. size - 1 as a column and as a row (the same groups: the column's ranks and
  // each rank alone).
  std::vector<int> ranks;
  for (int r = 1; r < size(*c); ++r) ranks.push_back(r);
  const int64_t n = static_cast<int64_t>(ranks.size());
  RunConversions(*c, Placement::Create(DeviceType::kCpu, ranks, {n, 1}).value());
  RunConversions(*c, Placement::Create(DeviceType::kCpu, ranks, {1, n}).value());
}

TEST_F(GlobalSubsetTest, ReorderedRanksWithOneLeftOut) {
  static eager::Context* const c = new eager::Context(NewContext());
  if (size(*c) < 3) GTEST_SKIP() << "needs three ranks";
  // Rank 1 left out; parallel id 0 is rank 2.
  const Placement placement = Placement::Parse("cpu:[2, 0]").value();
  EXPECT_EQ(placement.ParallelId(2), 0);
  EXPECT_EQ(placement.ParallelId(1), std::nullopt);
  RunChain(*c, placement);
  RunConversions(*c, placement);
}

TEST_F(GlobalSubsetTest, FromLocalOutsideThePlacement) {
  // No collective here: the shared context is fine.
  eager::Context& c = ccltest::OpsContext();
  if (size(c) < 2) GTEST_SKIP() << "needs a rank outside the placement";
  const Placement placement = Placement::Parse("cpu:[0]").value();
  const Host x = Value({6, 4}, 4);
  const bool inside = rank(c) == 0;
  const eager::Tensor part = inside ? OnCpu(c, x) : eager::Tensor();
  if (inside) {
    absl::StatusOr<GlobalTensor> g = GlobalTensor::FromLocal(c, part, placement, {S(0)});
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->shape(), Shape({6, 4}));
    EXPECT_EQ(g->parallel_id(), 0);
    return;
  }
  // Outside, the logical shape is required and checked against the layout.
  absl::StatusOr<GlobalTensor> no_shape = GlobalTensor::FromLocal(c, part, placement, {S(0)});
  EXPECT_EQ(no_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_shape.status().message()),
              ::testing::HasSubstr("needs the logical shape"));
  absl::StatusOr<GlobalTensor> no_dtype =
      GlobalTensor::FromLocal(c, part, placement, {S(0)}, Shape({6, 4}));
  EXPECT_EQ(no_dtype.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<GlobalTensor> g =
      GlobalTensor::FromLocal(c, part, placement, {S(0)}, Shape({6, 4}), DataType::kF32);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->shape(), Shape({6, 4}));
  EXPECT_EQ(g->parallel_id(), std::nullopt);
  EXPECT_FALSE(g->local().valid());
  EXPECT_EQ(g->Whole().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GlobalTensor::FromLocal(c, part, placement, {S(2)}, Shape({6, 4})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GlobalTensor::FromLocal(c, part, placement, {S(0), kB}, Shape({6, 4})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Groups made in one context by ranks that made different groups before (rank 0 alone for
// cpu:[0], then every rank for cpu:[size - 1, ..., 0]) still come up: the members of a
// group agree on the tag of its MPI_Comm_create_group (a hash of the group, not a count of
// each rank's earlier splits, which differed here and left the ranks waiting for good).
TEST_F(GlobalSubsetTest, DisjointGroupsInOneContext) {
  static eager::Context* const c = new eager::Context(NewContext());
  if (size(*c) < 2) GTEST_SKIP() << "needs a rank outside the placement";
  const Host x = Value({12, 24}, 5);
  const eager::Tensor xt = OnCpu(*c, x);
  std::vector<int> reversed;
  for (int r = size(*c) - 1; r >= 0; --r) reversed.push_back(r);
  for (const Placement& placement : {Placement::Parse("cpu:[0]").value(),
                                     Placement::Create(DeviceType::kCpu, reversed).value()}) {
    SCOPED_TRACE(placement.ToString());
    absl::StatusOr<GlobalTensor> g = GlobalTensor::FromWhole(*c, xt, placement, {S(0)});
    ASSERT_TRUE(g.ok()) << g.status();
    if (!g->parallel_id().has_value()) continue;
    ExpectInside(g->ToSbp({kB}), placement, {kB}, x, rank(*c));
  }
}

// On a rank outside the placement, FromLocal takes the logical dtype beside the shape (it
// guessed f32 before): the ranks' metadata agree, and an op that mixes it with a tensor made
// by FromWhole behaves alike on every rank.
TEST_F(GlobalSubsetTest, FromLocalOutsideThePlacementKeepsTheDtype) {
  eager::Context& c = ccltest::OpsContext();
  if (size(c) < 2) GTEST_SKIP() << "needs a rank outside the placement";
  const Placement placement = Placement::Parse("cpu:[0]").value();
  const Host x = Value({6, 4}, 6);
  absl::StatusOr<eager::Tensor> whole =
      c.FromVector(std::vector<double>(x.data.begin(), x.data.end()), Shape({6, 4}),
                   Device(DeviceType::kCpu, 0));
  ASSERT_TRUE(whole.ok()) << whole.status();
  const eager::Tensor part = rank(c) == 0 ? *whole : eager::Tensor();
  absl::StatusOr<GlobalTensor> a =
      GlobalTensor::FromLocal(c, part, placement, {kB}, Shape({6, 4}), DataType::kF64);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(DataTypeName(a->dtype()), "f64") << "rank " << rank(c);
  absl::StatusOr<GlobalTensor> b = GlobalTensor::FromWhole(c, *whole, placement, {kB});
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<GlobalTensor> sum = Add(*a, *b);
  EXPECT_TRUE(sum.ok()) << "rank " << rank(c) << ": " << sum.status();
  EXPECT_TRUE(c.Sync().ok());
}

}  // namespace
}  // namespace sluice::global::global_subset_test
