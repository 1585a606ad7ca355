// Ops on global tensors (global::Call and Add, Mul, Matmul, Relu, ReduceSum in
// framework/global/global_tensor.h): the output layout the sbp signature picks
// (sbp_signature.h), and the result, checked against a host computation on the logical
// values, both through Whole() and, where the layout fixes it, each rank's part. Inputs
// with partial sums are made from uneven parts (FromLocal), so that an op that runs on the
// parts where it must not (relu of a partial sum) gives a wrong value. Run on 1-D
// placements over the whole world and on the 2-D meshes it makes.
//
// Values are small integers: every sum and product is exact in f32. Every rank makes the
// same calls in the same order; failures are EXPECTs where an early return would make
// ranks diverge.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
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
#include "vm/attrs.h"

namespace sluice::global::global_ops_test {
namespace {

using ccltest::Diff;
using ccltest::Read;

const Sbp kB = Sbp::Broadcast();
const Sbp kP = Sbp::PartialSum();
Sbp S(int axis) { return Sbp::Split(axis); }

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

// Integers in [-6, 6].
Host Value(const std::vector<int64_t>& dims, int salt) {
  Host h{dims, std::vector<float>(static_cast<size_t>(NumElements(dims)))};
  for (size_t i = 0; i < h.data.size(); ++i) {
    h.data[i] = static_cast<float>(static_cast<int64_t>((i * 37 + salt * 101 + i / 7) % 13) - 6);
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
      float acc = 0.0f;
      for (int64_t l = 0; l < k; ++l) acc += x.data[i * k + l] * w.data[l * n + j];
      out.data[i * n + j] = acc;
    }
  }
  return out;
}

template <typename F>
Host Elementwise(const Host& x, const Host& y, F f) {
  Host out = x;
  for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = f(x.data[i], y.data[i]);
  return out;
}

template <typename F>
Host Map(const Host& x, F f) {
  Host out = x;
  for (float& v : out.data) v = f(v);
  return out;
}

// Sum over `axis` of a 2-D value (keepdim false).
Host HostReduce(const Host& x, int axis) {
  const int64_t rows = x.dims[0], cols = x.dims[1];
  Host out{{axis == 0 ? cols : rows}, {}};
  out.data.assign(static_cast<size_t>(out.dims[0]), 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out.data[axis == 0 ? j : i] += x.data[i * cols + j];
  }
  return out;
}

// The part at mesh `coords` under `sbp` as FromWhole lays the value out.
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

// Partial sums that add up to the value but are spread unevenly over the ranks of each P
// mesh axis (coordinate 0 holds value - (n - 1) noise, the others noise), then sliced.
Host UnevenPart(const Host& whole, const Placement& placement, const NdSbp& sbp,
                const std::vector<int64_t>& coords) {
  Host x = whole;
  for (int d = 0; d < placement.ndim(); ++d) {
    if (sbp[d].is_partial_sum() && coords[d] != 0) {
      for (float& v : x.data) v = 0.0f;
    }
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
      x.data[i] += static_cast<float>(factor * (static_cast<int64_t>((i * 5 + other * 3) % 7) - 3));
    }
  }
  for (int d = 0; d < placement.ndim(); ++d) {
    if (sbp[d].is_split()) x = Slice(x, sbp[d].axis, placement.hierarchy()[d], coords[d]);
  }
  return x;
}

bool HasPartialSum(const NdSbp& sbp) {
  return std::any_of(sbp.begin(), sbp.end(), [](const Sbp& s) { return s.is_partial_sum(); });
}

std::vector<int> AllRanks(int size) {
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(r);
  return ranks;
}

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

class GlobalOpsTest : public ::testing::Test {
 protected:
  static eager::Context& ctx() { return ccltest::OpsContext(); }
  static int rank() { return eager::WorldRank(ctx()); }
  static int size() { return eager::WorldSize(ctx()); }

  static Placement Line(DeviceType type = DeviceType::kCpu) {
    return Placement::Create(type, AllRanks(size())).value();
  }
  static Placement Mesh(const std::vector<int64_t>& mesh) {
    return Placement::Create(DeviceType::kCpu, AllRanks(size()), mesh).value();
  }

  // The global tensor of `value` under `sbp`: FromWhole, or with partial sums FromLocal from
  // uneven parts.
  static GlobalTensor Make(const Host& value, const Placement& placement, const NdSbp& sbp) {
    const std::optional<int> id = placement.ParallelId(rank());
    absl::StatusOr<GlobalTensor> g;
    if (HasPartialSum(sbp) && id.has_value()) {
      const Host part = UnevenPart(value, placement, sbp, placement.Coordinates(*id));
      absl::StatusOr<eager::Tensor> t =
          ctx().FromVector(part.data, Shape(part.dims), placement.device());
      EXPECT_TRUE(t.ok()) << t.status();
      g = GlobalTensor::FromLocal(ctx(), *t, placement, sbp, Shape(value.dims));
    } else {
      absl::StatusOr<eager::Tensor> t =
          ctx().FromVector(value.data, Shape(value.dims), Device(DeviceType::kCpu, 0));
      EXPECT_TRUE(t.ok()) << t.status();
      g = GlobalTensor::FromWhole(ctx(), *t, placement, sbp);
    }
    EXPECT_TRUE(g.ok()) << g.status();
    return *g;
  }

  static void ExpectWhole(const GlobalTensor& t, const Host& want) {
    EXPECT_EQ(t.shape(), Shape(want.dims));
    absl::StatusOr<eager::Tensor> whole = t.Whole();
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_EQ(whole->shape(), Shape(want.dims));
    absl::StatusOr<std::vector<float>> got = Read<float>(*whole);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Diff(*got, want.data), "") << "Whole()";
  }

  static void ExpectPart(const GlobalTensor& t, const Host& want) {
    ASSERT_TRUE(t.local().valid());
    EXPECT_EQ(t.local().shape(), Shape(want.dims));
    absl::StatusOr<std::vector<float>> got = Read<float>(t.local());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Diff(*got, want.data), "") << "local part";
  }

  // The output's layout and logical shape, its whole value, and (where its layout has no P)
  // this rank's part.
  static void ExpectResult(const absl::StatusOr<GlobalTensor>& out, const NdSbp& sbp,
                           const Host& want) {
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(NdSbpToString(out->sbp()), NdSbpToString(sbp));
    EXPECT_EQ(out->shape(), Shape(want.dims));
    EXPECT_EQ(out->local().shape(), LocalShape(Shape(want.dims), out->placement(), sbp).value());
    if (!HasPartialSum(sbp)) {
      const int id = out->parallel_id().value();
      ExpectPart(*out,
                 CanonicalPart(want, out->placement(), sbp, out->placement().Coordinates(id)));
    }
    ExpectWhole(*out, want);
  }
};

struct BinaryCase {
  NdSbp x, y, out;
};

std::string CaseName(const BinaryCase& c) {
  return absl::StrCat(NdSbpToString(c.x), " x ", NdSbpToString(c.y), " -> ", NdSbpToString(c.out));
}

TEST_F(GlobalOpsTest, MatmulOneDimensional) {
  const Placement placement = Line();
  const Host x = Value({12, 24}, 1), w = Value({24, 36}, 2);
  const Host want = HostMatmul(x, w);
  const std::vector<BinaryCase> cases = {
      {{S(0)}, {kB}, {S(0)}},    // rows of X
      {{S(1)}, {S(0)}, {kP}},    // the inner dimension: partial products
      {{kB}, {S(1)}, {S(1)}},    // columns of W
      {{kB}, {kB}, {kB}},        // replicated
      {{kP}, {kB}, {kP}},        // linear in X
      {{kB}, {kP}, {kP}},        // linear in W
      {{S(0)}, {S(1)}, {S(0)}},  // W gathered
      {{S(0)}, {kP}, {S(0)}},    // W reduced
      {{kP}, {S(1)}, {S(1)}},    // X reduced
      {{S(1)}, {S(1)}, {S(1)}},  // X gathered
      {{S(1)}, {kB}, {kB}},      // no rule: both broadcast
      {{kP}, {kP}, {kB}},        // no rule: both broadcast
      {{kB}, {S(0)}, {kB}},      // no rule: both broadcast
  };
  for (const BinaryCase& c : cases) {
    SCOPED_TRACE(CaseName(c));
    const GlobalTensor gx = Make(x, placement, c.x), gw = Make(w, placement, c.y);
    ExpectResult(Matmul(gx, gw), c.out, want);
  }
}

TEST_F(GlobalOpsTest, MatmulOfInnerSplitsGivesPartialProducts) {
  // X S(1) times W S(0): each rank multiplies its columns of X by its rows of W, nothing
  // moves, and the parts are the partial products.
  const Placement placement = Line();
  const Host x = Value({12, 24}, 3), w = Value({24, 36}, 4);
  absl::StatusOr<GlobalTensor> out = Matmul(Make(x, placement, {S(1)}), Make(w, placement, {S(0)}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sbp(), NdSbp{kP});
  const int id = placement.ParallelId(rank()).value();
  ExpectPart(*out, HostMatmul(Slice(x, 1, size(), id), Slice(w, 0, size(), id)));
  ExpectWhole(*out, HostMatmul(x, w));
}

TEST_F(GlobalOpsTest, MatmulOnSim) {
  const Placement placement = Line(DeviceType::kSim);
  const Host x = Value({12, 24}, 5), w = Value({24, 36}, 6);
  const Host want = HostMatmul(x, w);
  for (const BinaryCase& c : std::vector<BinaryCase>{
           {{S(0)}, {kB}, {S(0)}}, {{S(1)}, {S(0)}, {kP}}, {{kB}, {S(1)}, {S(1)}}}) {
    SCOPED_TRACE(CaseName(c));
    const GlobalTensor gx = Make(x, placement, c.x), gw = Make(w, placement, c.y);
    absl::StatusOr<GlobalTensor> out = Matmul(gx, gw);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->local().device(), Device(DeviceType::kSim, 0));
    ExpectResult(out, c.out, want);
  }
}

TEST_F(GlobalOpsTest, MatmulTwoDimensional) {
  const Host x = Value({12, 24}, 7), w = Value({24, 36}, 8);
  const Host want = HostMatmul(x, w);
  const std::vector<BinaryCase> cases = {
      {{S(0), kB}, {kB, S(1)}, {S(0), S(1)}},  // rows x columns: a 2-D block each
      {{S(0), S(1)}, {kB, S(0)}, {S(0), kP}},  // rows, and partial over the inner split
      {{S(1), S(1)}, {S(0), S(0)}, {kP, kP}},  // the inner dimension split twice
      {{kB, S(0)}, {S(1), kB}, {S(1), S(0)}},  // columns outer, rows inner
      {{S(1), kB}, {S(0), S(1)}, {kP, S(1)}},  // partial outer, columns inner
      {{S(0), S(0)}, {kB, kB}, {S(0), S(0)}},  // rows split twice
      {{kB, kB}, {S(1), S(1)}, {S(1), S(1)}},  // columns split twice
      {{kP, S(0)}, {kB, kB}, {kP, S(0)}},      // partial X
      {{S(1), kP}, {S(0), kB}, {kP, kP}},      // partial products of a partial X
      {{kP, kB}, {kB, kP}, {kP, kP}},          // bilinear: a product term per rank
      {{S(1), S(0)}, {kP, S(1)}, {kB, S(0)}},  // no rule on axis 0: both broadcast
      {{kP, kP}, {kP, kP}, {kB, kB}},          // no rule anywhere
  };
  for (const std::vector<int64_t>& mesh : MeshesFor(size())) {
    const Placement placement = Mesh(mesh);
    for (const BinaryCase& c : cases) {
      SCOPED_TRACE(
          absl::StrCat(placement.ToString(), " mesh [", mesh[0], ", ", mesh[1], "] ", CaseName(c)));
      const GlobalTensor gx = Make(x, placement, c.x), gw = Make(w, placement, c.y);
      ExpectResult(Matmul(gx, gw), c.out, want);
    }
  }
}

struct ElementwiseCase {
  NdSbp x, y, add, mul;
};

void RunElementwise(const Placement& placement, const std::vector<ElementwiseCase>& cases, int salt,
                    GlobalTensor (*make)(const Host&, const Placement&, const NdSbp&),
                    void (*expect)(const absl::StatusOr<GlobalTensor>&, const NdSbp&,
                                   const Host&)) {
  const Host x = Value({12, 24}, salt), y = Value({12, 24}, salt + 1);
  const Host sum = Elementwise(x, y, [](float a, float b) { return a + b; });
  const Host product = Elementwise(x, y, [](float a, float b) { return a * b; });
  for (const ElementwiseCase& c : cases) {
    SCOPED_TRACE(
        absl::StrCat(placement.ToString(), " ", NdSbpToString(c.x), " and ", NdSbpToString(c.y)));
    const GlobalTensor gx = make(x, placement, c.x), gy = make(y, placement, c.y);
    {
      SCOPED_TRACE("add");
      expect(Add(gx, gy), c.add, sum);
    }
    {
      SCOPED_TRACE("mul");
      expect(Mul(gx, gy), c.mul, product);
    }
  }
}

TEST_F(GlobalOpsTest, AddAndMulOneDimensional) {
  const std::vector<ElementwiseCase> cases = {
      // Matching layouts run on the parts as they are.
      {{S(0)}, {S(0)}, {S(0)}, {S(0)}},
      {{S(1)}, {S(1)}, {S(1)}, {S(1)}},
      {{kB}, {kB}, {kB}, {kB}},
      // A sum of partial sums is a partial sum; their product is not.
      {{kP}, {kP}, {kP}, {kB}},
      // A partial sum times a broadcast value is a partial sum; plus it is not.
      {{kP}, {kB}, {kB}, {kP}},
      {{kB}, {kP}, {kB}, {kP}},
      // Mismatched layouts: boxing to broadcast.
      {{S(0)}, {S(1)}, {kB}, {kB}},
      {{S(0)}, {kB}, {kB}, {kB}},
      {{kB}, {S(1)}, {kB}, {kB}},
      {{kP}, {S(0)}, {kB}, {kB}},
      {{S(1)}, {kP}, {kB}, {kB}},
  };
  RunElementwise(Line(), cases, 10, &Make, &ExpectResult);
  RunElementwise(Line(DeviceType::kSim), cases, 12, &Make, &ExpectResult);
}

TEST_F(GlobalOpsTest, AddAndMulTwoDimensional) {
  const std::vector<ElementwiseCase> cases = {
      {{S(0), S(1)}, {S(0), S(1)}, {S(0), S(1)}, {S(0), S(1)}},
      {{S(1), S(1)}, {S(1), S(1)}, {S(1), S(1)}, {S(1), S(1)}},
      {{kP, S(0)}, {kP, S(0)}, {kP, S(0)}, {kB, S(0)}},
      {{kP, kB}, {kB, kB}, {kB, kB}, {kP, kB}},
      {{kB, kP}, {kP, kB}, {kB, kB}, {kP, kP}},
      {{kP, kP}, {kB, kB}, {kB, kB}, {kP, kP}},
      {{S(0), S(0)}, {S(0), S(1)}, {S(0), kB}, {S(0), kB}},
      {{S(1), kP}, {S(0), kP}, {kB, kP}, {kB, kB}},
  };
  for (const std::vector<int64_t>& mesh : MeshesFor(size())) {
    RunElementwise(Mesh(mesh), cases, 14, &Make, &ExpectResult);
  }
}

TEST_F(GlobalOpsTest, BroadcastingShapesFallBackToBroadcast) {
  // Shapes that differ (a row added to every row) fit no split rule: both inputs broadcast.
  const Placement placement = Line();
  const Host x = Value({12, 24}, 16), row = Value({24}, 17);
  Host want = x;
  for (size_t i = 0; i < want.data.size(); ++i) want.data[i] += row.data[i % 24];
  ExpectResult(Add(Make(x, placement, {S(0)}), Make(row, placement, {S(0)})), {kB}, want);
  ExpectResult(Add(Make(x, placement, {S(1)}), Make(row, placement, {kP})), {kB}, want);
}

TEST_F(GlobalOpsTest, SubDivMaxRules) {
  const Placement placement = Line();
  const Host x = Value({12, 24}, 18), y = Value({12, 24}, 19);
  // Powers of two: every quotient and its partial sums are exact.
  const Host d = Map(Value({12, 24}, 20), [](float v) { return v >= 0 ? 2.0f : -4.0f; });
  const auto call = [](absl::string_view op, const GlobalTensor& a, const GlobalTensor& b) {
    absl::StatusOr<std::vector<GlobalTensor>> out = Call(op, {a, b});
    if (!out.ok()) return absl::StatusOr<GlobalTensor>(out.status());
    EXPECT_EQ(out->size(), 1u);
    return absl::StatusOr<GlobalTensor>(out->at(0));
  };
  const Host difference = Elementwise(x, y, [](float a, float b) { return a - b; });
  const Host quotient = Elementwise(x, d, [](float a, float b) { return a / b; });
  const Host maximum = Elementwise(x, y, [](float a, float b) { return std::max(a, b); });
  ExpectResult(call("sub", Make(x, placement, {kP}), Make(y, placement, {kP})), {kP}, difference);
  ExpectResult(call("sub", Make(x, placement, {kP}), Make(y, placement, {kB})), {kB}, difference);
  ExpectResult(call("div", Make(x, placement, {kP}), Make(d, placement, {kB})), {kP}, quotient);
  ExpectResult(call("div", Make(x, placement, {kB}), Make(d, placement, {kP})), {kB}, quotient);
  ExpectResult(call("div", Make(x, placement, {S(1)}), Make(d, placement, {S(1)})), {S(1)},
               quotient);
  ExpectResult(call("max", Make(x, placement, {kP}), Make(y, placement, {kP})), {kB}, maximum);
  ExpectResult(call("max", Make(x, placement, {S(0)}), Make(y, placement, {S(0)})), {S(0)},
               maximum);
}

TEST_F(GlobalOpsTest, ReluOfPartialSumBoxesToBroadcastFirst) {
  // relu of a sum is not the sum of the parts' relus: the partial sum is reduced first.
  const Host x = Value({12, 24}, 21);
  const Host relu = Map(x, [](float v) { return std::max(v, 0.0f); });
  const Placement placement = Line();
  ExpectResult(Relu(Make(x, placement, {kP})), {kB}, relu);
  ExpectResult(Relu(Make(x, placement, {S(0)})), {S(0)}, relu);
  ExpectResult(Relu(Make(x, placement, {S(1)})), {S(1)}, relu);
  ExpectResult(Relu(Make(x, placement, {kB})), {kB}, relu);
  // The partial products of a matmul over the inner split.
  const Host a = Value({12, 24}, 22), b = Value({24, 36}, 23);
  absl::StatusOr<GlobalTensor> product =
      Matmul(Make(a, placement, {S(1)}), Make(b, placement, {S(0)}));
  ASSERT_TRUE(product.ok()) << product.status();
  EXPECT_EQ(product->sbp(), NdSbp{kP});
  ExpectResult(Relu(*product), {kB},
               Map(HostMatmul(a, b), [](float v) { return std::max(v, 0.0f); }));
  for (const std::vector<int64_t>& mesh : MeshesFor(size())) {
    SCOPED_TRACE(absl::StrCat("mesh [", mesh[0], ", ", mesh[1], "]"));
    ExpectResult(Relu(Make(x, Mesh(mesh), {kP, S(1)})), {kB, S(1)}, relu);
    ExpectResult(Relu(Make(x, Mesh(mesh), {S(0), kP})), {S(0), kB}, relu);
    ExpectResult(Relu(Make(x, Mesh(mesh), {kP, kP})), {kB, kB}, relu);
  }
}

TEST_F(GlobalOpsTest, LinearUnaryOpsKeepPartialSums) {
  const Placement placement = Line();
  const Host x = Value({12, 24}, 24);
  const auto scale = [&](const NdSbp& sbp, double s, double bias) {
    vm::AttrMap attrs;
    attrs.Set("scale", s);
    attrs.Set("bias", bias);
    absl::StatusOr<std::vector<GlobalTensor>> out = Call("scale", {Make(x, placement, sbp)}, attrs);
    if (!out.ok()) return absl::StatusOr<GlobalTensor>(out.status());
    return absl::StatusOr<GlobalTensor>(out->at(0));
  };
  ExpectResult(scale({kP}, 3.0, 0.0), {kP}, Map(x, [](float v) { return 3 * v; }));
  // A bias would be added once per part.
  ExpectResult(scale({kP}, 3.0, 1.0), {kB}, Map(x, [](float v) { return 3 * v + 1; }));
  ExpectResult(scale({S(1)}, -2.0, 5.0), {S(1)}, Map(x, [](float v) { return -2 * v + 5; }));
  absl::StatusOr<std::vector<GlobalTensor>> copied = Call("assign", {Make(x, placement, {kP})});
  ASSERT_TRUE(copied.ok()) << copied.status();
  ExpectResult(copied->at(0), {kP}, x);
  absl::StatusOr<std::vector<GlobalTensor>> squared = Call("square", {Make(x, placement, {kP})});
  ASSERT_TRUE(squared.ok()) << squared.status();
  ExpectResult(squared->at(0), {kB}, Map(x, [](float v) { return v * v; }));
}

struct ReduceCase {
  NdSbp in;
  std::vector<int64_t> axes;
  bool keepdim;
  NdSbp out;
  int want;  // 0: sums over rows (the columns' sums), 1: over columns, 2: everything
};

TEST_F(GlobalOpsTest, ReduceSum) {
  const Host x = Value({12, 24}, 25);
  float total_sum = 0;
  for (float v : x.data) total_sum += v;
  const std::vector<Host> wants = {HostReduce(x, 0), HostReduce(x, 1), Host{{}, {total_sum}}};
  const auto check = [&](const Placement& placement, const ReduceCase& c) {
    SCOPED_TRACE(absl::StrCat(placement.ToString(), " ", NdSbpToString(c.in), " over [",
                              absl::StrJoin(c.axes, ", "), "]", c.keepdim ? " keepdim" : ""));
    Host want = wants[c.want];
    if (c.keepdim) {
      want.dims = {c.want == 1 ? 12 : 1, c.want == 0 ? 24 : 1};
    }
    ExpectResult(ReduceSum(Make(x, placement, c.in), c.axes, c.keepdim), c.out, want);
  };
  const std::vector<ReduceCase> line = {
      {{S(0)}, {0}, false, {kP}, 0},     // over the split axis: partial sums
      {{S(0)}, {1}, false, {S(0)}, 1},   // over another axis: still split
      {{S(0)}, {1}, true, {S(0)}, 1},    // kept
      {{S(1)}, {0}, false, {S(0)}, 0},   // the split axis moves down
      {{S(1)}, {0}, true, {S(1)}, 0},    // unless kept
      {{S(1)}, {1}, false, {kP}, 1},     // over the split axis
      {{S(1)}, {-1}, false, {kP}, 1},    // counted from the end
      {{S(1)}, {1}, true, {kP}, 1},      // kept
      {{S(0)}, {}, false, {kP}, 2},      // everything
      {{S(1)}, {0, 1}, false, {kP}, 2},  // everything, named
      {{kB}, {0}, false, {kB}, 0},       // replicated
      {{kP}, {1}, false, {kP}, 1},       // a sum of partial sums
      {{kP}, {}, false, {kP}, 2},
  };
  for (const ReduceCase& c : line) check(Line(), c);
  const std::vector<ReduceCase> mesh_cases = {
      {{S(0), S(1)}, {0}, false, {kP, S(0)}, 0},   {{S(1), S(0)}, {1}, false, {kP, S(0)}, 1},
      {{S(0), S(0)}, {1}, false, {S(0), S(0)}, 1}, {{S(1), S(1)}, {0}, false, {S(0), S(0)}, 0},
      {{S(0), S(0)}, {0}, false, {kP, kP}, 0},     {{kP, S(1)}, {1}, false, {kP, kP}, 1},
      {{kB, S(0)}, {}, false, {kB, kP}, 2},        {{S(1), kB}, {0}, true, {S(1), kB}, 0},
  };
  for (const std::vector<int64_t>& mesh : MeshesFor(size())) {
    for (const ReduceCase& c : mesh_cases) check(Mesh(mesh), c);
  }
}

TEST_F(GlobalOpsTest, OtherOpsRunOnTheWholeValue) {
  // An op without a rule (transpose) gets every input broadcast.
  const Placement placement = Line();
  const Host x = Value({12, 24}, 26);
  Host transposed{{24, 12}, std::vector<float>(x.data.size())};
  for (int64_t i = 0; i < 12; ++i) {
    for (int64_t j = 0; j < 24; ++j) transposed.data[j * 12 + i] = x.data[i * 24 + j];
  }
  for (const NdSbp& sbp : std::vector<NdSbp>{{S(0)}, {S(1)}, {kB}, {kP}}) {
    SCOPED_TRACE(NdSbpToString(sbp));
    vm::AttrMap attrs;
    attrs.Set("perm", std::vector<int64_t>{1, 0});
    absl::StatusOr<std::vector<GlobalTensor>> out =
        Call("transpose", {Make(x, placement, sbp)}, attrs);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    ExpectResult(out->at(0), {kB}, transposed);
  }
}

TEST_F(GlobalOpsTest, ChainOfOps) {
  // A two-layer perceptron with the batch split (data parallel) and, separately, the hidden
  // layer split (tensor parallel: W1 by columns, W2 by rows, one reduction at the end).
  const Host x = Value({12, 24}, 27), w1 = Value({24, 36}, 28), w2 = Value({36, 12}, 29);
  const Host hidden = Map(HostMatmul(x, w1), [](float v) { return std::max(v, 0.0f); });
  const Host want = HostMatmul(hidden, w2);
  const Placement placement = Line();
  {
    SCOPED_TRACE("data parallel");
    absl::StatusOr<GlobalTensor> h = Matmul(Make(x, placement, {S(0)}), Make(w1, placement, {kB}));
    ASSERT_TRUE(h.ok()) << h.status();
    absl::StatusOr<GlobalTensor> r = Relu(*h);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->sbp(), NdSbp{S(0)});
    ExpectResult(Matmul(*r, Make(w2, placement, {kB})), {S(0)}, want);
  }
  {
    SCOPED_TRACE("tensor parallel");
    absl::StatusOr<GlobalTensor> h = Matmul(Make(x, placement, {kB}), Make(w1, placement, {S(1)}));
    ASSERT_TRUE(h.ok()) << h.status();
    absl::StatusOr<GlobalTensor> r = Relu(*h);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->sbp(), NdSbp{S(1)});
    absl::StatusOr<GlobalTensor> out = Matmul(*r, Make(w2, placement, {S(0)}));
    ExpectResult(out, {kP}, want);
    ASSERT_TRUE(out.ok());
    absl::StatusOr<GlobalTensor> loss = ReduceSum(*out);
    float total = 0;
    for (float v : want.data) total += v;
    ExpectResult(loss, {kP}, Host{{}, {total}});
  }
}

// cast is not linear (a cast to an integer truncates each part: parts of 0.5 cast to 0 where
// their sum casts to 1), so a partial sum is made whole before it: the logical value is
// cast.
TEST_F(GlobalOpsTest, CastOfPartialSumToAnInteger) {
  if (size() < 2) GTEST_SKIP() << "a partial sum over one rank is its value";
  const Placement placement = Line();
  absl::StatusOr<eager::Tensor> half =
      ctx().FromVector(std::vector<float>(4, 0.5f), Shape({4}), Device(DeviceType::kCpu, 0));
  ASSERT_TRUE(half.ok()) << half.status();
  absl::StatusOr<GlobalTensor> x = GlobalTensor::FromLocal(ctx(), *half, placement, {kP});
  ASSERT_TRUE(x.ok()) << x.status();
  vm::AttrMap attrs;
  attrs.Set("dtype", std::string(DataTypeName(DataType::kI32)));
  absl::StatusOr<std::vector<GlobalTensor>> cast = Call("cast", {*x}, attrs);
  ASSERT_TRUE(cast.ok()) << cast.status();
  EXPECT_EQ(cast->at(0).dtype(), DataType::kI32);
  absl::StatusOr<eager::Tensor> whole = cast->at(0).Whole();
  ASSERT_TRUE(whole.ok()) << whole.status();
  absl::StatusOr<std::vector<int32_t>> got = Read<int32_t>(*whole);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Diff(*got, std::vector<int32_t>(4, size() / 2)), "")
      << "cast of a partial sum of size x 0.5 (layout " << NdSbpToString(cast->at(0).sbp()) << ")";
}

}  // namespace
}  // namespace sluice::global::global_ops_test
