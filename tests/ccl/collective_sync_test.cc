// Collectives interleaved with compute under the sync checker (vm/sync_checker.h): seeded
// random programs (the same on every rank) mix collectives on the ccl streams of sim:0,
// sim:1 and cpu with matmuls, adds and scales on those devices' compute streams 0 and 1,
// copies between devices, reads and drops. Sim devices run their work on their own stream
// threads with random delays. Every tensor is checked against a host model of every rank's
// values, and the checker must prove every access was ordered (no violation).
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/builder/functional.h"
#include "framework/eager/stream_scope.h"
#include "gtest/gtest.h"
#include "tests/ccl/ccl_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::ccltest::collective_sync_test {
namespace {

using eager::Tensor;

constexpr int64_t kDim = 4;
constexpr int64_t kElems = kDim * kDim;
// Values stay integers below 2^20 (the model re-creates a tensor that grows past it), so
// every op is exact in f32 and results are compared exactly.
constexpr float kLimit = float{1 << 20};

using Model = std::vector<std::vector<float>>;  // [rank][element]

struct Slot {
  Tensor t;
  Model v;
};

class Program {
 public:
  Program(eager::Context& ctx, uint32_t seed) : ctx_(ctx), rng_(seed) {
    rank_ = eager::WorldRank(ctx);
    size_ = eager::WorldSize(ctx);
    for (const char* name : {"cpu", "sim:0", "sim:1"}) devices_.push_back(Dev(name));
    pools_.resize(devices_.size());
    for (size_t d = 0; d < devices_.size(); ++d) {
      // A matrix of -1, 0 and 1 to multiply by, the same on every rank.
      std::vector<float> m(kElems);
      for (int64_t i = 0; i < kElems; ++i)
        m[i] = static_cast<float>(Mix(0, i, 900 + static_cast<int>(d)) % 3) - 1;
      matrices_.push_back({Put(m, devices_[d]), Model(size_, m)});
      for (int s = 0; s < kSlots; ++s) pools_[d].push_back(Fresh(devices_[d]));
    }
  }

  // `steps` random actions, then a check of every slot.
  void Run(int steps) {
    for (int step = 0; step < steps && !::testing::Test::HasFatalFailure(); ++step) {
      Step(step);
    }
    for (size_t d = 0; d < pools_.size(); ++d) {
      for (int s = 0; s < kSlots; ++s) Check(pools_[d][s], absl::StrCat("final slot ", d, "/", s));
    }
  }

 private:
  static constexpr int kSlots = 4;

  Tensor Put(const std::vector<float>& values, Device device) {
    return ctx_.FromVector<float>(values, Shape({kDim, kDim}), device).value();
  }

  Slot Fresh(Device device) {
    const int salt = next_salt_++;
    Slot slot;
    for (int r = 0; r < size_; ++r) slot.v.push_back(Values<float>(r, kElems, salt));
    slot.t = Put(slot.v[rank_], device);
    return slot;
  }

  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  void Check(const Slot& slot, const std::string& what) {
    absl::StatusOr<std::vector<float>> got = slot.t.ToVector<float>();
    ASSERT_TRUE(got.ok()) << what << ": " << got.status();
    EXPECT_EQ(Diff(*got, slot.v[rank_]), "") << what;
  }

  // Replaces `dst` with `value`, or with fresh values if the model grew past the limit.
  void Store(Slot& dst, Tensor value, Model model, Device device) {
    float largest = 0;
    for (const auto& per_rank : model) {
      for (float x : per_rank) largest = std::max(largest, std::abs(x));
    }
    dst = {std::move(value), std::move(model)};
    if (largest > kLimit) dst = Fresh(device);
  }

  // Puts this thread's ops on `device` on compute stream 0 or 1, at random.
  void EnterComputeScope(std::optional<eager::StreamScope>& scope, Device device) {
    const int index = Pick(2);
    if (index > 0) scope.emplace(StreamKey{device, StreamType::kCompute, index});
  }

  void Step(int step) {
    const int d = Pick(static_cast<int>(devices_.size()));
    const Device device = devices_[d];
    std::vector<Slot>& pool = pools_[d];
    Slot& a = pool[Pick(kSlots)];
    const Slot& b = pool[Pick(kSlots)];
    Slot& dst = pool[Pick(kSlots)];
    const int action = Pick(size_ > 1 ? 11 : 10);
    SCOPED_TRACE(absl::StrCat("step ", step, " action ", action, " on ", device.ToString()));
    Model model = a.v;
    switch (action) {
      case 0: {  // matmul by the device's matrix
        std::optional<eager::StreamScope> scope;
        EnterComputeScope(scope, device);
        absl::StatusOr<Tensor> y = fn::Matmul(a.t, matrices_[d].t);
        ASSERT_TRUE(y.ok()) << y.status();
        const std::vector<float>& m = matrices_[d].v[0];
        for (int r = 0; r < size_; ++r) {
          for (int64_t i = 0; i < kDim; ++i) {
            for (int64_t j = 0; j < kDim; ++j) {
              float sum = 0;
              for (int64_t k = 0; k < kDim; ++k) sum += a.v[r][i * kDim + k] * m[k * kDim + j];
              model[r][i * kDim + j] = sum;
            }
          }
        }
        Store(dst, *y, std::move(model), device);
        break;
      }
      case 1: {  // add
        std::optional<eager::StreamScope> scope;
        EnterComputeScope(scope, device);
        absl::StatusOr<Tensor> y = fn::Add(a.t, b.t);
        ASSERT_TRUE(y.ok()) << y.status();
        for (int r = 0; r < size_; ++r) {
          for (int64_t i = 0; i < kElems; ++i) model[r][i] += b.v[r][i];
        }
        Store(dst, *y, std::move(model), device);
        break;
      }
      case 2: {  // negate
        std::optional<eager::StreamScope> scope;
        EnterComputeScope(scope, device);
        absl::StatusOr<Tensor> y = fn::Scale(a.t, -1.0);
        ASSERT_TRUE(y.ok()) << y.status();
        for (auto& per_rank : model) {
          for (float& x : per_rank) x = -x;
        }
        Store(dst, *y, std::move(model), device);
        break;
      }
      case 3: {  // all_reduce with a random reduction (no mean: it would not stay exact)
        const ReduceOp op =
            std::vector<ReduceOp>{ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}[Pick(3)];
        absl::StatusOr<Tensor> y = eager::AllReduce(a.t, op);
        ASSERT_TRUE(y.ok()) << y.status();
        for (int64_t i = 0; i < kElems; ++i) {
          float acc = a.v[0][i];
          for (int r = 1; r < size_; ++r) acc = Combine(op, acc, a.v[r][i]);
          for (int r = 0; r < size_; ++r) model[r][i] = acc;
        }
        Store(dst, *y, std::move(model), device);
        break;
      }
      case 4: {  // a bucket of two, written back to both slots read
        Slot& c = pool[Pick(kSlots)];
        absl::StatusOr<std::vector<Tensor>> ys = eager::AllReduce(std::vector<Tensor>{a.t, c.t});
        ASSERT_TRUE(ys.ok()) << ys.status();
        Model mc = c.v;
        for (int64_t i = 0; i < kElems; ++i) {
          float sa = 0, sc = 0;
          for (int r = 0; r < size_; ++r) {
            sa += a.v[r][i];
            sc += c.v[r][i];
          }
          for (int r = 0; r < size_; ++r) {
            model[r][i] = sa;
            mc[r][i] = sc;
          }
        }
        Store(a, (*ys)[0], std::move(model), device);
        Store(c, (*ys)[1], std::move(mc), device);
        break;
      }
      case 5: {  // broadcast
        const int root = Pick(size_);
        absl::StatusOr<Tensor> y = eager::Broadcast(a.t, root);
        ASSERT_TRUE(y.ok()) << y.status();
        for (int r = 0; r < size_; ++r) model[r] = a.v[root];
        Store(dst, *y, std::move(model), device);
        break;
      }
      case 6: {  // reduce(sum) to a root, zeros elsewhere
        const int root = Pick(size_);
        absl::StatusOr<Tensor> y = eager::Reduce(a.t, root);
        ASSERT_TRUE(y.ok()) << y.status();
        for (int64_t i = 0; i < kElems; ++i) {
          float sum = 0;
          for (int r = 0; r < size_; ++r) sum += a.v[r][i];
          for (int r = 0; r < size_; ++r) model[r][i] = r == root ? sum : 0.0f;
        }
        Store(dst, *y, std::move(model), device);
        break;
      }
      case 7: {  // all_gather then reduce_scatter(sum): every rank gets size x its own
        absl::StatusOr<Tensor> gathered = eager::AllGather(a.t);
        ASSERT_TRUE(gathered.ok()) << gathered.status();
        std::optional<Tensor> between;
        if (Pick(2) == 0) {  // sometimes touch the gathered tensor on a compute stream
          std::optional<eager::StreamScope> scope;
          EnterComputeScope(scope, device);
          between = fn::Scale(*gathered, 1.0).value();
        }
        absl::StatusOr<Tensor> y = eager::ReduceScatter(between ? *between : *gathered);
        ASSERT_TRUE(y.ok()) << y.status();
        for (auto& per_rank : model) {
          for (float& x : per_rank) x *= static_cast<float>(size_);
        }
        Store(dst, *y, std::move(model), device);
        break;
      }
      case 8: {  // a copy to another device
        const int d2 = Pick(static_cast<int>(devices_.size()));
        absl::StatusOr<Tensor> y = a.t.To(devices_[d2]);
        ASSERT_TRUE(y.ok()) << y.status();
        Store(pools_[d2][Pick(kSlots)], *y, std::move(model), devices_[d2]);
        break;
      }
      case 9: {  // read a slot, or start it afresh
        if (Pick(2) == 0) {
          Check(a, absl::StrCat("slot read at step ", step));
        } else {
          a = Fresh(device);
        }
        break;
      }
      case 10: {  // a ring of transfers: rank 0 sends first, the others receive first
        const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
        if (rank_ == 0) {
          ASSERT_TRUE(eager::Send(a.t, next).ok());
        }
        absl::StatusOr<Tensor> y =
            eager::Recv(ctx_, DataType::kF32, Shape({kDim, kDim}), prev, device);
        ASSERT_TRUE(y.ok()) << y.status();
        if (rank_ != 0) {
          ASSERT_TRUE(eager::Send(a.t, next).ok());
        }
        for (int r = 0; r < size_; ++r) model[r] = a.v[(r + size_ - 1) % size_];
        Store(dst, *y, std::move(model), device);
        break;
      }
    }
  }

  eager::Context& ctx_;
  std::mt19937 rng_;
  int rank_ = 0, size_ = 1;
  int next_salt_ = 0;
  std::vector<Device> devices_;
  std::vector<Slot> matrices_;
  std::vector<std::vector<Slot>> pools_;
};

class CollectiveSyncTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(CollectiveSyncTest, RandomInterleavingsAreOrderedAndCorrect) {
  eager::Context& ctx = CheckedContext();
  ASSERT_NE(ctx.vm()->sync_checker(), nullptr);
  {
    Program program(ctx, GetParam());
    program.Run(300);
  }
  const absl::Status synced = ctx.Sync();
  EXPECT_TRUE(synced.ok()) << synced;
  EXPECT_EQ(ctx.vm()->sync_checker()->violation_count(), 0) << ctx.vm()->sync_checker()->status();
}

INSTANTIATE_TEST_SUITE_P(Seeds, CollectiveSyncTest,
                         ::testing::Values(1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u));

// A fixed pattern on both sim devices at once: compute on compute:1 produces what the
// collective on the ccl stream reads, compute on compute:0 reads its result, and the input
// is overwritten (a new tensor in its place) while the collective may still be reading it.
TEST(CollectiveSyncPatternTest, ProducerCollectiveConsumerOnEachSimDevice) {
  eager::Context& ctx = CheckedContext();
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  for (int round = 0; round < 20; ++round) {
    std::vector<Tensor> outs;
    for (const char* name : {"sim:0", "sim:1"}) {
      const Device device = Dev(name);
      Tensor x = MakeTensor(ctx, DataType::kF32, Values<float>(rank, kElems, round),
                            Shape({kDim, kDim}), device)
                     .value();
      Tensor produced;
      {
        eager::StreamScope side(StreamKey{device, StreamType::kCompute, 1});
        produced = fn::Add(x, x).value();  // 2x
      }
      Tensor reduced = eager::AllReduce(produced).value();
      produced = fn::Scale(x, 3.0).value();  // the old 2x is released behind the reduce
      outs.push_back(fn::Add(reduced, produced).value());
    }
    const std::vector<float> sum = Reduction<float>(ReduceOp::kSum, size, kElems, round);
    std::vector<float> want = Values<float>(rank, kElems, round);
    for (int64_t i = 0; i < kElems; ++i) want[i] = 2 * sum[i] + 3 * want[i];
    for (const Tensor& out : outs) EXPECT_EQ(Diff(out.ToVector<float>().value(), want), "");
  }
  EXPECT_TRUE(ctx.Sync().ok());
  EXPECT_EQ(ctx.vm()->sync_checker()->violation_count(), 0) << ctx.vm()->sync_checker()->status();
}

// A collective called inside a StreamScope stays on its device's ccl stream (the scope
// moves compute only; framework/eager/collectives.h).
TEST(CollectiveSyncScopeTest, ACollectiveInsideAStreamScopeRunsOnTheCclStream) {
  eager::Context& ctx = CheckedContext();
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  const Device sim0 = Dev("sim:0");
  Tensor x = MakeTensor(ctx, DataType::kF32, Values<float>(rank, 4, 300), Shape({4}), sim0).value();
  absl::StatusOr<Tensor> y;
  {
    eager::StreamScope side(StreamKey{sim0, StreamType::kCompute, 1});
    Tensor doubled = fn::Add(x, x).value();  // on compute:1, as the scope says
    y = eager::AllReduce(doubled);           // on sim:0/ccl regardless
  }
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<std::vector<float>> got = y->ToVector<float>();
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<float> want = Reduction<float>(ReduceOp::kSum, size, 4, 300);
  for (float& v : want) v *= 2;
  EXPECT_EQ(Diff(*got, want), "");
  EXPECT_TRUE(ctx.Sync().ok());
  EXPECT_EQ(ctx.vm()->sync_checker()->violation_count(), 0);
}

}  // namespace
}  // namespace sluice::ccltest::collective_sync_test
