// The eager front end: one computation on cpu, on sim, and split across cpu and two sim
// devices gives the same numbers; a scripted sequence emits exactly the syncs soft sync
// requires; dropping the last handle releases storage without blocking; bad input comes
// back as a Status naming the op, with nothing enqueued.
#include <chrono>
#include <cmath>
#include <thread>

#include "core/status.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/training/eager_optimizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/sync_checker.h"

namespace sluice::eager {
namespace {

using ::testing::HasSubstr;

const Device kCpu(DeviceType::kCpu, 0);
const Device kSim0(DeviceType::kSim, 0);
const Device kSim1(DeviceType::kSim, 1);

Context NewContext(bool check_sync = true) {
  ContextOptions options;
  options.runtime.num_sim_devices = 2;
  options.runtime.enable_cuda = false;
  options.vm.check_sync = check_sync;
  return Context::Create(options).value();
}

std::vector<float> Values(int64_t n, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * static_cast<float>(i) + 0.3f);
  return v;
}

// A small MLP forward pass plus a loss, each layer on a chosen device:
// h = relu(x @ w1 + b1); y = softmax(h @ w2); loss = mean(xent(y, label)).
struct MlpDevices {
  Device input, layer1, layer2;
};

absl::StatusOr<std::vector<float>> RunMlp(Context& ctx, MlpDevices where) {
  const auto x = ctx.FromVector(Values(4 * 8, 1.0f), Shape({4, 8}), where.input);
  const auto w1 = ctx.FromVector(Values(8 * 16, 0.3f), Shape({8, 16}), where.layer1);
  const auto b1 = ctx.FromVector(Values(16, 0.1f), Shape({16}), where.layer1);
  const auto w2 = ctx.FromVector(Values(16 * 5, 0.2f), Shape({16, 5}), where.layer2);
  const auto label = ctx.FromVector(std::vector<int64_t>{0, 3, 4, 1}, Shape({4, 1}), where.layer2);
  if (!x.ok() || !w1.ok() || !b1.ok() || !w2.ok() || !label.ok()) {
    return absl::InternalError("upload failed");
  }
  SLUICE_ASSIGN_OR_RETURN(Tensor x1, x->To(where.layer1));
  SLUICE_ASSIGN_OR_RETURN(Tensor h0, fn::Matmul(x1, *w1));
  SLUICE_ASSIGN_OR_RETURN(Tensor h1, fn::Add(h0, *b1));
  SLUICE_ASSIGN_OR_RETURN(Tensor h, fn::Relu(h1));
  SLUICE_ASSIGN_OR_RETURN(Tensor h2, h.To(where.layer2));
  SLUICE_ASSIGN_OR_RETURN(Tensor logits, fn::Matmul(h2, *w2));
  SLUICE_ASSIGN_OR_RETURN(auto xent, fn::SoftmaxWithCrossEntropy(logits, *label));
  SLUICE_ASSIGN_OR_RETURN(Tensor loss, fn::ReduceMean(xent.second));
  SLUICE_ASSIGN_OR_RETURN(Tensor probs, xent.first.To(kCpu));
  SLUICE_ASSIGN_OR_RETURN(std::vector<float> out, probs.ToVector<float>());
  SLUICE_ASSIGN_OR_RETURN(std::vector<float> l, loss.ToVector<float>());
  out.insert(out.end(), l.begin(), l.end());
  return out;
}

TEST(EagerTest, SameNumbersOnCpuSimAndSplitAcrossDevices) {
  Context ctx = NewContext();
  absl::StatusOr<std::vector<float>> on_cpu = RunMlp(ctx, {kCpu, kCpu, kCpu});
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  ASSERT_EQ(on_cpu->size(), 4u * 5 + 1);
  for (float v : *on_cpu) EXPECT_TRUE(std::isfinite(v));
  absl::StatusOr<std::vector<float>> on_sim = RunMlp(ctx, {kSim0, kSim0, kSim0});
  ASSERT_TRUE(on_sim.ok()) << on_sim.status();
  absl::StatusOr<std::vector<float>> split = RunMlp(ctx, {kCpu, kSim0, kSim1});
  ASSERT_TRUE(split.ok()) << split.status();
  // Same kernels, same order of arithmetic: bit-identical.
  EXPECT_EQ(*on_cpu, *on_sim);
  EXPECT_EQ(*on_cpu, *split);
  ASSERT_TRUE(ctx.Sync().ok());
  EXPECT_EQ(ctx.vm()->sync_checker()->violation_count(), 0)
      << ctx.vm()->sync_checker()->status().message();
}

TEST(EagerTest, ScriptedSequenceEmitsExactlyTheRequiredSyncs) {
  Context ctx = NewContext();
  // Uploads to sim:0 are copies on its h2d stream (the host cannot address its memory);
  // a first op on the compute stream makes a and b compute-stream tensors.
  Tensor a = fn::Scale(ctx.FromVector(Values(6, 1.0f), Shape({6}), kSim0).value(), 1.0).value();
  Tensor b = fn::Scale(ctx.FromVector(Values(6, 2.0f), Shape({6}), kSim0).value(), 1.0).value();
  const vm::VmStats s0 = ctx.vm()->stats();

  // 1. Same stream: no sync.
  Tensor c = fn::Add(a, b).value();
  // 2. Copy to cpu on sim:0's d2h stream: c was last used on sim:0/compute -> StreamWait.
  //    The output is a fresh cpu tensor last used on the cpu stream -> RecordEvent (cpu).
  Tensor c_host = c.To(kCpu).value();
  const vm::VmStats s1 = ctx.vm()->stats();
  EXPECT_EQ(s1.op_calls - s0.op_calls, 2);
  EXPECT_EQ(s1.stream_waits - s0.stream_waits, 1);
  EXPECT_EQ(s1.record_events - s0.record_events, 1);

  // 3. Using c again on sim:0/compute: c's last use is sim:0/d2h -> one StreamWait.
  Tensor d = fn::Mul(c, a).value();
  // 4. Another op on the same stream over the same tensors: nothing.
  Tensor e = fn::Sub(d, c).value();
  const vm::VmStats s2 = ctx.vm()->stats();
  EXPECT_EQ(s2.op_calls - s1.op_calls, 2);
  EXPECT_EQ(s2.stream_waits - s1.stream_waits, 1);
  EXPECT_EQ(s2.record_events - s1.record_events, 0);

  // 5. A cpu op reading the copied tensor: its last use (sim:0/d2h) is another device ->
  //    one RecordEvent.
  Tensor f = fn::Scale(c_host, 2.0).value();
  const vm::VmStats s3 = ctx.vm()->stats();
  EXPECT_EQ(s3.record_events - s2.record_events, 1);
  EXPECT_EQ(s3.stream_waits - s2.stream_waits, 0);

  std::vector<float> got = f.ToVector<float>().value();
  const std::vector<float> av = Values(6, 1.0f), bv = Values(6, 2.0f);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(got[i], 2.0f * (av[i] + bv[i]));
  std::vector<float> ev = e.ToVector<float>().value();
  for (int i = 0; i < 6; ++i) {
    const float cv = av[i] + bv[i];
    EXPECT_FLOAT_EQ(ev[i], cv * av[i] - cv);
  }
  ASSERT_TRUE(ctx.Sync().ok());
  EXPECT_EQ(ctx.vm()->sync_checker()->violation_count(), 0);
}

TEST(EagerTest, DroppingTheLastHandleReleasesStorage) {
  Context ctx = NewContext();
  Tensor x = ctx.FromVector(Values(1024, 1.0f), Shape({1024}), kSim0).value();
  const int64_t releases = ctx.vm()->stats().releases;
  {
    Tensor y = fn::Scale(x, 3.0).value();
    Tensor y2 = y;  // a second handle to the same tensor
    (void)y2;
  }
  EXPECT_EQ(ctx.vm()->stats().releases, releases + 1);
  x = Tensor();
  EXPECT_EQ(ctx.vm()->stats().releases, releases + 2);
  ASSERT_TRUE(ctx.Sync().ok());
}

TEST(EagerTest, TensorsOutliveTheirContextHandle) {
  Tensor t;
  {
    Context ctx = NewContext();
    t = fn::FillConstant(ctx, Shape({3}), 1.5, DataType::kF32, kSim1).value();
  }
  EXPECT_EQ(t.ToVector<float>().value(), std::vector<float>({1.5f, 1.5f, 1.5f}));
  Tensor u = fn::Scale(t, 2.0).value();
  EXPECT_EQ(u.ToVector<float>().value(), std::vector<float>({3.0f, 3.0f, 3.0f}));
}

TEST(EagerTest, BadInputNamesTheOpAndEnqueuesNothing) {
  Context ctx = NewContext();
  Tensor a = ctx.FromVector(Values(6, 1.0f), Shape({2, 3}), kCpu).value();
  Tensor b = ctx.FromVector(Values(6, 1.0f), Shape({3, 2}), kCpu).value();
  Tensor s = ctx.FromVector(Values(6, 1.0f), Shape({2, 3}), kSim0).value();
  Tensor i = ctx.FromVector(std::vector<int32_t>(6, 1), Shape({2, 3}), kCpu).value();
  const int64_t before = ctx.vm()->stats().instructions;

  EXPECT_THAT(fn::Add(a, b).status().message(), HasSubstr("add"));
  EXPECT_THAT(fn::Add(a, s).status().message(), HasSubstr("sim:0"));
  EXPECT_THAT(fn::Add(a, i).status().message(), HasSubstr("i32"));
  EXPECT_THAT(fn::Matmul(a, a).status().message(), HasSubstr("matmul"));
  EXPECT_THAT(ctx.Call("frobnicate", {{a}}).status().message(), HasSubstr("frobnicate"));
  EXPECT_THAT(
      ctx.Call("scale", {{a}}, vm::AttrMap().Set("scale", std::string("x"))).status().message(),
      HasSubstr("'scale' must be float"));
  EXPECT_THAT(fn::Add(a, Tensor()).status().message(), HasSubstr("empty Tensor"));
  EXPECT_THAT(a.To(Device(DeviceType::kSim, 7)).status().message(), HasSubstr("sim:7"));
  EXPECT_THAT(ctx.FromVector(Values(5, 1.0f), Shape({2, 3}), kCpu).status().message(),
              HasSubstr("got 20"));
  EXPECT_EQ(ctx.vm()->stats().instructions, before);

  // Still usable.
  EXPECT_EQ(fn::Add(a, a).value().ToVector<float>().value().size(), 6u);
  ASSERT_TRUE(ctx.Sync().ok());
}

// CallSingle (the functional API's path) computes what Call does, and refuses ops with
// another number of outputs and foreign or empty tensors before enqueueing anything.
TEST(EagerTest, CallSingleMatchesCallAndRefusesBeforeEnqueueing) {
  Context ctx = NewContext();
  Context other = NewContext();
  Tensor a = ctx.FromVector(std::vector<float>{1, 2, 3, 4}, Shape({2, 2}), kCpu).value();
  Tensor b = ctx.FromVector(std::vector<float>{5, 6, 7, 8}, Shape({2, 2}), kCpu).value();
  Tensor foreign = other.FromVector(std::vector<float>{1, 1, 1, 1}, Shape({2, 2}), kCpu).value();
  EXPECT_EQ(ctx.CallSingle("mul", {a, b}).value().ToVector<float>().value(),
            ctx.Call("mul", {{a}, {b}}).value()[0].ToVector<float>().value());
  const int64_t before = ctx.vm()->stats().instructions;
  absl::StatusOr<Tensor> two = ctx.CallSingle("split", {a}, vm::AttrMap().Set("num", int64_t{2}));
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(two.status().message(), HasSubstr("'split' produces 2 outputs"));
  EXPECT_THAT(ctx.CallSingle("add", {a, foreign}).status().message(),
              HasSubstr("another eager context"));
  EXPECT_THAT(ctx.CallSingle("add", {a, Tensor()}).status().message(), HasSubstr("input 1"));
  EXPECT_EQ(ctx.vm()->stats().instructions, before);
  ASSERT_TRUE(ctx.Sync().ok());
}

TEST(EagerTest, KernelErrorSurfacesAtTheReadAndTheContextRecovers) {
  Context ctx = NewContext();
  Tensor logits = ctx.FromVector(Values(6, 1.0f), Shape({2, 3}), kSim0).value();
  Tensor bad_label = ctx.FromVector(std::vector<int64_t>{0, 9}, Shape({2, 1}), kSim0).value();
  auto xent = fn::SoftmaxWithCrossEntropy(logits, bad_label);
  ASSERT_TRUE(xent.ok()) << xent.status();  // the label is checked when the kernel runs
  absl::StatusOr<std::vector<float>> loss = xent->second.ToVector<float>();
  EXPECT_FALSE(loss.ok());
  EXPECT_FALSE(ctx.Sync().ok());
  EXPECT_TRUE(ctx.Sync().ok());
  Tensor fine = fn::Scale(logits, 1.0).value();
  EXPECT_EQ(fine.ToVector<float>().value(), Values(6, 1.0f));
}

TEST(EagerTest, RandomOpsUseTheContextSeedSequence) {
  Context ctx = NewContext();
  Tensor a = fn::UniformRandom(ctx, Shape({64})).value();
  Tensor b = fn::UniformRandom(ctx, Shape({64})).value();
  EXPECT_NE(a.ToVector<float>().value(), b.ToVector<float>().value());
  Tensor c = fn::GaussianRandom(ctx, Shape({64}), 0, 1, /*seed=*/42, DataType::kF32, kSim1).value();
  Tensor d = fn::GaussianRandom(ctx, Shape({64}), 0, 1, /*seed=*/42, DataType::kF32, kCpu).value();
  EXPECT_EQ(c.ToVector<float>().value(), d.ToVector<float>().value());
  // Two contexts with the same seed draw the same sequence.
  Context other = NewContext();
  Tensor a2 = fn::UniformRandom(other, Shape({64})).value();
  EXPECT_EQ(a.ToVector<float>().value(), a2.ToVector<float>().value());
}

TEST(EagerTest, OpsFromSeveralThreads) {
  Context ctx = NewContext();
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> results(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Device device = t % 2 == 0 ? kSim0 : kCpu;
      Tensor x = fn::FillConstant(ctx, Shape({8}), t, DataType::kF32, device).value();
      for (int i = 0; i < 50; ++i) x = fn::Scale(x, 1.0, 1.0).value();
      results[t] = x.ToVector<float>().value();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(results[t], std::vector<float>(8, t + 50.0f));
  ASSERT_TRUE(ctx.Sync().ok());
  EXPECT_EQ(ctx.vm()->sync_checker()->violation_count(), 0);
}

TEST(EagerTest, SgdStepUpdatesInPlace) {
  Context ctx = NewContext();
  Tensor p = ctx.FromVector(std::vector<float>{1, 2, 3}, Shape({3}), kSim0).value();
  Tensor g = ctx.FromVector(std::vector<float>{0.5, 0.5, -1}, Shape({3}), kSim0).value();
  Tensor lr = ctx.FromVector(std::vector<float>{0.1f}, Shape({1}), kSim0).value();
  ASSERT_TRUE(SgdStep(p, g, lr).ok());
  ASSERT_TRUE(SgdStep(p, g, lr).ok());
  const std::vector<float> got = p.ToVector<float>().value();
  EXPECT_FLOAT_EQ(got[0], 0.9f);
  EXPECT_FLOAT_EQ(got[1], 1.9f);
  EXPECT_FLOAT_EQ(got[2], 3.2f);
}

}  // namespace
}  // namespace sluice::eager

namespace sluice::eager {
namespace {

// Tensor::blob() keeps the tensor's storage alive: with the last handle gone, the Release
// waits for the last blob reference too; then the blob is released (and parked).
TEST(EagerTest, BlobReferenceKeepsTheTensorsStorage) {
  Context ctx = NewContext();
  Tensor one = ctx.FromVector(std::vector<float>{1.0f}, Shape({1}), Device()).value();
  vm::BlobRef ref;
  {
    Tensor t = fn::Add(one, one).value();
    ref = t.blob();
  }
  ASSERT_TRUE(ctx.Sync().ok());
  ASSERT_NE(ref->storage(), nullptr);
  EXPECT_FALSE(ref->poisoned());
  const int64_t parked = ctx.vm()->stats().parked_blobs;
  ref.reset();
  ASSERT_TRUE(ctx.Sync().ok());
  // The blob dies once its Release retired (the scheduler recycles runs lazily): wait.
  bool released = false;
  for (int i = 0; i < 10000 && !released; ++i) {
    released = ctx.vm()->stats().parked_blobs > parked;
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(released) << ctx.vm()->stats().ToString();
}

}  // namespace
}  // namespace sluice::eager
