// Layout conversions of global tensors (GlobalTensor::ToSbp, framework/global/boxing.h):
// every pair of layouts from {S(0), S(1), B, P} on a 1-D placement over the whole world,
// and every pair of 2-axis layouts on the 2-D meshes the world makes ([1, 1] alone; [1, 2]
// and [2, 1] with 2 ranks; [1, 3] and [3, 1] with 3; [2, 2], [1, 4] and [4, 1] with 4), on
// cpu and sim. The
// source is made with FromWhole from a value every rank builds the same way; after the
// conversion each rank's part must be the slice of that value its mesh coordinates and the
// target layout pick (a partial sum keeps the value at coordinate 0 and zeros elsewhere, as
// FromWhole and boxing.h say), and Whole() must give the value back. Sources with partial
// sums are also made with FromLocal from parts that differ from that canonical split (they
// only sum to it), so that a reduction that picks the wrong parts shows.
//
// Values are integers below 2^24, so sums are exact in f32 and everything compares exactly.
// Every rank runs the same conversions in the same order (SPMD); failures are EXPECTs, so no
// rank leaves the loop early.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/builder/functional.h"
#include "framework/eager/collectives.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/global/boxing.h"
#include "framework/global/global_tensor.h"
#include "framework/global/placement.h"
#include "framework/global/sbp.h"
#include "gtest/gtest.h"
#include "tests/ccl/ccl_test_util.h"

namespace sluice::global::global_boxing_test {
namespace {

using ccltest::Diff;
using ccltest::Read;

// A logical value on the host, row-major.
struct Host {
  std::vector<int64_t> dims;
  std::vector<float> data;
};

int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Distinct integers (for fewer than 4001 elements): a misplaced block shows.
Host WholeValue(const std::vector<int64_t>& dims, int salt) {
  Host h{dims, std::vector<float>(static_cast<size_t>(NumElements(dims)))};
  for (size_t i = 0; i < h.data.size(); ++i) {
    h.data[i] = static_cast<float>(static_cast<int64_t>((i * 37 + salt * 101) % 4001) - 2000);
  }
  return h;
}

// Part `index` of `parts` equal blocks along `axis`.
Host Slice(const Host& x, int axis, int64_t parts, int64_t index) {
  int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= x.dims[a];
  for (size_t a = axis + 1; a < x.dims.size(); ++a) inner *= x.dims[a];
  const int64_t len = x.dims[axis], block = len / parts;
  Host out{x.dims, {}};
  out.dims[axis] = block;
  out.data.reserve(static_cast<size_t>(outer * block * inner));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = index * block; j < (index + 1) * block; ++j) {
      for (int64_t i = 0; i < inner; ++i) {
        out.data.push_back(x.data[static_cast<size_t>((o * len + j) * inner + i)]);
      }
    }
  }
  return out;
}

// The part at mesh `coords` under `sbp`, as FromWhole lays a value out: mesh axes in order
// (the outer one takes the coarse blocks), a partial sum all at coordinate 0.
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

// A part under `sbp` whose partial sums still add up to the value, but that is not the
// canonical one: along every mesh axis d of n > 1 ranks with P, coordinate c adds
// noise_d (c > 0) or -(n - 1) noise_d (c = 0), where noise_d depends on the element and
// (unless that axis broadcasts) the other mesh coordinate. Slices are taken after the noise is
// added, as for the value.
Host NoisyPart(const Host& whole, const Placement& placement, const NdSbp& sbp,
               const std::vector<int64_t>& coords) {
  Host x = whole;
  bool all_zero = true;
  for (int d = 0; d < placement.ndim(); ++d) {
    if (sbp[d].is_partial_sum() && coords[d] != 0) all_zero = false;
  }
  if (!all_zero) {
    for (float& v : x.data) v = 0.0f;
  }
  for (int d = 0; d < placement.ndim(); ++d) {
    const int64_t n = placement.hierarchy()[d];
    if (!sbp[d].is_partial_sum() || n == 1) continue;
    // The noise may differ along the other mesh axis unless that axis broadcasts (its
    // ranks must then hold the same part).
    const bool vary = placement.ndim() == 2 && !sbp[1 - d].is_broadcast();
    const int64_t other = vary ? coords[1 - d] : 0;
    const int64_t factor = coords[d] == 0 ? -(n - 1) : 1;
    for (size_t i = 0; i < x.data.size(); ++i) {
      const int64_t noise = static_cast<int64_t>((i * 13 + other * 7 + d * 5) % 9) - 4;
      x.data[i] += static_cast<float>(factor * noise);
    }
  }
  for (int d = 0; d < placement.ndim(); ++d) {
    if (sbp[d].is_split()) x = Slice(x, sbp[d].axis, placement.hierarchy()[d], coords[d]);
  }
  return x;
}

bool HasPartialSum(const NdSbp& sbp) {
  for (const Sbp& s : sbp) {
    if (s.is_partial_sum()) return true;
  }
  return false;
}

std::vector<NdSbp> OneAxisLayouts(int tensor_rank) {
  std::vector<NdSbp> layouts;
  for (int k = 0; k < tensor_rank; ++k) layouts.push_back({Sbp::Split(k)});
  layouts.push_back({Sbp::Broadcast()});
  layouts.push_back({Sbp::PartialSum()});
  return layouts;
}

std::vector<NdSbp> TwoAxisLayouts() {
  std::vector<NdSbp> layouts;
  for (const NdSbp& a : OneAxisLayouts(2)) {
    for (const NdSbp& b : OneAxisLayouts(2)) layouts.push_back({a[0], b[0]});
  }
  return layouts;
}

// The 2-D meshes of a world of `size` ranks (all ranks, in rank order).
std::vector<std::vector<int64_t>> MeshesFor(int size) {
  switch (size) {
    case 1:
      return {{1, 1}};
    case 2:
      return {{1, 2}, {2, 1}};
    case 3:
      return {{1, 3}, {3, 1}};
    case 4:
      return {{2, 2}, {1, 4}, {4, 1}};
    default:
      return {};
  }
}

std::vector<int> AllRanks(int size) {
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(r);
  return ranks;
}

class GlobalBoxingTest : public ::testing::Test {
 protected:
  static eager::Context& ctx() { return ccltest::OpsContext(); }
  static int rank() { return eager::WorldRank(ctx()); }
  static int size() { return eager::WorldSize(ctx()); }

  static eager::Tensor ToTensor(eager::Context& c, const Host& h, Device device) {
    absl::StatusOr<eager::Tensor> t = c.FromVector(h.data, Shape(h.dims), device);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : eager::Tensor();
  }

  static void ExpectPart(const GlobalTensor& t, const Host& want, const std::string& what) {
    ASSERT_TRUE(t.local().valid()) << what;
    EXPECT_EQ(t.local().shape(), Shape(want.dims)) << what;
    EXPECT_EQ(t.local().device(), t.placement().device()) << what;
    absl::StatusOr<std::vector<float>> got = Read<float>(t.local());
    ASSERT_TRUE(got.ok()) << what << ": " << got.status();
    EXPECT_EQ(Diff(*got, want.data), "") << what;
  }

  // Converts a source of layout `from` (FromWhole, or FromLocal with noisy partial sums when
  // `noisy`) to `to`, and checks the parts and the whole.
  static void CheckConversion(eager::Context& c, const Placement& placement, const Host& whole,
                              const eager::Tensor& whole_tensor, const NdSbp& from, const NdSbp& to,
                              bool noisy) {
    const std::string what =
        absl::StrCat(placement.ToString(), " mesh [", placement.hierarchy()[0],
                     placement.ndim() == 2 ? absl::StrCat(", ", placement.hierarchy()[1]) : "",
                     "] ", NdSbpToString(from), " -> ", NdSbpToString(to),
                     noisy ? " (uneven partial sums)" : "", ", rank ", eager::WorldRank(c));
    SCOPED_TRACE(what);
    const int id = placement.ParallelId(eager::WorldRank(c)).value();
    const std::vector<int64_t> coords = placement.Coordinates(id);
    absl::StatusOr<GlobalTensor> source;
    if (noisy) {
      const Host part = NoisyPart(whole, placement, from, coords);
      source = GlobalTensor::FromLocal(c, ToTensor(c, part, placement.device()), placement, from,
                                       Shape(whole.dims));
    } else {
      source = GlobalTensor::FromWhole(c, whole_tensor, placement, from);
    }
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_EQ(source->parallel_id(), id);
    EXPECT_EQ(source->shape(), Shape(whole.dims));
    if (!noisy) ExpectPart(*source, CanonicalPart(whole, placement, from, coords), "source");

    absl::StatusOr<GlobalTensor> converted = source->ToSbp(to);
    ASSERT_TRUE(converted.ok()) << converted.status();
    EXPECT_EQ(converted->sbp(), to);
    EXPECT_EQ(converted->placement(), placement);
    EXPECT_EQ(converted->shape(), Shape(whole.dims));
    EXPECT_EQ(converted->dtype(), DataType::kF32);
    EXPECT_EQ(converted->parallel_id(), id);
    const Shape local_shape = LocalShape(Shape(whole.dims), placement, to).value();
    ASSERT_TRUE(converted->local().valid());
    EXPECT_EQ(converted->local().shape(), local_shape);
    // With uneven partial sums kept along an axis (P -> P), the part is not the canonical
    // one; only the whole is determined.
    if (!noisy || !HasPartialSum(to)) {
      ExpectPart(*converted, CanonicalPart(whole, placement, to, coords), "converted part");
    }
    absl::StatusOr<eager::Tensor> back = converted->Whole();
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->shape(), Shape(whole.dims));
    absl::StatusOr<std::vector<float>> got = Read<float>(*back);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Diff(*got, whole.data), "") << "Whole()";
  }

  // Every pair of `layouts` on `placement`, from FromWhole sources, then (with `noisy`)
  // from uneven partial sums for the sources with a P.
  static void CheckAllPairs(eager::Context& c, const Placement& placement,
                            const std::vector<int64_t>& dims, const std::vector<NdSbp>& layouts,
                            bool noisy, int salt) {
    const Host whole = WholeValue(dims, salt);
    // Made on cpu; FromWhole copies it to the placement's device.
    const eager::Tensor whole_tensor = ToTensor(c, whole, Device(DeviceType::kCpu, 0));
    for (const NdSbp& from : layouts) {
      for (const NdSbp& to : layouts) {
        CheckConversion(c, placement, whole, whole_tensor, from, to, /*noisy=*/false);
        if (noisy && HasPartialSum(from)) {
          CheckConversion(c, placement, whole, whole_tensor, from, to, /*noisy=*/true);
        }
      }
    }
    EXPECT_TRUE(c.Sync().ok());
  }
};

TEST_F(GlobalBoxingTest, OneDimensionalEveryPairOnCpu) {
  const Placement placement = Placement::Create(DeviceType::kCpu, AllRanks(size())).value();
  CheckAllPairs(ctx(), placement, {12, 24}, OneAxisLayouts(2), /*noisy=*/true, /*salt=*/1);
}

TEST_F(GlobalBoxingTest, OneDimensionalEveryPairOnSim) {
  // The checked context: the sync checker runs and sim streams jitter.
  eager::Context& c = ccltest::CheckedContext();
  const Placement placement = Placement::Create(DeviceType::kSim, AllRanks(size())).value();
  CheckAllPairs(c, placement, {12, 24}, OneAxisLayouts(2), /*noisy=*/true, /*salt=*/2);
}

TEST_F(GlobalBoxingTest, OneDimensionalThreeAxisTensor) {
  // Gathers and scatters along the middle and last axes go through transposes.
  const Placement placement = Placement::Create(DeviceType::kCpu, AllRanks(size())).value();
  CheckAllPairs(ctx(), placement, {12, 24, 36}, OneAxisLayouts(3), /*noisy=*/true, /*salt=*/3);
}

TEST_F(GlobalBoxingTest, OneDimensionalReversedRanks) {
  // Parallel id i is world rank size - 1 - i: slices go by parallel id, not by rank.
  std::vector<int> ranks = AllRanks(size());
  std::reverse(ranks.begin(), ranks.end());
  const Placement placement = Placement::Create(DeviceType::kCpu, ranks).value();
  CheckAllPairs(ctx(), placement, {12, 24}, OneAxisLayouts(2), /*noisy=*/true, /*salt=*/4);
}

TEST_F(GlobalBoxingTest, TwoDimensionalEveryPairOnCpu) {
  for (const std::vector<int64_t>& mesh : MeshesFor(size())) {
    const Placement placement = Placement::Create(DeviceType::kCpu, AllRanks(size()), mesh).value();
    CheckAllPairs(ctx(), placement, {12, 24}, TwoAxisLayouts(), /*noisy=*/true, /*salt=*/5);
  }
}

TEST_F(GlobalBoxingTest, TwoDimensionalEveryPairOnSim) {
  for (const std::vector<int64_t>& mesh : MeshesFor(size())) {
    const Placement placement = Placement::Create(DeviceType::kSim, AllRanks(size()), mesh).value();
    CheckAllPairs(ctx(), placement, {24, 12}, TwoAxisLayouts(), /*noisy=*/false, /*salt=*/6);
  }
}

TEST_F(GlobalBoxingTest, TwoDimensionalReversedRanks) {
  // The mesh holds the ranks in reverse: coordinates go by parallel id, not by rank.
  std::vector<int> ranks = AllRanks(size());
  std::reverse(ranks.begin(), ranks.end());
  for (const std::vector<int64_t>& mesh : MeshesFor(size())) {
    const Placement placement = Placement::Create(DeviceType::kCpu, ranks, mesh).value();
    CheckAllPairs(ctx(), placement, {12, 24}, TwoAxisLayouts(), /*noisy=*/true, /*salt=*/9);
  }
}

TEST_F(GlobalBoxingTest, SameLayoutKeepsThePart) {
  // A conversion to the layout the tensor has moves nothing: the part is the same tensor.
  const Placement placement = Placement::Create(DeviceType::kCpu, AllRanks(size())).value();
  const Host whole = WholeValue({12, 24}, 7);
  const eager::Tensor t = ToTensor(ctx(), whole, placement.device());
  for (const NdSbp& sbp : OneAxisLayouts(2)) {
    absl::StatusOr<GlobalTensor> g = GlobalTensor::FromWhole(ctx(), t, placement, sbp);
    ASSERT_TRUE(g.ok()) << g.status();
    absl::StatusOr<GlobalTensor> same = g->ToSbp(sbp);
    ASSERT_TRUE(same.ok()) << same.status();
    EXPECT_EQ(same->local().blob(), g->local().blob()) << NdSbpToString(sbp);
  }
  // All broadcast from a whole on the placement's device: the part is that tensor.
  absl::StatusOr<GlobalTensor> b = GlobalTensor::FromWhole(ctx(), t, placement, {Sbp::Broadcast()});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->local().blob(), t.blob());
}

TEST_F(GlobalBoxingTest, OtherDtypes) {
  // Boxing is dtype-blind: S -> B, P -> S and B -> P on f64, i32 and i64.
  const Placement placement = Placement::Create(DeviceType::kCpu, AllRanks(size())).value();
  const std::vector<int64_t> dims = {12, 24};
  const Host whole = WholeValue(dims, 8);
  const std::vector<std::pair<NdSbp, NdSbp>> pairs = {
      {{Sbp::Split(1)}, {Sbp::Broadcast()}},
      {{Sbp::PartialSum()}, {Sbp::Split(0)}},
      {{Sbp::Broadcast()}, {Sbp::PartialSum()}},
      {{Sbp::PartialSum()}, {Sbp::Broadcast()}},
  };
  for (DataType dtype : {DataType::kF64, DataType::kI32, DataType::kI64}) {
    absl::StatusOr<eager::Tensor> f = ctx().FromVector(whole.data, Shape(dims), placement.device());
    ASSERT_TRUE(f.ok()) << f.status();
    absl::StatusOr<eager::Tensor> t = fn::Cast(*f, dtype);
    ASSERT_TRUE(t.ok()) << t.status();
    for (const auto& [from, to] : pairs) {
      SCOPED_TRACE(
          absl::StrCat(DataTypeName(dtype), " ", NdSbpToString(from), " -> ", NdSbpToString(to)));
      absl::StatusOr<GlobalTensor> g = GlobalTensor::FromWhole(ctx(), *t, placement, from);
      ASSERT_TRUE(g.ok()) << g.status();
      absl::StatusOr<GlobalTensor> c = g->ToSbp(to);
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(c->dtype(), dtype);
      EXPECT_EQ(c->local().dtype(), dtype);
      absl::StatusOr<eager::Tensor> back = c->Whole();
      ASSERT_TRUE(back.ok()) << back.status();
      absl::StatusOr<eager::Tensor> as_float = fn::Cast(*back, DataType::kF32);
      ASSERT_TRUE(as_float.ok()) << as_float.status();
      absl::StatusOr<std::vector<float>> got = Read<float>(*as_float);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(Diff(*got, whole.data), "");
    }
  }
}

}  // namespace
}  // namespace sluice::global::global_boxing_test
