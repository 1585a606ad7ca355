// The in-place pass (framework/interpreter/inplace_pass.h): one program that reuses an input
// in place, and one variant per rule that breaks exactly that rule and reuses nothing (the
// stats say so); the peak-bytes bound it lowers; and random elementwise programs, run with the
// pass on and off, give the same bits on cpu and on two sim streams under the sync checker.
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "ep/device.h"
#include "ep/runtime.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/interpreter_options.h"
#include "framework/ir/program_desc.h"
#include "gtest/gtest.h"
#include "tests/framework/compiled_program_test_util.h"
#include "tests/framework/program_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::framework::interpreter_inplace_test {
namespace {

using program_test::AddVar;
using program_test::Fill;
using program_test::Filled;
using program_test::OnStream;
using program_test::Op;
using program_test::Var;

const Shape kSquare({4, 4});
const Shape kRow({4});

vm::AttrMap NoTranspose() {
  return vm::AttrMap().Set("transpose_x", int64_t{0}).Set("transpose_y", int64_t{0});
}

// Options for an executor whose ops stay ops (no subgraph compilation: the pass sees every
// op), with the in-place pass on or off.
ExecutorOptions Unfused(bool inplace, Device device = program_test::kCpu, int streams = 1) {
  ExecutorOptions options;
  options.interpreter.device = device;
  options.interpreter.compute_streams = streams;
  options.interpreter.compile_subgraphs = false;
  options.interpreter.inplace = inplace;
  return options;
}

// What each variant changes in the base program.
struct Variant {
  bool undeclared = false;        // b = softmax(a): softmax declares no pair in place
  bool later_reader = false;      // c = matmul(b, a): a outlives exp
  bool fetch_a = false;           // a is fetched
  bool persistable_a = false;     // a is persistable
  bool other_shape = false;       // b = add(a [4], y [4, 4]): a's shape is not b's
  bool b_written_before = false;  // b = fill_constant(...) first: exp is not b's first write
  bool other_stream = false;      // d = matmul(a, a) on compute:1, unordered with exp
};

// x (fed) -> relu -> a -> exp -> b -> matmul(b, b) -> c (fetched): a dies at exp, whose
// schema declares X -> Out, so b takes a's storage. relu's input is a feed and matmul
// declares nothing: the base reuses once.
ir::ProgramDesc Program(const Variant& v, std::vector<std::string>& fetches) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  const Shape a_shape = v.other_shape ? kRow : kSquare;
  AddVar(b, Var("x", a_shape));
  AddVar(b, Var("y", kSquare));
  AddVar(b, Var("a", a_shape, v.persistable_a));
  for (const char* name : {"b", "c", "d"}) AddVar(b, Var(name, kSquare));
  fetches = {"c"};
  b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  if (v.other_stream) {
    b.AppendOp(Op("matmul", {{"X", {"a"}}, {"Y", {"a"}}}, {{"Out", {"d"}}},
                  OnStream("compute:1", NoTranspose())));
    fetches.push_back("d");
  }
  if (v.b_written_before) b.AppendOp(Op("fill_constant", {}, {{"Out", {"b"}}}, Fill(kSquare, 1.0)));
  const vm::AttrMap here = v.other_stream ? OnStream("compute:0") : vm::AttrMap();
  if (v.undeclared) {
    b.AppendOp(Op("softmax", {{"X", {"a"}}}, {{"Out", {"b"}}}, here));
  } else if (v.other_shape) {
    b.AppendOp(Op("add", {{"X", {"a"}}, {"Y", {"y"}}}, {{"Out", {"b"}}}, here));
  } else {
    b.AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"b"}}}, here));
  }
  vm::AttrMap matmul = NoTranspose();
  if (v.other_stream) matmul.Set("stream", "compute:0");
  b.AppendOp(
      Op("matmul", {{"X", {"b"}}, {"Y", {v.later_reader ? "a" : "b"}}}, {{"Out", {"c"}}}, matmul));
  if (v.fetch_a) fetches.push_back("a");
  return p;
}

class InterpreterInPlaceTest : public ::testing::Test {
 protected:
  InterpreterInPlaceTest() : context_(program_test::NewContext(1, /*check_sync=*/true)) {}
  ~InterpreterInPlaceTest() override {
    EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0)
        << context_->vm()->sync_checker()->status().message();
  }

  // Runs the variant once (values checked against the pass off, bit for bit) and returns the
  // build's stats with the pass on.
  LoweringStats Run(const Variant& v, int streams = 1, Device device = program_test::kCpu) {
    std::vector<std::string> fetches;
    const ir::ProgramDesc program = Program(v, fetches);
    const Shape x_shape = v.other_shape ? kRow : kSquare;
    std::vector<float> x(static_cast<size_t>(x_shape.NumElements()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 1.5f;
    const Feeds feeds = {{"x", HostTensor::FromVector(x, x_shape)}, {"y", Filled(kSquare, 0.5f)}};
    LoweringStats on;
    std::vector<HostTensor> results[2];
    for (int inplace = 0; inplace < 2; ++inplace) {
      const ExecutorOptions options = Unfused(inplace == 1, device, streams);
      Executor executor(&context_->registry(), context_->vm(), options);
      Scope scope;
      absl::StatusOr<RunResult> result = executor.Run(program, feeds, fetches, &scope);
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) return on;
      results[inplace] = result->fetches;
      if (inplace == 1) on = executor.LastLowering().value();
    }
    EXPECT_EQ(results[0].size(), results[1].size());
    for (size_t f = 0; f < results[0].size() && f < results[1].size(); ++f) {
      EXPECT_TRUE(compiled_test::SameValues(results[0][f], results[1][f])) << "fetch " << f;
    }
    return on;
  }

  std::unique_ptr<eager::Context> context_;
};

TEST_F(InterpreterInPlaceTest, TheBaseProgramReusesItsDyingInput) {
  const LoweringStats s = Run({});
  EXPECT_EQ(s.inplace_reuses, 1);
  EXPECT_EQ(s.releases, 1);  // b's; a's storage went to b
}

// x -> relu -> a -> exp -> b -> tanh -> t -> reduce_sum -> c (fetched), 64-byte temporaries.
// Pass off (storage hand-off on): a and b are live together at exp (128 bytes), and t takes
// a's storage after its release. Pass on: b takes a's storage and t takes b's, so one buffer
// serves the chain; the peak is t and c together (64 + 4).
TEST_F(InterpreterInPlaceTest, AChainRunsOnOneBuffer) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* name : {"x", "a", "b", "t"}) AddVar(b, Var(name, kSquare));
  AddVar(b, Var("c", Shape()));
  b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  b.AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"b"}}}));
  b.AppendOp(Op("tanh", {{"X", {"b"}}}, {{"Out", {"t"}}}));
  b.AppendOp(Op("reduce_sum", {{"X", {"t"}}}, {{"Out", {"c"}}}));
  int64_t peak[2] = {0, 0};
  int64_t reuses[2] = {0, 0};
  std::vector<float> sums[2];
  for (int inplace = 0; inplace < 2; ++inplace) {
    const ExecutorOptions options = Unfused(inplace == 1);
    Executor executor(&context_->registry(), context_->vm(), options);
    Scope scope;
    absl::StatusOr<RunResult> result =
        executor.Run(p, {{"x", Filled(kSquare, 0.5f)}}, {"c"}, &scope);
    ASSERT_TRUE(result.ok()) << result.status();
    sums[inplace] = result->fetches[0].ToVector<float>();
    peak[inplace] = executor.LastLowering().value().peak_temporary_bytes;
    reuses[inplace] = executor.LastLowering().value().inplace_reuses;
  }
  EXPECT_EQ(sums[0], sums[1]);
  EXPECT_EQ(reuses[0], 0);
  EXPECT_EQ(reuses[1], 2);
  EXPECT_EQ(peak[0], 128);
  EXPECT_EQ(peak[1], 68);
}

TEST_F(InterpreterInPlaceTest, EachBrokenRuleLeavesNoReuse) {
  struct Case {
    const char* rule;
    Variant variant;
  };
  std::vector<Case> cases = {
      {"the pair is not declared (softmax)", {.undeclared = true}},
      {"the op is not the input's last reader", {.later_reader = true}},
      {"the input is fetched", {.fetch_a = true}},
      {"the input is persistable", {.persistable_a = true}},
      {"the shapes differ (broadcast add)", {.other_shape = true}},
      {"the op is not the output's first write", {.b_written_before = true}},
  };
  for (const Case& c : cases) {
    const LoweringStats s = Run(c.variant);
    EXPECT_EQ(s.inplace_reuses, 0) << c.rule;
  }
}

// a is read on two sim streams: by exp on compute:0 and by a matmul on compute:1 that exp
// does not wait for. exp is the last reader by program order but not on every stream, so it
// may not overwrite a. On one stream the same program reuses a (the matmul runs first).
TEST_F(InterpreterInPlaceTest, AnUnorderedReaderOnAnotherStreamLeavesNoReuse) {
  Variant v;
  v.other_stream = true;
  EXPECT_EQ(Run(v, 2, program_test::kSim).inplace_reuses, 0);
  std::vector<std::string> fetches;
  ir::ProgramDesc one_stream = Program(v, fetches);
  for (ir::OpDesc& op : one_stream.mutable_global_block().mutable_ops()) {
    op.attrs.Set("stream", "compute:0");
  }
  const ExecutorOptions options = Unfused(/*inplace=*/true, program_test::kSim);
  Executor executor(&context_->registry(), context_->vm(), options);
  Scope scope;
  const Feeds feeds = {{"x", Filled(kSquare, 1.0f)}, {"y", Filled(kSquare, 0.5f)}};
  ASSERT_TRUE(executor.Run(one_stream, feeds, fetches, &scope).ok());
  EXPECT_EQ(executor.LastLowering().value().inplace_reuses, 1);
}

// Both passes in one program: b2 and c take h2's and h3's storage in place, and h3 could
// take a1's released storage by a hand-off. h3 is a giver in place, so the hand-off must not
// rebind it (it did once: c kept h3's old blob, and a1's storage, handed to nobody, was
// never freed). After a run every released temporary's storage is back: the allocator holds
// the same bytes with the pass on as with it off.
TEST_F(InterpreterInPlaceTest, AHandOffNeverPartsAnInPlacePair) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* name : {"x", "w", "bias", "a1", "h2", "b2", "h3", "c", "out"}) {
    AddVar(b, Var(name, kSquare));
  }
  b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a1"}}}));
  b.AppendOp(Op("matmul", {{"X", {"a1"}}, {"Y", {"w"}}}, {{"Out", {"h2"}}}, NoTranspose()));
  b.AppendOp(Op("add", {{"X", {"h2"}}, {"Y", {"bias"}}}, {{"Out", {"b2"}}}));
  b.AppendOp(Op("matmul", {{"X", {"b2"}}, {"Y", {"w"}}}, {{"Out", {"h3"}}}, NoTranspose()));
  b.AppendOp(Op("add", {{"X", {"h3"}}, {"Y", {"bias"}}}, {{"Out", {"c"}}}));
  b.AppendOp(Op("matmul", {{"X", {"c"}}, {"Y", {"w"}}}, {{"Out", {"out"}}}, NoTranspose()));
  const Feeds feeds = {{"x", Filled(kSquare, 0.5f)},
                       {"w", Filled(kSquare, 0.25f)},
                       {"bias", Filled(kSquare, -0.125f)}};
  Allocator& allocator = context_->runtime()->GetDevice(Device::Cpu()).value()->allocator();
  int64_t held[2] = {0, 0};
  std::vector<HostTensor> fetched[2];
  for (int inplace = 0; inplace < 2; ++inplace) {
    const ExecutorOptions options = Unfused(inplace == 1);
    Executor executor(&context_->registry(), context_->vm(), options);
    Scope scope;
    ASSERT_TRUE(context_->Sync().ok());
    const int64_t before = allocator.stats().bytes_in_use;
    absl::StatusOr<RunResult> result = executor.Run(p, feeds, {"out"}, &scope);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(context_->Sync().ok());
    held[inplace] = allocator.stats().bytes_in_use - before;
    fetched[inplace] = result->fetches;
    const LoweringStats s = executor.LastLowering().value();
    if (inplace == 1) {
      EXPECT_EQ(s.inplace_reuses, 2);
    } else {
      EXPECT_GE(s.storage_handoffs, 1);
    }
  }
  EXPECT_EQ(held[1], held[0]);
  ASSERT_EQ(fetched[0].size(), 1u);
  ASSERT_EQ(fetched[1].size(), 1u);
  EXPECT_TRUE(compiled_test::SameValues(fetched[0][0], fetched[1][0]));
}

// Random elementwise programs (broadcasting, overwritten variables, two streams) give the
// same bits with the pass on and off, and the pass does reuse storage in them.
TEST_F(InterpreterInPlaceTest, RandomProgramsMatchWithThePassOff) {
  int64_t reuses = 0;
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const bool sim = seed % 2 == 0;
    const compiled_test::RandomElementwiseProgram r =
        compiled_test::MakeRandomElementwiseProgram(seed, /*on_streams=*/sim);
    std::vector<std::vector<HostTensor>> results[2];
    for (int inplace = 0; inplace < 2; ++inplace) {
      ExecutorOptions options =
          Unfused(inplace == 1, sim ? program_test::kSim : program_test::kCpu, sim ? 2 : 1);
      options.interpreter.compile_subgraphs = seed % 3 == 0;
      Executor executor(&context_->registry(), context_->vm(), options);
      Scope scope;
      ASSERT_TRUE(executor.Run(r.startup, {}, {}, &scope).ok());
      for (int step = 0; step < 2; ++step) {
        absl::StatusOr<RunResult> result = executor.Run(r.main, r.feeds, r.fetches, &scope);
        ASSERT_TRUE(result.ok()) << result.status();
        results[inplace].push_back(result->fetches);
      }
      if (inplace == 1) reuses += executor.LastLowering().value().inplace_reuses;
    }
    for (size_t step = 0; step < 2; ++step) {
      for (size_t f = 0; f < r.fetches.size(); ++f) {
        EXPECT_TRUE(compiled_test::SameValues(results[0][step][f], results[1][step][f]))
            << "fetch '" << r.fetches[f] << "' step " << step;
      }
    }
  }
  EXPECT_GT(reuses, 10);
}

}  // namespace
}  // namespace sluice::framework::interpreter_inplace_test
