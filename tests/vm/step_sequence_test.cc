// StepSequence, the one step-sequence instruction of eager fusion and static lowering.
// Proven here:
//  - the union operands (reads of blobs no earlier step wrote; every blob written or
//    released) match a set-based reference on random step lists, for a static sequence
//    (computed at Close) and for an eager run over the same steps (computed as steps are
//    added) — one computation serves both;
//  - static sequences built interleaved over shared blobs (as lane lowering builds its
//    lanes) still get exact unions: Close notes each sequence in one pass of its own;
//  - announcements added out of step order (two sequences waiting for one source, the later
//    step first) are all honoured, with the sync checker on and finding nothing, and with
//    one wait dropped the checker reports the race (the check can fail);
//  - a shared release (ReleaseCount) frees the storage once per run, at its last drop,
//    whichever lane drops last; the checker takes every drop as ordered before the last
//    (no report), and reports a lane that touches the blob after its own drop while
//    another lane's drop frees it.
#include "vm/step_sequence.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/release_count.h"
#include "vm/sync_checker.h"

namespace sluice::vm::step_sequence_test {
namespace {

using testing::VmHarness;

class NoopKernel final : public OpKernel {
 public:
  absl::string_view name() const override { return "noop"; }
  absl::Status Launch(KernelContext&) const override { return absl::OkStatus(); }
};

struct RandomStep {
  bool release = false;
  std::vector<int> inputs;
  std::vector<int> outputs;  // a release: its one blob
};

// Random calls (0-3 inputs, 0-2 outputs, repeats allowed) and releases over `blobs` blobs.
std::vector<RandomStep> RandomSteps(std::mt19937& rng, int blobs, int steps) {
  std::uniform_int_distribution<int> blob(0, blobs - 1);
  std::uniform_int_distribution<int> count(0, 3);
  std::vector<RandomStep> out(steps);
  for (RandomStep& step : out) {
    step.release = count(rng) == 0 && count(rng) == 0;
    if (step.release) {
      step.outputs.push_back(blob(rng));
      continue;
    }
    for (int i = count(rng); i > 0; --i) step.inputs.push_back(blob(rng));
    for (int i = count(rng) % 3; i > 0; --i) step.outputs.push_back(blob(rng));
  }
  return out;
}

// The reference: ordered sets, as the definition reads.
void ReferenceUnion(const std::vector<RandomStep>& steps, std::vector<int>* inputs,
                    std::vector<int>* outputs) {
  std::set<int> read, written;
  for (const RandomStep& step : steps) {
    for (int b : step.inputs) {
      if (written.count(b) == 0 && read.insert(b).second) inputs->push_back(b);
    }
    for (int b : step.outputs) {
      if (written.insert(b).second) outputs->push_back(b);
    }
  }
}

std::vector<int> Ids(const BlobPtrs& blobs) {
  std::vector<int> ids;
  for (const Blob* blob : blobs) ids.push_back(static_cast<int>(blob->id()));
  return ids;
}

class Blobs {
 public:
  explicit Blobs(int n) {
    for (int i = 0; i < n; ++i) {
      blobs_.push_back(
          std::make_unique<Blob>(i, Device(DeviceType::kCpu, 0), DataType::kF32, Shape({1}), ""));
    }
  }
  Blob* operator[](int i) const { return blobs_[i].get(); }
  BlobPtrs Of(const std::vector<int>& ids) const {
    BlobPtrs out;
    for (int i : ids) out.push_back(blobs_[i].get());
    return out;
  }

 private:
  std::vector<std::unique_ptr<Blob>> blobs_;
};

void Append(StepSequence& sequence, const Blobs& blobs, const RandomStep& step,
            const OpKernel& kernel) {
  if (step.release) {
    sequence.AddRelease(blobs[step.outputs.front()]);
  } else {
    sequence.AddCall(kernel, blobs.Of(step.inputs), blobs.Of(step.outputs), nullptr);
  }
}

TEST(StepSequenceUnionTest, StaticAndEagerMatchTheReferenceOnRandomSteps) {
  const NoopKernel kernel;
  for (int seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const int n_blobs = 2 + seed % 7;
    const Blobs blobs(n_blobs);
    std::vector<RandomStep> steps = RandomSteps(rng, n_blobs, 1 + seed % 23);
    steps.front().release = false;  // an eager head below is a call (either kind works)
    if (steps.front().outputs.size() > 2) steps.front().outputs.resize(2);
    std::vector<int> want_in, want_out;
    ReferenceUnion(steps, &want_in, &want_out);

    StepSequence sequence;
    for (const RandomStep& step : steps) Append(sequence, blobs, step, kernel);
    sequence.Close();
    EXPECT_EQ(Ids(sequence.union_inputs()), want_in);
    EXPECT_EQ(Ids(sequence.union_outputs()), want_out);
    EXPECT_EQ(sequence.steps(), static_cast<int>(steps.size()));

    Instruction head;
    head.kind = InstructionKind::kOpCall;
    head.kernel = &kernel;
    head.inputs = blobs.Of(steps.front().inputs);
    head.outputs = blobs.Of(steps.front().outputs);
    head.fused = FusedRun(new StepSequence());
    head.fused->Begin(&head);
    for (size_t i = 1; i < steps.size(); ++i) Append(*head.fused, blobs, steps[i], kernel);
    head.fused->Close();
    EXPECT_EQ(Ids(head.inputs), want_in);
    EXPECT_EQ(Ids(head.outputs), want_out);
    EXPECT_EQ(head.kernel, head.fused.get());
    EXPECT_EQ(head.fused->steps(), static_cast<int>(steps.size()));
  }
}

TEST(StepSequenceUnionTest, InterleavedStaticBuildsGetExactUnions) {
  const NoopKernel kernel;
  for (int seed = 0; seed < 100; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(1000 + seed);
    const Blobs blobs(5);
    std::vector<RandomStep> a = RandomSteps(rng, 5, 12);
    std::vector<RandomStep> b = RandomSteps(rng, 5, 12);
    StepSequence sa, sb;
    for (size_t i = 0; i < a.size(); ++i) {  // one step each, in turn, over the same blobs
      Append(sa, blobs, a[i], kernel);
      Append(sb, blobs, b[i], kernel);
    }
    sa.Close();
    sb.Close();
    std::vector<int> want_in, want_out;
    ReferenceUnion(a, &want_in, &want_out);
    EXPECT_EQ(Ids(sa.union_inputs()), want_in);
    EXPECT_EQ(Ids(sa.union_outputs()), want_out);
    want_in.clear();
    want_out.clear();
    ReferenceUnion(b, &want_in, &want_out);
    EXPECT_EQ(Ids(sb.union_inputs()), want_in);
    EXPECT_EQ(Ids(sb.union_outputs()), want_out);
  }
}

// Lane S (cpu) computes s1 = 1 + 1 and s2 = s1 + 1, then s3 = s2 + 1. Lane P
// (cpu/compute:1) needs s2 (waits for S's first 2 steps), lane Q (cpu/compute:2) needs s1
// (waits for S's first step): the waits are added P first, so S's announcements arrive
// out of order (2, then 1). With `drop_q_wait`, Q reads s1 unordered (declared accesses
// only: the ops touch no bytes).
struct OutOfOrderRun {
  float p = 0, q = 0;
  int64_t violations = -1;
};

OutOfOrderRun RunOutOfOrderAnnouncements(bool drop_q_wait) {
  VmOptions options;
  options.check_sync = true;
  std::atomic<uint32_t> run{0};
  StepSequence s, p, q;
  for (StepSequence* lane : {&s, &p, &q}) lane->set_run_counter(&run);
  VmHarness h(options);
  BlobRef one = h.NewF32("cpu", 4, "one");
  BlobRef s1 = h.NewF32("cpu", 4, "s1");
  BlobRef s2 = h.NewF32("cpu", 4, "s2");
  BlobRef s3 = h.NewF32("cpu", 4, "s3");
  BlobRef pr = h.NewF32("cpu", 4, "p");
  BlobRef qr = h.NewF32("cpu", 4, "q");
  EXPECT_TRUE(h.Write(one, std::vector<float>(4, 1)).ok());
  EXPECT_TRUE(h.vm->Sync().ok());
  // With the wait dropped Q's read races S's write for real: declared accesses only then
  // (the checker judges them; no bytes race under ThreadSanitizer).
  const NoopKernel declare;
  const OpKernel& add = drop_q_wait ? declare : h.K("add");
  s.AddCall(add, {one.get(), one.get()}, {s1.get()}, nullptr);
  s.AddCall(add, {s1.get(), one.get()}, {s2.get()}, nullptr);
  s.AddCall(add, {s2.get(), one.get()}, {s3.get()}, nullptr);
  p.AddWait(&s, 2);
  p.AddCall(add, {s2.get(), s2.get()}, {pr.get()}, nullptr);
  if (!drop_q_wait) q.AddWait(&s, 1);
  q.AddCall(add, {s1.get(), one.get()}, {qr.get()}, nullptr);
  for (StepSequence* lane : {&s, &p, &q}) lane->Close();
  PrecomputedBatch batch;
  batch.AddOpCall(p, {}, {}, nullptr, h.S("cpu/compute:1"));
  batch.AddOpCall(q, {}, {}, nullptr, h.S("cpu/compute:2"));
  batch.AddOpCall(s, {}, {}, nullptr, h.S("cpu"));
  OutOfOrderRun out;
  for (int r = 0; r < 3; ++r) {
    run.fetch_add(1, std::memory_order_relaxed);
    EXPECT_TRUE(batch.Submit(h.vm.get()).ok());
    EXPECT_TRUE(h.vm->Sync().ok());
  }
  absl::StatusOr<std::vector<float>> got_p = h.Read(pr);
  absl::StatusOr<std::vector<float>> got_q = h.Read(qr);
  if (got_p.ok()) out.p = got_p->front();
  if (got_q.ok()) out.q = got_q->front();
  out.violations = h.vm->sync_checker()->violation_count();
  EXPECT_TRUE(h.vm->Shutdown().ok());
  return out;
}

TEST(StepSequenceWaitTest, AnnouncementsAddedOutOfOrderAreAllHonoured) {
  const OutOfOrderRun run = RunOutOfOrderAnnouncements(/*drop_q_wait=*/false);
  EXPECT_EQ(run.p, 6.0f);  // s2 = 3
  EXPECT_EQ(run.q, 3.0f);  // s1 = 2
  EXPECT_EQ(run.violations, 0);
}

TEST(StepSequenceWaitTest, TheCheckerReportsTheDroppedWait) {
  const OutOfOrderRun run = RunOutOfOrderAnnouncements(/*drop_q_wait=*/true);
  EXPECT_GE(run.violations, 1);
}

TEST(ReleaseCountTest, TheLastDropOfEachRunFrees) {
  ReleaseCount count(3);
  for (int run = 0; run < 4; ++run) {
    EXPECT_FALSE(count.Drop());
    EXPECT_FALSE(count.Drop());
    EXPECT_TRUE(count.Drop()) << "run " << run;
  }
}

// Lane A writes x, then — after B's drop — drops x itself (the last drop: it frees). Lane B
// waits for A's write, reads x and drops it; with `touch_after_drop` B reads x once more
// after its drop, which A's freeing drop does not order. Declared accesses only (no bytes
// are touched), so the broken variant races in the checker's eyes alone.
int64_t RunSharedRelease(bool touch_after_drop, bool* freed) {
  VmOptions options;
  options.check_sync = true;
  std::atomic<uint32_t> run{0};
  NoopKernel declare;
  StepSequence a, b;
  a.set_run_counter(&run);
  b.set_run_counter(&run);
  ReleaseCount count(2);
  VmHarness h(options);
  BlobRef x = h.vm->NewLazyBlob(h.S("cpu"), DataType::kF32, Shape({4}), "x").value();
  a.AddCall(declare, {}, {x.get()}, nullptr);
  b.AddWait(&a, 1);
  b.AddCall(declare, {x.get()}, {}, nullptr);
  b.AddSharedRelease(x.get(), &count);
  if (touch_after_drop) b.AddCall(declare, {x.get()}, {}, nullptr);
  a.AddWait(&b, 2);
  a.AddSharedRelease(x.get(), &count);
  a.Close();
  b.Close();
  PrecomputedBatch batch;
  batch.AddOpCall(b, {}, {}, nullptr, h.S("cpu/compute:1"));
  batch.AddOpCall(a, {}, {}, nullptr, h.S("cpu"));
  *freed = true;
  for (int r = 0; r < 3; ++r) {
    run.fetch_add(1, std::memory_order_relaxed);
    EXPECT_TRUE(batch.Submit(h.vm.get()).ok());
    EXPECT_TRUE(h.vm->Sync().ok());
    *freed = *freed && x->raw_storage() == nullptr;  // the lazy blob's storage is gone
  }
  const int64_t violations = h.vm->sync_checker()->violation_count();
  EXPECT_TRUE(h.vm->Shutdown().ok());
  return violations;
}

TEST(ReleaseCountTest, EveryDropIsOrderedBeforeTheLast) {
  bool freed = false;
  EXPECT_EQ(RunSharedRelease(/*touch_after_drop=*/false, &freed), 0);
  EXPECT_TRUE(freed);
}

TEST(ReleaseCountTest, TheCheckerReportsATouchAfterTheLanesOwnDrop) {
  bool freed = false;
  EXPECT_GE(RunSharedRelease(/*touch_after_drop=*/true, &freed), 1);
}

}  // namespace
}  // namespace sluice::vm::step_sequence_test
