// Interpreter::Build on hand-written programs: the lowering statistics (fusion, stream
// waits, inserted copies, stream spreading, the GC plan), the measured peak memory of a run
// against the liveness bound the test computes, random programs spread over streams against
// a plain cpu run (under the sync checker), and every build error — named and leaving the
// scope as it was.
#include "framework/interpreter/interpreter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/stream_id.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/busy_core.h"
#include "tests/framework/program_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::framework::interpreter_test {
namespace {

using program_test::AddVar;
using program_test::Fill;
using program_test::kCpu;
using program_test::kSim;
using program_test::OnStream;
using program_test::Op;
using program_test::ScaleBy;
using program_test::Var;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Shape kSquare({4, 4});

std::vector<float> Ramp(int n) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = std::sin(0.7f * i) - 0.1f;
  return x;
}

class InterpreterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = program_test::NewContext(/*sim_devices=*/1, /*check_sync=*/true);
    ASSERT_NE(context_, nullptr);
    // The scope already holds a persistable `w`, on cpu (for the error tests).
    absl::StatusOr<vm::Stream*> stream =
        context_->vm()->GetStream(StreamKey{kCpu, StreamType::kCompute, 0});
    ASSERT_TRUE(stream.ok());
    absl::StatusOr<vm::BlobRef> w = context_->vm()->NewBlob(*stream, DataType::kF32, kSquare, "w");
    ASSERT_TRUE(w.ok()) << w.status();
    scope_.Set("w", *w);
    before_ = scope_.LocalNames();
  }

  absl::StatusOr<std::unique_ptr<Interpreter>> Build(const ir::ProgramDesc& program,
                                                     const std::vector<std::string>& feeds,
                                                     const std::vector<std::string>& fetches,
                                                     InterpreterOptions options = {}) {
    return Interpreter::Build(program, &context_->registry(), context_->vm(), &scope_, feeds,
                              fetches, options);
  }

  LoweringStats Lower(const ir::ProgramDesc& program, const std::vector<std::string>& feeds,
                      const std::vector<std::string>& fetches, InterpreterOptions options = {}) {
    absl::StatusOr<std::unique_ptr<Interpreter>> built = Build(program, feeds, fetches, options);
    EXPECT_TRUE(built.ok()) << built.status();
    if (!built.ok()) return {};
    return (*built)->lowering();
  }

  // Runs `program` once through an Executor on this test's context (sync checker on).
  std::vector<HostTensor> RunOnce(const ir::ProgramDesc& program, const Feeds& feeds,
                                  const std::vector<std::string>& fetches,
                                  InterpreterOptions options) {
    ExecutorOptions executor_options;
    executor_options.interpreter = options;
    Executor executor(&context_->registry(), context_->vm(), executor_options);
    Scope scope;
    absl::StatusOr<RunResult> result = executor.Run(program, feeds, fetches, &scope);
    EXPECT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0);
    if (!result.ok()) return {};
    return result->fetches;
  }

  // --- For the build error tests. ---

  // x fed; op 0 writes a new persistable `state` (a successful build adds it to the scope);
  // op 1 y = relu(x). Tests append the faulty op as op #2.
  static ir::ProgramDesc Base() {
    ir::ProgramDesc p;
    ir::BlockDesc& b = p.mutable_global_block();
    AddVar(b, Var("x", kSquare));
    AddVar(b, Var("w", kSquare, /*persistable=*/true));
    AddVar(b, Var("state", kSquare, /*persistable=*/true));
    AddVar(b, Var("y", kSquare));
    AddVar(b, Var("z", kSquare));
    b.AppendOp(Op("fill_constant", {}, {{"Out", {"state"}}}, Fill(kSquare, 3.0)));
    b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"y"}}}));
    return p;
  }

  absl::Status BuildError(const ir::ProgramDesc& program, std::vector<std::string> feeds = {"x"},
                          std::vector<std::string> fetches = {"y"}) {
    absl::StatusOr<std::unique_ptr<Interpreter>> built = Build(program, feeds, fetches);
    EXPECT_FALSE(built.ok());
    EXPECT_EQ(scope_.LocalNames(), before_) << "a failed build changed the scope";
    return built.ok() ? absl::OkStatus() : built.status();
  }

  std::unique_ptr<eager::Context> context_;
  Scope scope_;
  std::vector<std::string> before_;
};

// x (fed) → relu → exp → scale(2) → c (fetched).
ir::ProgramDesc CpuChain() {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* name : {"x", "a", "b", "c"}) AddVar(b, Var(name, kSquare));
  b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  b.AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"b"}}}));
  b.AppendOp(Op("scale", {{"X", {"b"}}}, {{"Out", {"c"}}}, ScaleBy(2.0)));
  return p;
}

TEST_F(InterpreterTest, SingleStreamChainFusesIntoOneSequence) {
  const LoweringStats s = Lower(CpuChain(), {"x"}, {"c"});
  EXPECT_EQ(s.ops, 3);
  EXPECT_EQ(s.inserted_copies, 0);
  EXPECT_EQ(s.op_sequences, 1);
  EXPECT_EQ(s.instructions, 1);
  EXPECT_EQ(s.stream_waits, 0);
  EXPECT_EQ(s.record_events, 0);
  EXPECT_EQ(s.edges, 0);
  EXPECT_EQ(s.streams, 1);
  // a and b die; c is fetched, x is fed. b takes a's storage in place (exp declares X -> Out),
  // so a's release runs no step; b's frees.
  EXPECT_EQ(s.releases, 1);
  EXPECT_EQ(s.inplace_reuses, 1);
  EXPECT_EQ(s.dependencies.kept, 2);
}

TEST_F(InterpreterTest, BuiltInterpreterRunsStepByStep) {
  absl::StatusOr<std::unique_ptr<Interpreter>> built = Build(CpuChain(), {"x"}, {"c"});
  ASSERT_TRUE(built.ok()) << built.status();
  Interpreter& interpreter = **built;
  EXPECT_THAT(interpreter.feed_names(), ElementsAre("x"));
  EXPECT_THAT(interpreter.fetch_names(), ElementsAre("c"));
  EXPECT_THAT(interpreter.devices(), ElementsAre(kCpu));
  const std::vector<float> x = Ramp(16);
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(interpreter.StageFeeds({{"x", HostTensor::FromVector(x, kSquare)}}).ok());
    ASSERT_TRUE(interpreter.CheckInitialized().ok());
    ASSERT_TRUE(interpreter.Submit().ok());
    ASSERT_TRUE(context_->vm()->Sync().ok());
    absl::StatusOr<std::vector<HostTensor>> fetched = interpreter.ReadFetches();
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    ASSERT_EQ(fetched->size(), 1u);
    const std::vector<float> c = (*fetched)[0].ToVector<float>();
    ASSERT_EQ(c.size(), 16u);
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(c[i], 2 * std::exp(std::max(x[i], 0.0f)), 1e-5);
    EXPECT_EQ(interpreter.ops_run(), 3 * (run + 1));
  }
}

TEST_F(InterpreterTest, WithoutFusionEachNodeIsASequence) {
  InterpreterOptions options;
  options.fuse = false;
  options.release_temporaries = false;
  LoweringStats s = Lower(CpuChain(), {"x"}, {"c"}, options);
  EXPECT_EQ(s.op_sequences, 3);
  EXPECT_EQ(s.instructions, 3);
  EXPECT_EQ(s.edges, 2);  // the stream chain
  EXPECT_EQ(s.stream_waits + s.record_events, 0);
  EXPECT_EQ(s.releases, 0);

  options.release_temporaries = true;
  options.inplace = false;  // every release a step of its own
  s = Lower(CpuChain(), {"x"}, {"c"}, options);
  EXPECT_EQ(s.releases, 2);
  EXPECT_EQ(s.op_sequences, 5);  // three ops, two releases
  EXPECT_EQ(s.instructions, 5);
}

// Two fills on sim compute:0 (p0, then p1), consumers on compute:1 as `consumers` says:
// each entry lists the producers one consumer reads.
ir::ProgramDesc TwoStreamProgram(const std::vector<std::vector<std::string>>& consumers) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("p0", kSquare));
  AddVar(b, Var("p1", kSquare));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"p0"}}}, Fill(kSquare, 1.5)));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"p1"}}}, Fill(kSquare, -2.0)));
  for (size_t i = 0; i < consumers.size(); ++i) {
    const std::string out = absl::StrCat("c", i);
    AddVar(b, Var(out, kSquare));
    if (consumers[i].size() == 1) {
      b.AppendOp(Op("exp", {{"X", consumers[i]}}, {{"Out", {out}}}, OnStream("compute:1")));
    } else {
      b.AppendOp(Op("sum", {{"X", consumers[i]}}, {{"Out", {out}}}, OnStream("compute:1")));
    }
  }
  return p;
}

InterpreterOptions SimNoRelease() {
  InterpreterOptions options;
  options.device = kSim;
  options.release_temporaries = false;  // releases would add waits back to compute:0
  return options;
}

TEST_F(InterpreterTest, TwoStreamsConsumersInReverseOrderNeedOneWait) {
  // c0 reads p1 (the later producer): its wait covers p0 too, so c1 reading p0 waits for
  // nothing more.
  const ir::ProgramDesc p = TwoStreamProgram({{"p1"}, {"p0"}});
  const LoweringStats s = Lower(p, {}, {}, SimNoRelease());
  EXPECT_EQ(s.streams, 2);
  EXPECT_EQ(s.stream_waits, 1);
  EXPECT_EQ(s.record_events, 0);
  const std::vector<HostTensor> out = RunOnce(p, {}, {"c0", "c1"}, SimNoRelease());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NEAR(out[0].ToVector<float>()[5], std::exp(-2.0f), 1e-6);
  EXPECT_NEAR(out[1].ToVector<float>()[5], std::exp(1.5f), 1e-5);
}

TEST_F(InterpreterTest, TwoStreamsConsumersInProducerOrderNeedTwoWaits) {
  // c0 reads p0 and may start before p1 is done; c1 then needs a second wait for p1.
  const LoweringStats s = Lower(TwoStreamProgram({{"p0"}, {"p1"}}), {}, {}, SimNoRelease());
  EXPECT_EQ(s.streams, 2);
  EXPECT_EQ(s.stream_waits, 2);
}

TEST_F(InterpreterTest, TwoStreamsConsumerOfBothProducersNeedsOneWait) {
  // c0 reads p0 and p1 (two segments of compute:0): waiting for p1 implies p0. c1 reads both
  // again and needs nothing more.
  const ir::ProgramDesc p = TwoStreamProgram({{"p0", "p1"}, {"p1", "p0"}});
  const LoweringStats s = Lower(p, {}, {}, SimNoRelease());
  EXPECT_EQ(s.streams, 2);
  EXPECT_EQ(s.stream_waits, 1) << "a wait for an earlier segment of the same stream is implied "
                                  "by the wait for the later one";
  const std::vector<HostTensor> out = RunOnce(p, {}, {"c0", "c1"}, SimNoRelease());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NEAR(out[0].ToVector<float>()[0], -0.5f, 1e-6);
  EXPECT_NEAR(out[1].ToVector<float>()[15], -0.5f, 1e-6);
}

TEST_F(InterpreterTest, ValuesCrossingDevicesGetCopies) {
  // On sim: the fed x is copied in (h2d), the fetched y copied out (d2h).
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("x", kSquare));
  AddVar(b, Var("r", kSquare));
  AddVar(b, Var("y", kSquare));
  b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"r"}}}));
  b.AppendOp(Op("add", {{"X", {"r"}}, {"Y", {"x"}}}, {{"Out", {"y"}}}));
  InterpreterOptions options;
  options.device = kSim;
  const LoweringStats s = Lower(p, {"x"}, {"y"}, options);
  EXPECT_EQ(s.inserted_copies, 2);  // one copy of x serves both readers
  EXPECT_EQ(s.ops, 4);
  EXPECT_EQ(s.streams, 3);  // h2d, compute, d2h
  EXPECT_GT(s.stream_waits, 0);

  // On cpu nothing is copied.
  EXPECT_EQ(Lower(p, {"x"}, {"y"}).inserted_copies, 0);

  const std::vector<float> x = Ramp(16);
  const std::vector<HostTensor> out =
      RunOnce(p, {{"x", HostTensor::FromVector(x, kSquare)}}, {"y"}, options);
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> y = out[0].ToVector<float>();
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(y[i], std::max(x[i], 0.0f) + x[i], 1e-6);
}

// Two independent chains (fill → exp → scale), joined by an add at the end.
ir::ProgramDesc TwoChains() {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* name : {"a0", "a1", "a2", "b0", "b1", "b2", "out"}) {
    AddVar(b, Var(name, kSquare));
  }
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"a0"}}}, Fill(kSquare, 0.25)));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"b0"}}}, Fill(kSquare, 0.5)));
  b.AppendOp(Op("exp", {{"X", {"a0"}}}, {{"Out", {"a1"}}}));
  b.AppendOp(Op("exp", {{"X", {"b0"}}}, {{"Out", {"b1"}}}));
  b.AppendOp(Op("scale", {{"X", {"a1"}}}, {{"Out", {"a2"}}}, ScaleBy(2.0)));
  b.AppendOp(Op("scale", {{"X", {"b1"}}}, {{"Out", {"b2"}}}, ScaleBy(3.0)));
  b.AppendOp(Op("add", {{"X", {"a2"}}, {"Y", {"b2"}}}, {{"Out", {"out"}}}));
  return p;
}

TEST_F(InterpreterTest, ComputeStreamsSpreadIndependentOps) {
  InterpreterOptions one;
  one.device = kSim;
  const LoweringStats single = Lower(TwoChains(), {}, {}, one);
  EXPECT_EQ(single.streams, 1);
  EXPECT_EQ(single.stream_waits, 0);

  InterpreterOptions two = one;
  two.compute_streams = 2;
  const LoweringStats spread = Lower(TwoChains(), {}, {}, two);
  EXPECT_EQ(spread.streams, 2);
  EXPECT_GT(spread.stream_waits, 0);  // the join
  EXPECT_GT(spread.op_sequences, single.op_sequences);

  const std::vector<HostTensor> out = RunOnce(TwoChains(), {}, {"out"}, two);
  ASSERT_EQ(out.size(), 1u);
  const float want = 2 * std::exp(0.25f) + 3 * std::exp(0.5f);
  for (float v : out[0].ToVector<float>()) EXPECT_NEAR(v, want, 1e-5);
}

TEST_F(InterpreterTest, ReleasesEqualUnfetchedTemporaries) {
  // Temporaries t0..t4; t2 and t4 are fetched; `unused` is declared but never touched; w is
  // persistable; x is fed. Released: t0, t1, t3.
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("x", kSquare));
  AddVar(b, Var("w", kSquare, /*persistable=*/true));
  for (const char* name : {"t0", "t1", "t2", "t3", "t4", "unused"}) AddVar(b, Var(name, kSquare));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"w"}}}, Fill(kSquare, 1.0)));
  b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"t0"}}}));
  b.AppendOp(Op("add", {{"X", {"t0"}}, {"Y", {"w"}}}, {{"Out", {"t1"}}}));
  b.AppendOp(Op("exp", {{"X", {"t1"}}}, {{"Out", {"t2"}}}));
  b.AppendOp(Op("scale", {{"X", {"t2"}}}, {{"Out", {"t3"}}}, ScaleBy(0.5)));
  b.AppendOp(Op("add", {{"X", {"t3"}}, {"Y", {"t0"}}}, {{"Out", {"t4"}}}));
  // A release either runs a step or hands its storage to a later temporary (after it, or in
  // place at its last reader).
  auto released = [](const LoweringStats& s) {
    return s.releases + s.storage_handoffs + s.inplace_reuses;
  };
  EXPECT_EQ(released(Lower(p, {"x"}, {"t2", "t4"})), 3);
  EXPECT_EQ(released(Lower(p, {"x"}, {"t4"})), 4);
  InterpreterOptions no_handoff;
  no_handoff.hand_off_storage = false;
  no_handoff.inplace = false;
  EXPECT_EQ(Lower(p, {"x"}, {"t4"}, no_handoff).releases, 4);
  EXPECT_EQ(Lower(p, {"x"}, {"t4"}, no_handoff).storage_handoffs, 0);
  InterpreterOptions keep;
  keep.release_temporaries = false;
  EXPECT_EQ(Lower(p, {"x"}, {"t4"}, keep).releases, 0);
}

TEST_F(InterpreterTest, PeakBytesEqualTheLivenessBound) {
  // Equal-sized f32 temporaries of 4096 bytes, no feeds, the last one fetched. The test
  // computes the liveness bound itself: at op i, every temporary first written at or
  // before i and last used at or after i (fetched ones live to the end).
  const Shape shape({32, 32});
  const int64_t bytes = 32 * 32 * 4;
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (int i = 0; i <= 8; ++i) AddVar(b, Var(absl::StrCat("t", i), shape));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"t0"}}}, Fill(shape, 1.0)));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"t1"}}}, Fill(shape, 2.0)));
  b.AppendOp(Op("add", {{"X", {"t0"}}, {"Y", {"t1"}}}, {{"Out", {"t2"}}}));
  b.AppendOp(Op("exp", {{"X", {"t2"}}}, {{"Out", {"t3"}}}));
  b.AppendOp(Op("add", {{"X", {"t3"}}, {"Y", {"t0"}}}, {{"Out", {"t4"}}}));
  b.AppendOp(Op("relu", {{"X", {"t4"}}}, {{"Out", {"t5"}}}));
  b.AppendOp(Op("scale", {{"X", {"t5"}}}, {{"Out", {"t6"}}}, ScaleBy(0.5)));
  b.AppendOp(Op("add", {{"X", {"t6"}}, {"Y", {"t1"}}}, {{"Out", {"t7"}}}));
  b.AppendOp(Op("add", {{"X", {"t7"}}, {"Y", {"t5"}}}, {{"Out", {"t8"}}}));
  const std::vector<std::string> fetches = {"t8"};

  // Liveness from the program text.
  const std::vector<ir::OpDesc>& ops = b.ops();
  const int n = static_cast<int>(ops.size());
  std::map<std::string, int> first, last;
  for (int i = 0; i < n; ++i) {
    for (const std::string& v : ops[i].InputNames()) last[v] = i;
    for (const std::string& v : ops[i].OutputNames()) {
      if (!first.contains(v)) first[v] = i;
      last[v] = i;
    }
  }
  for (const std::string& v : fetches) last[v] = n;
  int64_t bound = 0;
  for (int i = 0; i < n; ++i) {
    int64_t live = 0;
    for (const auto& [v, f] : first) {
      if (f <= i && last[v] >= i) live += bytes;
    }
    bound = std::max(bound, live);
  }
  const int64_t total = static_cast<int64_t>(first.size()) * bytes;
  ASSERT_EQ(bound, 4 * bytes);  // the program above, worked by hand
  ASSERT_EQ(total, 9 * bytes);

  // The GC plan and the hand-offs reach the bound; the in-place pass goes below it (an
  // output takes its input's buffer at the input's last use, where the bound counts both).
  for (const auto& [release, inplace] :
       {std::pair{true, false}, std::pair{false, false}, std::pair{true, true}}) {
    SCOPED_TRACE(release ? (inplace ? "release_temporaries, in place" : "release_temporaries")
                         : "keep temporaries");
    std::unique_ptr<eager::Context> context = program_test::NewContext(0);
    ASSERT_NE(context, nullptr);
    ExecutorOptions options;
    options.interpreter.release_temporaries = release;
    options.interpreter.inplace = inplace;
    options.interpreter.compile_subgraphs = false;  // the bound counts every temporary
    Executor executor(&context->registry(), context->vm(), options);
    Scope scope;
    absl::StatusOr<RunResult> result = executor.Run(p, {}, fetches, &scope);
    ASSERT_TRUE(result.ok()) << result.status();
    if (inplace) {
      EXPECT_LT(result->stats.peak_bytes, bound);
      EXPECT_GT(executor.LastLowering().value().inplace_reuses, 0);
    } else {
      EXPECT_EQ(result->stats.peak_bytes, release ? bound : total);
    }
    // t8 = (exp(3) + 1) * 0.5 + 2 + relu(exp(3) + 1).
    const float t4 = std::exp(3.0f) + 1.0f;
    EXPECT_NEAR(result->fetches[0].ToVector<float>()[100], t4 * 0.5f + 2.0f + t4, 1e-4);
  }
}

// A release's storage handed on over an allocation would sit idle beside the new block:
// t0's release comes before z and w are allocated, and y (t0's shape) is first written only
// after them. Held at w with a hand-off t0 -> y: t0 + t1 + z + w, above the liveness bound
// t1 + z + w; the hand-off is refused and the peak is the bound. (v, fetched, takes none.)
TEST_F(InterpreterTest, HandOffNeverHoldsStoragePastAnAllocation) {
  const Shape small({32, 32});  // 4096 bytes
  const Shape big({64, 64});    // 16384 bytes
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* name : {"t0", "t1", "y", "v"}) AddVar(b, Var(name, small));
  for (const char* name : {"z", "w"}) AddVar(b, Var(name, big));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"t0"}}}, Fill(small, 1.0)));
  b.AppendOp(Op("relu", {{"X", {"t0"}}}, {{"Out", {"t1"}}}));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"z"}}}, Fill(big, 2.0)));
  b.AppendOp(Op("add", {{"X", {"z"}}, {"Y", {"z"}}}, {{"Out", {"w"}}}));
  b.AppendOp(Op("exp", {{"X", {"t1"}}}, {{"Out", {"y"}}}));
  b.AppendOp(Op("add", {{"X", {"y"}}, {"Y", {"y"}}}, {{"Out", {"v"}}}));
  const int64_t bound = 4096 + 2 * 16384;  // at the add: t1, z, w
  std::unique_ptr<eager::Context> context = program_test::NewContext(0);
  ASSERT_NE(context, nullptr);
  Executor executor(&context->registry(), context->vm(), ExecutorOptions{});
  Scope scope;
  absl::StatusOr<RunResult> result = executor.Run(p, {}, {"w", "v"}, &scope);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stats.peak_bytes, bound);
  EXPECT_EQ(executor.LastLowering()->storage_handoffs, 0);
  EXPECT_NEAR(result->fetches[1].ToVector<float>()[7], 2 * std::exp(1.0f), 1e-5);
}

// --- Random programs over several streams against a plain cpu run. ---

// Ops over a fed x and temporaries t0..t7 ([8, 8]): unary (tanh, relu, scale) and binary
// (add, sub, max) ops reading written variables, writing any temporary (overwrites and
// in-place updates included, so WAR and WAW edges cross streams). With `streams` > 0 each op
// gets a random "stream" attribute among compute:0..streams-1. With `ssa`, op i writes a
// temporary u<i> of its own instead, reading among the six latest values: temporaries die
// soon after they are born, so the GC plan releases them mid-run and hands their storage
// on (storage_handoff.h).
struct RandomProgram {
  ir::ProgramDesc program;
  std::vector<std::string> fetches;
};

RandomProgram MakeRandomProgram(uint32_t seed, int num_ops, int streams, bool ssa = false) {
  std::mt19937 rng(seed);
  auto below = [&](int k) { return static_cast<int>(rng() % static_cast<uint32_t>(k)); };
  const Shape shape({8, 8});
  constexpr int kTemps = 8;
  RandomProgram r;
  ir::BlockDesc& b = r.program.mutable_global_block();
  AddVar(b, Var("x", shape));
  for (int i = 0; i < kTemps; ++i) AddVar(b, Var(absl::StrCat("t", i), shape));
  for (int i = 0; ssa && i < num_ops; ++i) AddVar(b, Var(absl::StrCat("u", i), shape));
  std::vector<std::string> written = {"x"};
  // An input: any written value, or with `ssa` one of the six latest.
  auto pick = [&] {
    const int n = static_cast<int>(written.size());
    return written[ssa ? n - 1 - below(std::min(n, 6)) : below(n)];
  };
  std::vector<std::string> order;  // temporaries in order of last write
  for (int i = 0; i < num_ops; ++i) {
    const std::string out = ssa ? absl::StrCat("u", i) : absl::StrCat("t", below(kTemps));
    const std::string a = pick();
    const std::string c = pick();
    vm::AttrMap attrs;
    std::string type;
    ir::OpSlots inputs = {{"X", {a}}};
    switch (below(6)) {
      case 0:
        type = "tanh";
        break;
      case 1:
        type = "relu";
        break;
      case 2:
        type = "scale";
        attrs = ScaleBy(0.75, 0.125);
        break;
      case 3:
        type = "add";
        inputs.push_back({"Y", {c}});
        break;
      case 4:
        type = "sub";
        inputs.push_back({"Y", {c}});
        break;
      default:
        type = "max";
        inputs.push_back({"Y", {c}});
        break;
    }
    const int stream = below(3);  // drawn either way: both variants get the same ops
    if (streams > 0) attrs = OnStream(absl::StrCat("compute:", stream % streams), attrs);
    b.AppendOp(Op(type, std::move(inputs), {{"Out", {out}}}, attrs));
    if (std::find(written.begin(), written.end(), out) == written.end()) written.push_back(out);
    order.erase(std::remove(order.begin(), order.end(), out), order.end());
    order.push_back(out);
  }
  // The three most recently written temporaries.
  for (int i = 0; i < 3 && !order.empty(); ++i) {
    r.fetches.push_back(order.back());
    order.pop_back();
  }
  return r;
}

TEST_F(InterpreterTest, RandomProgramsOnStreamsMatchACpuRun) {
  ::sluice::eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 1;
  context_options.runtime.enable_cuda = false;
  context_options.runtime.sim.max_jitter_us = 20;  // shake out missing waits
  context_options.runtime.sim.seed = 7;
  context_options.vm.check_sync = true;
  absl::StatusOr<eager::Context> created = eager::Context::Create(context_options);
  ASSERT_TRUE(created.ok()) << created.status();
  eager::Context& context = *created;
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = std::sin(0.37f * i) * 2;
  const Feeds feeds = {{"x", HostTensor::FromVector(x, Shape({8, 8}))}};
  auto run = [&](const RandomProgram& r, InterpreterOptions options) {
    ExecutorOptions executor_options;
    executor_options.interpreter = options;
    // Unfused: the program's shape (its streams and waits) is what this test is about.
    executor_options.interpreter.compile_subgraphs = false;
    Executor executor(&context.registry(), context.vm(), executor_options);
    Scope scope;
    std::vector<std::vector<uint8_t>> out;
    for (int step = 0; step < 2; ++step) {
      absl::StatusOr<RunResult> result = executor.Run(r.program, feeds, r.fetches, &scope);
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) return out;
      out.clear();
      for (const HostTensor& t : result->fetches) out.push_back(t.bytes);
    }
    return out;
  };
  for (uint32_t seed : {11u, 12u, 13u, 14u, 15u, 16u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const bool ssa = seed >= 15;
    const RandomProgram plain = MakeRandomProgram(seed, 40, 0, ssa);
    const RandomProgram placed = MakeRandomProgram(seed, 40, 3, ssa);
    ASSERT_EQ(plain.fetches, placed.fetches);
    // The reference keeps every temporary (no GC plan, so no storage hand-offs either).
    InterpreterOptions reference;
    reference.release_temporaries = false;
    const std::vector<std::vector<uint8_t>> want = run(plain, reference);
    ASSERT_EQ(want.size(), plain.fetches.size());
    for (bool fuse : {true, false}) {
      for (bool release : {true, false}) {
        InterpreterOptions options;
        options.device = kSim;
        options.fuse = fuse;
        options.release_temporaries = release;
        EXPECT_EQ(run(placed, options), want) << "stream attributes, fuse " << fuse;
        options.compute_streams = 3;
        EXPECT_EQ(run(plain, options), want) << "compute_streams 3, fuse " << fuse;
      }
    }
    InterpreterOptions cpu_streams;
    cpu_streams.compute_streams = 2;
    EXPECT_EQ(run(placed, cpu_streams), want) << "cpu with stream attributes";
    EXPECT_EQ(run(plain, cpu_streams), want) << "cpu, compute_streams 2";
  }
  EXPECT_EQ(context.vm()->sync_checker()->violation_count(), 0);
}

// Host streams (every stream a cpu stream of its own worker), lowered two ways: the default
// shared step graph (graph_lowering.h: the workers take whatever task is ready) and lanes
// (work_sharing off: each stream's work is one sequence with cross-sequence waits). The same
// random programs, run for several steps (so every run must tell itself from the previous
// one), give the bytes of a single-stream run that keeps every temporary. Both run here under
// the sync checker, which checks every step and takes each wait step, and each graph edge,
// as an ordering edge. The SSA programs release temporaries mid-run and hand their storage on.
// Four of the programs run beside a busy core (the load the lane benchmarks measure).
TEST_F(InterpreterTest, RandomProgramsInLaneModeMatchASingleStreamRun) {
  ::sluice::eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 0;
  context_options.runtime.enable_cuda = false;
  context_options.vm.check_sync = true;
  absl::StatusOr<eager::Context> created = eager::Context::Create(context_options);
  ASSERT_TRUE(created.ok()) << created.status();
  eager::Context& context = *created;
  struct Outcome {
    std::vector<std::vector<uint8_t>> fetched;  // every step's fetches, in order
    LoweringStats lowering;
  };
  auto run = [&](const RandomProgram& r, InterpreterOptions options) {
    ExecutorOptions executor_options;
    executor_options.interpreter = options;
    // Unfused: the program's shape (its streams and waits) is what this test is about.
    executor_options.interpreter.compile_subgraphs = false;
    Executor executor(&context.registry(), context.vm(), executor_options);
    Scope scope;
    Outcome outcome;
    for (int step = 0; step < 8; ++step) {
      // A different feed every step: a step that read a value of the step before (a wait
      // satisfied by the previous run) shows in its fetches.
      std::vector<float> x(64);
      for (int i = 0; i < 64; ++i) x[i] = std::cos(0.29f * i + 0.7f * step) * 2;
      const Feeds feeds = {{"x", HostTensor::FromVector(x, Shape({8, 8}))}};
      absl::StatusOr<RunResult> result = executor.Run(r.program, feeds, r.fetches, &scope);
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) return outcome;
      for (const HostTensor& t : result->fetches) outcome.fetched.push_back(t.bytes);
    }
    outcome.lowering = executor.LastLowering().value();
    return outcome;
  };
  int64_t handoffs = 0;  // storage hand-offs in the lane runs (the GC plan's, checked)
  int64_t drops = 0;     // drops of shared releases in them
  for (uint32_t seed : {21u, 22u, 23u, 24u, 25u, 26u, 27u, 28u, 29u, 30u, 31u, 32u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    // The last four seeds run beside a busy core: lane workers preempted mid-run and waits
    // that park and wake late must give the same bytes.
    std::optional<::sluice::testing::BusyCore> load;
    if (seed >= 29) load.emplace();
    const bool ssa = seed >= 26 && seed != 29 && seed != 30;
    const RandomProgram plain = MakeRandomProgram(seed, 60, 0, ssa);
    const RandomProgram placed = MakeRandomProgram(seed, 60, 3, ssa);
    // The reference keeps every temporary (no GC plan, so no storage hand-offs either).
    InterpreterOptions reference;
    reference.release_temporaries = false;
    const Outcome want = run(plain, reference);
    ASSERT_EQ(want.fetched.size(), 8 * plain.fetches.size());
    EXPECT_EQ(want.lowering.lane_sequences, 0);  // one stream: nothing to wait across
    for (bool release : {true, false}) {
      for (int streams : {2, 3}) {
        InterpreterOptions options;
        options.release_temporaries = release;
        options.compute_streams = streams;
        const Outcome graph = run(plain, options);
        EXPECT_EQ(graph.fetched, want.fetched) << streams << " streams, release " << release;
        EXPECT_EQ(graph.lowering.lane_sequences, 0);
        EXPECT_GE(graph.lowering.graph_tasks, 60);  // a task per op
        EXPECT_GE(graph.lowering.instructions, 2);  // a member per stream
        EXPECT_LE(graph.lowering.instructions, streams);
        handoffs += graph.lowering.storage_handoffs;
        options.work_sharing = false;
        const Outcome lanes = run(plain, options);
        EXPECT_EQ(lanes.fetched, want.fetched) << streams << " streams, release " << release;
        EXPECT_EQ(lanes.lowering.graph_tasks, 0);
        handoffs += lanes.lowering.storage_handoffs;
        drops += lanes.lowering.shared_releases;
        // The list schedule may leave a stream unused when the program is narrow.
        EXPECT_GE(lanes.lowering.lane_sequences, 2);
        EXPECT_LE(lanes.lowering.lane_sequences, streams);
        EXPECT_EQ(lanes.lowering.instructions, lanes.lowering.lane_sequences);
        EXPECT_GT(lanes.lowering.stream_waits, 0);
        options.lane_sequences = false;
        const Outcome instructions = run(plain, options);
        EXPECT_EQ(instructions.fetched, want.fetched);
        EXPECT_EQ(instructions.lowering.lane_sequences, 0);
        EXPECT_GT(instructions.lowering.instructions, streams);
      }
      InterpreterOptions options;
      options.release_temporaries = release;
      const Outcome graph = run(placed, options);
      EXPECT_EQ(graph.fetched, want.fetched) << "stream attributes, release " << release;
      EXPECT_EQ(graph.lowering.instructions, 3);
      options.work_sharing = false;
      const Outcome lanes = run(placed, options);
      EXPECT_EQ(lanes.fetched, want.fetched) << "stream attributes, release " << release;
      EXPECT_EQ(lanes.lowering.lane_sequences, 3);
    }
  }
  EXPECT_GT(handoffs, 0);
  EXPECT_GT(drops, 0);
  ASSERT_NE(context.vm()->sync_checker(), nullptr);
  EXPECT_EQ(context.vm()->sync_checker()->violation_count(), 0);
}

// A copy stream shares compute stream 0's worker: lanes there could wait on each other
// (h2d's lane queued behind compute:0's, which waits for compute:1, which waits for h2d),
// so the graph keeps the instruction-level lowering — and runs.
TEST_F(InterpreterTest, LaneModeNeedsAWorkerPerStream) {
  const Shape shape({8, 8});
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("x", shape));
  for (const char* t : {"t1", "t2", "t3", "t4"}) AddVar(b, Var(t, shape));
  b.AppendOp(Op("tanh", {{"X", {"x"}}}, {{"Out", {"t1"}}}, OnStream("h2d")));
  b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"t2"}}}, OnStream("compute:0")));
  b.AppendOp(Op("tanh", {{"X", {"t2"}}}, {{"Out", {"t3"}}}, OnStream("compute:1")));
  b.AppendOp(Op("tanh", {{"X", {"t3"}}}, {{"Out", {"t4"}}}, OnStream("h2d")));
  ::sluice::eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 0;
  context_options.runtime.enable_cuda = false;
  absl::StatusOr<eager::Context> created = eager::Context::Create(context_options);
  ASSERT_TRUE(created.ok()) << created.status();
  Executor executor(&created->registry(), created->vm());
  Scope scope;
  const Feeds feeds = {{"x", HostTensor::FromVector(std::vector<float>(64, 0.5f), shape)}};
  absl::StatusOr<RunResult> result = executor.Run(p, feeds, {"t1", "t4"}, &scope);
  ASSERT_TRUE(result.ok()) << result.status();
  const LoweringStats lowering = executor.LastLowering().value();
  EXPECT_EQ(lowering.streams, 3);
  EXPECT_EQ(lowering.lane_sequences, 0);
  ASSERT_EQ(result->fetches.size(), 2u);
  for (float v : result->fetches[0].ToVector<float>()) EXPECT_NEAR(v, std::tanh(0.5f), 1e-6);
  for (float v : result->fetches[1].ToVector<float>()) {
    EXPECT_NEAR(v, std::tanh(std::tanh(0.5f)), 1e-6);
  }
}

// The sync checker sees inside lanes and the step graph's edges, so both stay on under it
// and the runs are clean.
TEST_F(InterpreterTest, LaneAndGraphModesRunUnderTheSyncChecker) {
  ::sluice::eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 0;
  context_options.runtime.enable_cuda = false;
  context_options.vm.check_sync = true;
  absl::StatusOr<eager::Context> created = eager::Context::Create(context_options);
  ASSERT_TRUE(created.ok()) << created.status();
  for (bool sharing : {true, false}) {
    ExecutorOptions executor_options;
    executor_options.interpreter.compute_streams = 2;
    executor_options.interpreter.work_sharing = sharing;
    Executor executor(&created->registry(), created->vm(), executor_options);
    Scope scope;
    const RandomProgram r = MakeRandomProgram(31, 40, 0);
    std::vector<float> x(64, 0.5f);
    const Feeds feeds = {{"x", HostTensor::FromVector(x, Shape({8, 8}))}};
    ASSERT_TRUE(executor.Run(r.program, feeds, r.fetches, &scope).ok());
    const LoweringStats lowering = executor.LastLowering().value();
    EXPECT_EQ(lowering.lane_sequences, sharing ? 0 : 2);
    EXPECT_EQ(lowering.graph_tasks > 0, sharing);
    EXPECT_EQ(lowering.instructions, 2);
    EXPECT_GT(lowering.stream_waits, 0);
  }
  EXPECT_EQ(created->vm()->sync_checker()->violation_count(), 0);
}

// --- Build errors: each named, each leaving the scope as it was. ---

TEST_F(InterpreterTest, SuccessfulBuildAddsNewPersistables) {
  // The control for the tests below: the same base program builds and adds `state`.
  ASSERT_TRUE(Build(Base(), {"x"}, {"y"}).ok());
  EXPECT_THAT(scope_.LocalNames(), ElementsAre("state", "w"));
}

TEST_F(InterpreterTest, NewPersistablesGoToTheRootScope) {
  Scope& child = scope_.NewChild();
  ASSERT_TRUE(
      Interpreter::Build(Base(), &context_->registry(), context_->vm(), &child, {"x"}, {"y"}).ok());
  EXPECT_TRUE(child.LocalNames().empty());
  EXPECT_THAT(scope_.LocalNames(), ElementsAre("state", "w"));
}

TEST_F(InterpreterTest, UnknownOp) {
  ir::ProgramDesc p = Base();
  p.mutable_global_block().AppendOp(Op("no_such_op", {{"X", {"y"}}}, {{"Out", {"z"}}}));
  const absl::Status status = BuildError(p);
  EXPECT_THAT(status.message(), HasSubstr("no_such_op"));
}

TEST_F(InterpreterTest, BadAttributeType) {
  ir::ProgramDesc p = Base();
  p.mutable_global_block().AppendOp(Op("scale", {{"X", {"y"}}}, {{"Out", {"z"}}},
                                       vm::AttrMap().Set("scale", std::string("twice"))));
  const absl::Status status = BuildError(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("op #2 'scale'"));
  EXPECT_THAT(status.message(), HasSubstr("'scale'"));
}

TEST_F(InterpreterTest, UnknownAttribute) {
  ir::ProgramDesc p = Base();
  p.mutable_global_block().AppendOp(
      Op("relu", {{"X", {"y"}}}, {{"Out", {"z"}}}, vm::AttrMap().Set("colour", 1.0)));
  const absl::Status status = BuildError(p);
  EXPECT_THAT(status.message(), HasSubstr("op #2 'relu'"));
  EXPECT_THAT(status.message(), HasSubstr("colour"));
}

TEST_F(InterpreterTest, OutputShapeDiffersFromTheDeclaredVariable) {
  ir::ProgramDesc p = Base();
  AddVar(p.mutable_global_block(), Var("wide", Shape({2, 8})));
  p.mutable_global_block().AppendOp(Op("relu", {{"X", {"y"}}}, {{"Out", {"wide"}}}));
  const absl::Status status = BuildError(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("op #2 'relu'"));
  EXPECT_THAT(status.message(), HasSubstr("'wide'"));
  EXPECT_THAT(status.message(), HasSubstr("[2, 8]"));
  EXPECT_THAT(status.message(), HasSubstr("[4, 4]"));
}

TEST_F(InterpreterTest, OutputDtypeDiffersFromTheDeclaredVariable) {
  ir::ProgramDesc p = Base();
  AddVar(p.mutable_global_block(), Var("ints", kSquare, false, DataType::kI32));
  p.mutable_global_block().AppendOp(Op("relu", {{"X", {"y"}}}, {{"Out", {"ints"}}}));
  const absl::Status status = BuildError(p);
  EXPECT_THAT(status.message(), HasSubstr("'ints'"));
  EXPECT_THAT(status.message(), HasSubstr("i32"));
}

TEST_F(InterpreterTest, ReadBeforeAnyWrite) {
  ir::ProgramDesc p = Base();
  AddVar(p.mutable_global_block(), Var("never_written", kSquare));
  p.mutable_global_block().AppendOp(
      Op("add", {{"X", {"y"}}, {"Y", {"never_written"}}}, {{"Out", {"z"}}}));
  const absl::Status status = BuildError(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("op #2 'add'"));
  EXPECT_THAT(status.message(), HasSubstr("'never_written'"));
  EXPECT_THAT(status.message(), HasSubstr("before any op writes it"));
}

TEST_F(InterpreterTest, UnfedFeedVariableIsReadBeforeWritten) {
  // The base program without x in the feed list: relu reads it unwritten.
  const absl::Status status = BuildError(Base(), /*feeds=*/{});
  EXPECT_THAT(status.message(), HasSubstr("op #1 'relu'"));
  EXPECT_THAT(status.message(), HasSubstr("'x'"));
}

TEST_F(InterpreterTest, UnknownFetch) {
  const absl::Status status = BuildError(Base(), {"x"}, {"y", "nope"});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("fetch 'nope'"));
}

TEST_F(InterpreterTest, FetchOfAVariableNothingWrites) {
  const absl::Status status = BuildError(Base(), {"x"}, {"z"});
  EXPECT_THAT(status.message(), HasSubstr("fetch 'z'"));
}

TEST_F(InterpreterTest, UnknownFeed) {
  const absl::Status status = BuildError(Base(), {"x", "nope"});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("feed 'nope'"));
}

TEST_F(InterpreterTest, FeedListedTwiceOrPersistable) {
  EXPECT_THAT(BuildError(Base(), {"x", "x"}).message(), HasSubstr("feed 'x' is listed twice"));
  EXPECT_THAT(BuildError(Base(), {"x", "w"}).message(), HasSubstr("feed 'w' is persistable"));
}

TEST_F(InterpreterTest, FeedVariableWrittenByAnOp) {
  ir::ProgramDesc p = Base();
  p.mutable_global_block().AppendOp(Op("relu", {{"X", {"y"}}}, {{"Out", {"x"}}}));
  const absl::Status status = BuildError(p);
  EXPECT_THAT(status.message(), HasSubstr("op #2 'relu'"));
  EXPECT_THAT(status.message(), HasSubstr("feed variable 'x'"));
}

TEST_F(InterpreterTest, PersistableReadBeforeItHasAValue) {
  ir::ProgramDesc p = Base();
  AddVar(p.mutable_global_block(), Var("w2", kSquare, /*persistable=*/true));
  p.mutable_global_block().AppendOp(Op("add", {{"X", {"y"}}, {"Y", {"w2"}}}, {{"Out", {"z"}}}));
  const absl::Status status = BuildError(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("persistable 'w2'"));
}

TEST_F(InterpreterTest, PersistableOfAnotherShapeInTheScope) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("w", Shape({2, 2}), /*persistable=*/true));
  AddVar(b, Var("y", Shape({2, 2})));
  b.AppendOp(Op("relu", {{"X", {"w"}}}, {{"Out", {"y"}}}));
  const absl::Status status = BuildError(p, {}, {"y"});
  EXPECT_THAT(status.message(), HasSubstr("persistable 'w'"));
  EXPECT_THAT(status.message(), HasSubstr("[2, 2]"));
}

TEST_F(InterpreterTest, BadStreamAttribute) {
  ir::ProgramDesc p = Base();
  p.mutable_global_block().AppendOp(
      Op("relu", {{"X", {"y"}}}, {{"Out", {"z"}}}, OnStream("compute:many")));
  const absl::Status status = BuildError(p, {"x"}, {"z"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("op #2 'relu'"));
  EXPECT_THAT(status.message(), HasSubstr("compute:many"));
}

TEST_F(InterpreterTest, StreamAttributeThatIsNotAString) {
  ir::ProgramDesc p = Base();
  p.mutable_global_block().AppendOp(
      Op("relu", {{"X", {"y"}}}, {{"Out", {"z"}}}, vm::AttrMap().Set("stream", int64_t{1})));
  const absl::Status status = BuildError(p, {"x"}, {"z"});
  EXPECT_THAT(status.message(), HasSubstr("op #2 'relu'"));
  EXPECT_THAT(status.message(), HasSubstr("'stream'"));
}

}  // namespace
}  // namespace sluice::framework::interpreter_test
