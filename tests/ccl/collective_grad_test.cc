// Eager gradients through collectives (framework/autograd/autograd.h). For y = op(x) on
// every rank, seeded on rank r with an upstream gradient g_r, the gradient that reaches x on
// rank p is d/dx_p of the global loss L = sum_r <g_r, y_r>. Each test compares it with that
// derivative written out on the host from the op's definition (ops/collective_ops.cc), and
// checks it against L itself by differences: L is linear in x, so moving one element of x
// on one rank by 1 changes L by exactly that element's gradient (values are small
// integers, so f32 is exact except for the 1/nranks of a mean).
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/eager/stream_scope.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ccl/ccl_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::ccltest::collective_grad_test {
namespace {

using eager::Tensor;
using ::testing::HasSubstr;
using Forward = std::function<absl::StatusOr<Tensor>(const Tensor&)>;
using Vec = std::vector<float>;

struct GradCase {
  std::string name;
  Forward forward;
  int64_t x_count;  // elements of x on every rank
  int64_t y_count;  // elements of y on every rank
  // The gradient on rank p from every rank's upstream gradient g[r], by the definition.
  std::function<Vec(int p, const std::vector<Vec>& g)> want;
  bool exact = true;
};

class CollectiveGradTest : public ::testing::TestWithParam<const char*> {
 protected:
  eager::Context& ctx() { return GradContext(); }
  int rank() { return eager::WorldRank(ctx()); }
  int size() { return eager::WorldSize(ctx()); }
  Tensor Put(const Vec& values) {
    return ctx()
        .FromVector<float>(values, Shape({static_cast<int64_t>(values.size())}), Dev(GetParam()))
        .value();
  }

  // L = sum over ranks of <g, forward(x)>: every rank calls it alike and gets L.
  float GlobalLoss(const GradCase& c, const Vec& x, const Tensor& g) {
    autograd::NoGradGuard no_grad;
    absl::StatusOr<Tensor> y = c.forward(Put(x));
    EXPECT_TRUE(y.ok()) << y.status();
    if (!y.ok()) return NAN;
    Tensor local = fn::ReduceSum(fn::Mul(g, *y).value()).value();
    absl::StatusOr<std::vector<float>> total = eager::AllReduce(local).value().ToVector<float>();
    EXPECT_TRUE(total.ok()) << total.status();
    return total.ok() ? (*total)[0] : NAN;
  }

  void Check(const GradCase& c, int salt) {
    SCOPED_TRACE(absl::StrCat(c.name, " on ", GetParam(), " (rank ", rank(), " of ", size(), ")"));
    const Vec x_values = Values<float>(rank(), c.x_count, salt);
    std::vector<Vec> g_all;
    for (int r = 0; r < size(); ++r) g_all.push_back(Values<float>(r, c.y_count, salt + 1));
    Tensor x = Put(x_values);
    ASSERT_TRUE(autograd::SetRequiresGrad(x).ok());
    absl::StatusOr<Tensor> y = c.forward(x);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_TRUE(autograd::RequiresGrad(*y));
    Tensor g = Put(g_all[rank()]);
    const absl::Status backward = autograd::Backward(*y, g);
    ASSERT_TRUE(backward.ok()) << backward;
    const Tensor dx = autograd::GradOf(x);
    ASSERT_TRUE(dx.valid());
    EXPECT_EQ(dx.shape(), x.shape());
    EXPECT_EQ(dx.device(), Dev(GetParam()));
    absl::StatusOr<Vec> got = dx.ToVector<float>();
    ASSERT_TRUE(got.ok()) << got.status();
    const Vec want = c.want(rank(), g_all);
    if (c.exact) {
      EXPECT_EQ(Diff(*got, want), "");
    } else {
      ASSERT_EQ(got->size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR((*got)[i], want[i], 1e-5) << i;
    }

    // By differences of L: one element of x on one rank at a time (every rank takes part in
    // every evaluation; only rank p moves its x, and only rank p compares).
    const float base = GlobalLoss(c, x_values, g);
    for (int p = 0; p < size(); ++p) {
      for (int64_t i : {int64_t{0}, c.x_count / 2, c.x_count - 1}) {
        Vec moved = x_values;
        if (rank() == p) moved[static_cast<size_t>(i)] += 1.0f;
        const float changed = GlobalLoss(c, moved, g);
        if (rank() == p) {
          EXPECT_NEAR(changed - base, (*got)[static_cast<size_t>(i)], c.exact ? 0.0 : 1e-4)
              << "element " << i;
        }
      }
    }
  }
};

Vec Zeros(int64_t n) { return Vec(static_cast<size_t>(n), 0.0f); }

Vec SumOf(const std::vector<Vec>& g) {
  Vec sum = Zeros(static_cast<int64_t>(g[0].size()));
  for (const Vec& v : g) {
    for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
  }
  return sum;
}

// y = all_reduce_sum(x): dL/dx_p = sum_r g_r (the all_reduce sum of the upstream gradient),
// and for the mean, that sum over the number of ranks.
TEST_P(CollectiveGradTest, AllReduce) {
  const int n = size();
  Check({"all_reduce(sum)", [](const Tensor& x) { return eager::AllReduce(x); }, 7, 7,
         [](int, const std::vector<Vec>& g) { return SumOf(g); }},
        10);
  Check({"all_reduce(mean)", [](const Tensor& x) { return eager::AllReduce(x, ReduceOp::kMean); },
         7, 7,
         [n](int, const std::vector<Vec>& g) {
           Vec v = SumOf(g);
           for (float& e : v) e /= static_cast<float>(n);
           return v;
         },
         /*exact=*/false},
        20);
  EXPECT_TRUE(ctx().Sync().ok());
}

// y = all_gather(x) [n * k]: dL/dx_p = sum_r g_r[p * k, (p + 1) * k) (reduce_scatter(sum)).
TEST_P(CollectiveGradTest, AllGather) {
  const int n = size();
  Check({"all_gather", [](const Tensor& x) { return eager::AllGather(x); }, 5, 5 * n,
         [](int p, const std::vector<Vec>& g) {
           const Vec sum = SumOf(g);
           return Vec(sum.begin() + 5 * p, sum.begin() + 5 * (p + 1));
         }},
        30);
  EXPECT_TRUE(ctx().Sync().ok());
}

// The upstream gradients of every rank concatenated in rank order (all_gather), each element
// over `divisor`.
Vec Concatenated(const std::vector<Vec>& g, float divisor) {
  Vec all;
  for (const Vec& v : g) all.insert(all.end(), v.begin(), v.end());
  for (float& e : all) e /= divisor;
  return all;
}

// y = reduce_scatter(sum)(x) [k] of x [n * k]: dL/dx_p = concat_r g_r (all_gather).
TEST_P(CollectiveGradTest, ReduceScatterSum) {
  const int n = size();
  Check({"reduce_scatter(sum)", [](const Tensor& x) { return eager::ReduceScatter(x); }, 3 * n, 3,
         [](int, const std::vector<Vec>& g) { return Concatenated(g, 1.0f); }},
        40);
  EXPECT_TRUE(ctx().Sync().ok());
}

// The gradient of reduce_scatter(mean) is one all_gather with 'scale' 1/n (eager autograd
// resolves only grad ops whose outputs are the forward inputs' gradients): concat_r g_r / n.
TEST_P(CollectiveGradTest, ReduceScatterMean) {
  const int n = size();
  Check({"reduce_scatter(mean)",
         [](const Tensor& x) { return eager::ReduceScatter(x, ReduceOp::kMean); }, 3 * n, 3,
         [n](int, const std::vector<Vec>& g) { return Concatenated(g, static_cast<float>(n)); },
         /*exact=*/false},
        50);
  EXPECT_TRUE(ctx().Sync().ok());
}

// y = broadcast(x, root): only the root's x matters; dL/dx_root = sum_r g_r, zero elsewhere
// (reduce(sum) to the root).
TEST_P(CollectiveGradTest, BroadcastFromEachRoot) {
  for (int root = 0; root < size(); ++root) {
    Check({absl::StrCat("broadcast from ", root),
           [root](const Tensor& x) { return eager::Broadcast(x, root); }, 6, 6,
           [root](int p, const std::vector<Vec>& g) { return p == root ? SumOf(g) : Zeros(6); }},
          60 + 2 * root);
  }
  EXPECT_TRUE(ctx().Sync().ok());
}

// y = reduce(sum, root) (zeros off the root): dL/dx_p = g_root (broadcast from the root).
TEST_P(CollectiveGradTest, ReduceToEachRoot) {
  for (int root = 0; root < size(); ++root) {
    Check({absl::StrCat("reduce(sum) to ", root),
           [root](const Tensor& x) { return eager::Reduce(x, root); }, 4, 4,
           [root](int, const std::vector<Vec>& g) { return g[static_cast<size_t>(root)]; }},
          80 + 2 * root);
  }
  EXPECT_TRUE(ctx().Sync().ok());
}

// A loss through compute and a collective: y = all_reduce(x_r w) [3, 2] with w [2, 2] the
// same on every rank, loss_r = sum(y * y) on each rank. Backward of each rank's loss gives
// w the gradient of sum_r loss_r = n sum(y * y) with respect to rank r's w:
// x_r^T (2 n y). The matmul runs on compute stream 1 of sim devices.
TEST_P(CollectiveGradTest, ThroughMatmulAndAllReduce) {
  const int r = rank(), n = size();
  const Device device = Dev(GetParam());
  const Vec xv = Values<float>(r, 6, 90), wv = Values<float>(0, 4, 91);
  Tensor x = ctx().FromVector<float>(xv, Shape({3, 2}), device).value();
  Tensor w = ctx().FromVector<float>(wv, Shape({2, 2}), device).value();
  ASSERT_TRUE(autograd::SetRequiresGrad(w).ok());
  Tensor xw;
  {
    std::optional<eager::StreamScope> side;
    if (device.IsAsync()) side.emplace(StreamKey{device, StreamType::kCompute, 1});
    xw = fn::Matmul(x, w).value();
  }
  Tensor y = eager::AllReduce(xw).value();
  Tensor loss = fn::ReduceSum(fn::Mul(y, y).value()).value();
  ASSERT_TRUE(autograd::Backward(loss).ok());
  // Host: y = sum_q x_q w, dw = x_r^T (2 n y).
  Vec y_host(6, 0.0f);
  for (int q = 0; q < n; ++q) {
    const Vec xq = Values<float>(q, 6, 90);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 2; ++j) {
        for (int k = 0; k < 2; ++k) y_host[i * 2 + j] += xq[i * 2 + k] * wv[k * 2 + j];
      }
    }
  }
  Vec want(4, 0.0f);
  for (int k = 0; k < 2; ++k) {
    for (int j = 0; j < 2; ++j) {
      for (int i = 0; i < 3; ++i) {
        want[k * 2 + j] += xv[i * 2 + k] * 2.0f * static_cast<float>(n) * y_host[i * 2 + j];
      }
    }
  }
  EXPECT_EQ(Diff(autograd::GradOf(w).ToVector<float>().value(), want), "");
  EXPECT_EQ(Diff(loss.ToVector<float>().value(), Vec{[&] {
                   float s = 0;
                   for (float e : y_host) s += e * e;
                   return s;
                 }()}),
            "");
  EXPECT_TRUE(ctx().Sync().ok());
  EXPECT_EQ(ctx().vm()->sync_checker()->violation_count(), 0)
      << ctx().vm()->sync_checker()->status();
}

// A bucket all_reduce: each output's gradient goes back to its own input; an output the
// loss does not use contributes zeros.
TEST_P(CollectiveGradTest, BucketAllReduce) {
  const int r = rank(), n = size();
  Tensor a = Put(Values<float>(r, 3, 100));
  Tensor b = Put(Values<float>(r, 5, 101));
  Tensor c = Put(Values<float>(r, 2, 102));
  for (const Tensor& t : {a, b, c}) ASSERT_TRUE(autograd::SetRequiresGrad(t).ok());
  std::vector<Tensor> ys = eager::AllReduce(std::vector<Tensor>{a, b, c}).value();
  // loss_r = sum(ys[0]) + sum(k_r * ys[1]); ys[2] unused. k_r = Values(r, 5, 103).
  Tensor k = Put(Values<float>(r, 5, 103));
  Tensor loss =
      fn::Add(fn::ReduceSum(ys[0]).value(), fn::ReduceSum(fn::Mul(k, ys[1]).value()).value())
          .value();
  ASSERT_TRUE(autograd::Backward(loss).ok());
  EXPECT_EQ(Diff(autograd::GradOf(a).ToVector<float>().value(), Vec(3, static_cast<float>(n))), "");
  std::vector<Vec> ks;
  for (int q = 0; q < n; ++q) ks.push_back(Values<float>(q, 5, 103));
  EXPECT_EQ(Diff(autograd::GradOf(b).ToVector<float>().value(), SumOf(ks)), "");
  const Tensor dc = autograd::GradOf(c);
  if (dc.valid()) {
    EXPECT_EQ(Diff(dc.ToVector<float>().value(), Zeros(2)), "");
  }
  EXPECT_TRUE(ctx().Sync().ok());
}

// autograd::Grad (no accumulation into the leaves) through all_reduce and all_gather.
TEST_P(CollectiveGradTest, GradWithoutAccumulation) {
  const int r = rank(), n = size();
  Tensor x = Put(Values<float>(r, 4, 110));
  ASSERT_TRUE(autograd::SetRequiresGrad(x).ok());
  Tensor y = fn::ReduceSum(eager::AllGather(eager::AllReduce(x).value()).value()).value();
  absl::StatusOr<std::vector<Tensor>> dx = autograd::Grad({y}, {x});
  ASSERT_TRUE(dx.ok()) << dx.status();
  // y_r = sum over the gathered n copies of s = sum_q x_q: n * sum(s); L = sum_r y_r, so
  // dL/dx_p = n * n per element.
  EXPECT_EQ(Diff((*dx)[0].ToVector<float>().value(), Vec(4, static_cast<float>(n * n))), "");
  EXPECT_FALSE(autograd::GradOf(x).valid());
  EXPECT_TRUE(ctx().Sync().ok());
}

// With several roots, the nodes ready at the start of a pass are taken in discovery order,
// not in the order of a map keyed by node addresses (which differ between processes): ranks
// issue the gradients' collectives in one order. Ranks of a real program rarely allocate
// alike, which the test imitates by keeping a different number of unrelated tensors alive
// on each rank.
TEST_P(CollectiveGradTest, GradOfSeveralRootsIssuesCollectivesInOneOrderOnEveryRank) {
  if (size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  const int r = rank(), n = size();
  std::vector<Tensor> unrelated;
  for (int trial = 0; trial < 20; ++trial) {
    SCOPED_TRACE(trial);
    for (int i = 0; i < r + 1; ++i) unrelated.push_back(Put(Vec(1 + trial, 1.0f)));
    const int salt = 1000 + 10 * trial;
    std::vector<Tensor> xs, gs;
    std::vector<std::vector<Vec>> g(4);  // g[k][q]: rank q's upstream gradient of root k
    for (int k = 0; k < 4; ++k) {
      xs.push_back(Put(Values<float>(r, 4 * n, salt + k)));
      ASSERT_TRUE(autograd::SetRequiresGrad(xs.back()).ok());
      const int64_t y_count = k == 1 ? 4 * n * n : k == 3 ? 4 : 4 * n;
      for (int q = 0; q < n; ++q) g[k].push_back(Values<float>(q, y_count, salt + 5 + k));
      gs.push_back(Put(g[k][r]));
    }
    const std::vector<Tensor> ys = {
        eager::AllReduce(xs[0]).value(), eager::AllGather(xs[1]).value(),
        eager::Broadcast(xs[2], 0).value(), eager::ReduceScatter(xs[3]).value()};
    absl::StatusOr<std::vector<Tensor>> grads = autograd::Grad(ys, xs, gs);
    ASSERT_TRUE(grads.ok()) << grads.status();
    std::vector<Vec> want;
    want.push_back(SumOf(g[0]));
    const Vec gathered = SumOf(g[1]);
    want.push_back(Vec(gathered.begin() + 4 * n * r, gathered.begin() + 4 * n * (r + 1)));
    want.push_back(r == 0 ? SumOf(g[2]) : Zeros(4 * n));
    want.push_back(Concatenated(g[3], 1.0f));
    for (int k = 0; k < 4; ++k) {
      absl::StatusOr<Vec> got = (*grads)[k].ToVector<float>();
      EXPECT_TRUE(got.ok()) << "root " << k << ": " << got.status();
      if (got.ok()) {
        EXPECT_EQ(Diff(*got, want[k]), "") << "root " << k;
      }
    }
    const absl::Status synced = ctx().Sync();
    EXPECT_TRUE(synced.ok()) << synced;
  }
}

// all_reduce with max or min has no gradient: Backward through it is an error naming the
// op, as for any op without a gradient (framework/autograd/autograd.h), not a silent OK.
TEST_P(CollectiveGradTest, BackwardThroughAllReduceMaxIsAnError) {
  Tensor x = Put(Values<float>(rank(), 4, 200));
  ASSERT_TRUE(autograd::SetRequiresGrad(x).ok());
  Tensor loss = fn::ReduceSum(eager::AllReduce(x, ReduceOp::kMax).value()).value();
  const absl::Status status = autograd::Backward(loss);
  EXPECT_FALSE(status.ok()) << "x gets a gradient: " << autograd::GradOf(x).valid();
  EXPECT_THAT(std::string(status.message()), HasSubstr("all_reduce"));
  EXPECT_TRUE(ctx().Sync().ok());
}

INSTANTIATE_TEST_SUITE_P(Devices, CollectiveGradTest, ::testing::Values("cpu", "sim:0"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "cpu" ? "cpu" : "sim_0";
                         });

// Eager autograd runs a node's grad ops in the scope its forward op ran in, or else in the
// caller's scope: Backward inside a StreamScope through an all_reduce still runs the
// gradient's all_reduce on the ccl stream (a scope never moves a collective).
TEST(CollectiveGradScopeTest, BackwardInsideAStreamScopeThroughAllReduce) {
  eager::Context& ctx = GradContext();
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  const Device sim0 = Dev("sim:0");
  Tensor x = ctx.FromVector<float>(Values<float>(rank, 4, 210), Shape({4}), sim0).value();
  ASSERT_TRUE(autograd::SetRequiresGrad(x).ok());
  Tensor loss = fn::ReduceSum(eager::AllReduce(x).value()).value();
  {
    eager::StreamScope side(StreamKey{sim0, StreamType::kCompute, 1});
    ASSERT_TRUE(autograd::Backward(loss).ok());
  }
  absl::StatusOr<Vec> dx = autograd::GradOf(x).ToVector<float>();
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_EQ(Diff(*dx, Vec(4, static_cast<float>(size))), "");
  EXPECT_TRUE(ctx.Sync().ok());
}

}  // namespace
}  // namespace sluice::ccltest::collective_grad_test
