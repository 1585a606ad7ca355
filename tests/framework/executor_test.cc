// Executor: feeds refused before anything runs (scope and persistable values untouched), the
// interpreter cache and its scope bindings, prepared runs, RunAsync with callbacks and step
// ids, cancellation of a long run on sim (made deterministic by a test op that holds its
// worker until released), per-step statistics, Chrome trace output, and kernel errors at run
// time (the failing run's status, and what it leaves in persistable variables).
#include "framework/executor/executor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/stream_id.h"
#include "framework/eager/context.h"
#include "framework/interpreter/interpreter.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/op_registry.h"
#include "ops/op_schema.h"
#include "ops/standard_ops.h"
#include "tests/framework/program_test_util.h"
#include "tests/read_file.h"
#include "vm/kernel.h"
#include "vm/sync_checker.h"

namespace sluice::framework::executor_test {
namespace {

using program_test::AddVar;
using program_test::Fill;
using program_test::Filled;
using program_test::kCpu;
using program_test::kSim;
using program_test::OnStream;
using program_test::Op;
using program_test::ScaleBy;
using program_test::Var;
using ::sluice::testing::ReadFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Shape kSquare({4, 4});

// --- Programs. ---

// startup: w = 0.5.
ir::ProgramDesc Startup(const Shape& shape = kSquare, double value = 0.5) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("w", shape, /*persistable=*/true));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"w"}}}, Fill(shape, value)));
  return p;
}

// main: w += 1 (through a temporary); y = x + w (the new w).
ir::ProgramDesc CounterMain() {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("x", kSquare));
  AddVar(b, Var("w", kSquare, /*persistable=*/true));
  AddVar(b, Var("t", kSquare));
  AddVar(b, Var("y", kSquare));
  b.AppendOp(Op("scale", {{"X", {"w"}}}, {{"Out", {"t"}}}, ScaleBy(1.0, 1.0)));
  b.AppendOp(Op("assign", {{"X", {"t"}}}, {{"Out", {"w"}}}));
  b.AppendOp(Op("add", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"y"}}}));
  return p;
}

// Reads w back: v = assign(w), fetched.
ir::ProgramDesc Peek(const Shape& shape = kSquare) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("w", shape, /*persistable=*/true));
  AddVar(b, Var("v", shape));
  b.AppendOp(Op("assign", {{"X", {"w"}}}, {{"Out", {"v"}}}));
  return p;
}

// x → relu → a → exp → b → scale(2) → c.
ir::ProgramDesc Chain() {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* name : {"x", "a", "b", "c"}) AddVar(b, Var(name, kSquare));
  b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  b.AppendOp(Op("exp", {{"X", {"a"}}}, {{"Out", {"b"}}}));
  b.AppendOp(Op("scale", {{"X", {"b"}}}, {{"Out", {"c"}}}, ScaleBy(2.0)));
  return p;
}

std::vector<float> Ramp(int n) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = std::cos(0.45f * i) - 0.3f;
  return x;
}

float ChainValue(float x) { return 2 * std::exp(std::max(x, 0.0f)); }

// --- A test op that holds its worker: the cancellation point made deterministic. ---

// One use: the first Launch after `armed` is set signals `started` and blocks (in Launch, on
// the VM's worker, so no later step of the sequence is launched) until `release`.
struct GateControl {
  absl::Mutex mu;
  bool armed ABSL_GUARDED_BY(mu) = false;
  absl::Notification started;
  absl::Notification release;
};

class GateKernel final : public vm::OpKernel {
 public:
  explicit GateKernel(GateControl* control) : control_(control) {}
  absl::string_view name() const override { return "test_gate"; }
  absl::Status Launch(vm::KernelContext&) const override {
    {
      absl::MutexLock lock(&control_->mu);
      if (!control_->armed) return absl::OkStatus();
      control_->armed = false;
    }
    control_->started.Notify();
    control_->release.WaitForNotification();
    return absl::OkStatus();
  }

 private:
  GateControl* const control_;
};

// The standard ops plus test_gate (X -> Out of X's meta; writes nothing) on sim, f32.
std::unique_ptr<ops::OpRegistry> RegistryWithGate(GateControl* control) {
  auto registry = std::make_unique<ops::OpRegistry>();
  EXPECT_TRUE(ops::RegisterStandardOps(registry.get()).ok());
  EXPECT_TRUE(
      registry
          ->RegisterSchema(ops::OpSchema("test_gate")
                               .Input("X")
                               .Output("Out")
                               .Infer([](const ops::InferContext& ctx) {
                                 return absl::StatusOr<std::vector<std::vector<ops::TensorMeta>>>(
                                     std::vector<std::vector<ops::TensorMeta>>{{ctx.input(0)}});
                               }))
          .ok());
  EXPECT_TRUE(registry
                  ->RegisterKernel("test_gate", DeviceType::kSim, DataType::kF32,
                                   std::make_unique<GateKernel>(control))
                  .ok());
  return registry;
}

// --- Fixture. ---

class ExecutorTest : public ::testing::Test {
 protected:
  // `registry`: the context's standard one when null.
  // Options that run every op as its own kernel (no subgraph compilation), for tests that
  // count ops.
  static ExecutorOptions Unfused() {
    ExecutorOptions options;
    options.interpreter.compile_subgraphs = false;
    return options;
  }
  void Init(Device device = kCpu, ExecutorOptions options = {},
            const ops::OpRegistry* registry = nullptr) {
    context_ = program_test::NewContext(/*sim_devices=*/1, /*check_sync=*/true);
    ASSERT_NE(context_, nullptr);
    options.interpreter.device = device;
    executor_ = std::make_unique<Executor>(registry != nullptr ? registry : &context_->registry(),
                                           context_->vm(), options);
  }

  // A good run, a failing run, a good run and another program; see KernelError* below.
  void KernelErrorScenario(Device device);
  // A failing run, then a good one, on a persistable the failing op feeds.
  void PoisonScenario(Device device);

  std::vector<float> PeekW(Scope* scope, const Shape& shape = kSquare) {
    absl::StatusOr<RunResult> result = executor_->Run(Peek(shape), {}, {"v"}, scope);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok() || result->fetches.size() != 1) return {};
    return result->fetches[0].ToVector<float>();
  }

  void TearDown() override {
    executor_.reset();
    if (context_ != nullptr) {
      EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0);
    }
  }

  std::unique_ptr<ops::OpRegistry> registry_;  // a test registry, outliving the executor
  std::unique_ptr<eager::Context> context_;
  std::unique_ptr<Executor> executor_;
};

// --- Feeds refused before anything runs. ---

TEST_F(ExecutorTest, BadFeedsAreRefusedAndChangeNothing) {
  Init();
  Scope scope;
  ASSERT_TRUE(executor_->Run(Startup(), {}, {}, &scope).ok());
  const std::vector<std::string> names = scope.LocalNames();
  ASSERT_THAT(names, ElementsAre("w"));
  ASSERT_EQ(PeekW(&scope), std::vector<float>(16, 0.5f));
  const int64_t misses = executor_->cache_misses();

  const ir::ProgramDesc main = CounterMain();
  const HostTensor good = Filled(kSquare, 1.0f);
  HostTensor short_bytes = good;
  short_bytes.bytes.resize(short_bytes.bytes.size() - 4);
  struct Case {
    const char* what;
    Feeds feeds;
    std::vector<std::string> must_mention;
  };
  const std::vector<Case> cases = {
      {"wrong shape", {{"x", Filled(Shape({2, 8}), 1.0f)}}, {"feed 'x'", "[2, 8]", "[4, 4]"}},
      {"wrong dtype",
       {{"x", HostTensor::FromVector(std::vector<int32_t>(16, 1), kSquare)}},
       {"feed 'x'", "i32", "f32"}},
      {"wrong byte count", {{"x", short_bytes}}, {"feed 'x'", "bytes"}},
      {"missing feed", {}, {"'x'"}},
      {"extra feed not in the program",
       {{"x", good}, {"nope", good}},
       {"feed 'nope'", "not a variable"}},
      {"extra feed the program writes", {{"x", good}, {"y", good}}, {"'y'"}},
      {"persistable fed", {{"x", good}, {"w", good}}, {"feed 'w'", "persistable"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<RunResult> result = executor_->Run(main, c.feeds, {"y"}, &scope);
    ASSERT_FALSE(result.ok());
    for (const std::string& text : c.must_mention) {
      EXPECT_THAT(result.status().message(), HasSubstr(text));
    }
    EXPECT_EQ(scope.LocalNames(), names);
    EXPECT_EQ(PeekW(&scope), std::vector<float>(16, 0.5f)) << "a refused run changed w";
  }
  // The peek program was built once; no refused run left an interpreter behind.
  EXPECT_EQ(executor_->cache_misses(), misses);

  // The control: a good run does change w.
  absl::StatusOr<RunResult> result = executor_->Run(main, {{"x", good}}, {"y"}, &scope);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->fetches[0].ToVector<float>(), std::vector<float>(16, 2.5f));
  EXPECT_EQ(PeekW(&scope), std::vector<float>(16, 1.5f));
}

TEST_F(ExecutorTest, UninitializedPersistableIsRefused) {
  Init();
  Scope scope;
  absl::StatusOr<RunResult> result =
      executor_->Run(CounterMain(), {{"x", Filled(kSquare, 1.0f)}}, {"y"}, &scope);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("persistable 'w'"));
  EXPECT_TRUE(scope.LocalNames().empty());
}

// --- The interpreter cache. ---

TEST_F(ExecutorTest, CacheKeyIsProgramFeedsFetchesAndScope) {
  Init();
  Scope scope, other_scope;
  const Feeds feeds = {{"x", HostTensor::FromVector(Ramp(16), kSquare)}};
  auto run = [&](const ir::ProgramDesc& p, const std::vector<std::string>& fetches, Scope* s) {
    absl::StatusOr<RunResult> result = executor_->Run(p, feeds, fetches, s);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->stats.cache_hit : false;
  };
  auto counts = [&] { return std::make_pair(executor_->cache_misses(), executor_->cache_hits()); };
  EXPECT_EQ(counts(), std::make_pair(int64_t{0}, int64_t{0}));
  EXPECT_FALSE(run(Chain(), {"c"}, &scope));
  EXPECT_TRUE(run(Chain(), {"c"}, &scope));
  const ir::ProgramDesc copy = Chain();  // built again: equal content, equal hash
  EXPECT_TRUE(run(copy, {"c"}, &scope));
  EXPECT_EQ(counts(), std::make_pair(int64_t{1}, int64_t{2}));

  EXPECT_FALSE(run(Chain(), {"b"}, &scope));        // other fetches
  EXPECT_FALSE(run(Chain(), {"b", "c"}, &scope));   // more fetches
  EXPECT_FALSE(run(Chain(), {"c"}, &other_scope));  // other scope
  ir::ProgramDesc longer = Chain();                 // other program
  AddVar(longer.mutable_global_block(), Var("d", kSquare));
  longer.mutable_global_block().AppendOp(Op("relu", {{"X", {"c"}}}, {{"Out", {"d"}}}));
  EXPECT_FALSE(run(longer, {"c"}, &scope));
  EXPECT_EQ(counts(), std::make_pair(int64_t{5}, int64_t{2}));
  EXPECT_TRUE(run(Chain(), {"b"}, &scope));
  EXPECT_TRUE(run(Chain(), {"c"}, &other_scope));
  EXPECT_TRUE(run(longer, {"c"}, &scope));
  EXPECT_EQ(counts(), std::make_pair(int64_t{5}, int64_t{5}));
}

TEST_F(ExecutorTest, CacheKeyIncludesTheFeedNames) {
  Init();
  Scope scope;
  // z = x - y, fed both ways round; and a program where y is computed instead of fed.
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* name : {"x", "y", "z"}) AddVar(b, Var(name, kSquare));
  b.AppendOp(Op("sub", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"z"}}}));
  const HostTensor x = HostTensor::FromVector(Ramp(16), kSquare);
  const HostTensor y = Filled(kSquare, 0.25f);
  absl::StatusOr<RunResult> xy = executor_->Run(p, {{"x", x}, {"y", y}}, {"z"}, &scope);
  ASSERT_TRUE(xy.ok()) << xy.status();
  EXPECT_FALSE(xy->stats.cache_hit);
  absl::StatusOr<RunResult> again = executor_->Run(p, {{"x", x}, {"y", y}}, {"z"}, &scope);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->stats.cache_hit);
  // The same feeds in another order give the same numbers, whichever way the cache keys.
  absl::StatusOr<RunResult> yx = executor_->Run(p, {{"y", y}, {"x", x}}, {"z"}, &scope);
  ASSERT_TRUE(yx.ok()) << yx.status();
  EXPECT_EQ(yx->fetches[0].bytes, xy->fetches[0].bytes);
  const std::vector<float> z = xy->fetches[0].ToVector<float>();
  const std::vector<float> xs = Ramp(16);
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(z[i], xs[i] - 0.25f);
  EXPECT_EQ(executor_->cache_misses() + executor_->cache_hits(), 3);

  // Fewer feeds (y missing) is another key, and here a build error.
  absl::StatusOr<RunResult> only_x = executor_->Run(p, {{"x", x}}, {"z"}, &scope);
  ASSERT_FALSE(only_x.ok());
  EXPECT_THAT(only_x.status().message(), HasSubstr("'y'"));
}

TEST_F(ExecutorTest, LeastRecentlyUsedInterpreterIsDropped) {
  ExecutorOptions options;
  options.max_cached_interpreters = 1;
  Init(kCpu, options);
  Scope scope;
  const Feeds feeds = {{"x", HostTensor::FromVector(Ramp(16), kSquare)}};
  for (const char* fetch : {"c", "b", "c", "c"}) {
    ASSERT_TRUE(executor_->Run(Chain(), feeds, {fetch}, &scope).ok());
  }
  EXPECT_EQ(executor_->cache_misses(), 3);
  EXPECT_EQ(executor_->cache_hits(), 1);
}

// A cpu blob holding `values` (for putting a persistable into a scope by hand).
vm::BlobRef HostBlob(eager::Context& context, const std::string& name,
                     const std::vector<float>& values, const Shape& shape) {
  absl::StatusOr<vm::Stream*> stream =
      context.vm()->GetStream(StreamKey{kCpu, StreamType::kCompute, 0});
  EXPECT_TRUE(stream.ok());
  absl::StatusOr<vm::BlobRef> blob = context.vm()->NewBlob(*stream, DataType::kF32, shape, name);
  EXPECT_TRUE(blob.ok()) << blob.status();
  std::memcpy((*blob)->storage()->data(), values.data(), values.size() * sizeof(float));
  return *blob;
}

TEST_F(ExecutorTest, PersistableReplacedInTheScopeIsWhatTheNextRunReads) {
  // Loading parameters into a scope between runs (Scope::Set) must be seen by the next run
  // of an already-built program.
  Init();
  Scope scope;
  ASSERT_TRUE(executor_->Run(Startup(), {}, {}, &scope).ok());
  ASSERT_EQ(PeekW(&scope), std::vector<float>(16, 0.5f));
  scope.Set("w", HostBlob(*context_, "w", std::vector<float>(16, 7.0f), kSquare));
  EXPECT_EQ(PeekW(&scope), std::vector<float>(16, 7.0f))
      << "the cached interpreter still reads the blob the scope held when it was built";
}

TEST_F(ExecutorTest, PersistableErasedFromTheScopeIsRefused) {
  Init();
  Scope scope;
  ASSERT_TRUE(executor_->Run(Startup(), {}, {}, &scope).ok());
  ASSERT_EQ(PeekW(&scope), std::vector<float>(16, 0.5f));
  ASSERT_TRUE(scope.Erase("w"));
  absl::StatusOr<RunResult> result = executor_->Run(Peek(), {}, {"v"}, &scope);
  EXPECT_FALSE(result.ok()) << "ran on a persistable no longer in the scope";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(scope.LocalNames().empty());
}

TEST_F(ExecutorTest, ScopeReusingTheAddressOfADestroyedOneGetsItsOwnVariables) {
  // Scopes made one after another in the same storage (as a stack Scope in a loop often
  // is): the second must not run on the first one's variables.
  Init();
  alignas(Scope) unsigned char storage[sizeof(Scope)];
  Scope* first = new (storage) Scope();
  ASSERT_TRUE(executor_->Run(Startup(Shape({4, 4}), 0.5), {}, {}, first).ok());
  ASSERT_EQ(PeekW(first), std::vector<float>(16, 0.5f));
  first->~Scope();
  Scope* second = new (storage) Scope();
  ASSERT_EQ(second, first);
  // The second scope has no w: reading it is refused ...
  absl::StatusOr<RunResult> early = executor_->Run(Peek(), {}, {"v"}, second);
  EXPECT_FALSE(early.ok()) << "read the destroyed scope's w";
  // ... and its own startup run puts w into it.
  ASSERT_TRUE(executor_->Run(Startup(Shape({4, 4}), 0.5), {}, {}, second).ok());
  EXPECT_THAT(second->LocalNames(), ElementsAre("w"));
  second->~Scope();
}

TEST_F(ExecutorTest, RefusedUninitializedPersistableLeavesTheScopeUnchanged) {
  // `w` is in the scope without a value (a build created it lazily; nothing wrote it). A
  // program that reads w and would create a new persistable `q` is refused; q must not
  // appear in the scope.
  Init();
  Scope scope;
  ASSERT_TRUE(
      Interpreter::Build(Startup(), &context_->registry(), context_->vm(), &scope, {}, {}).ok());
  ASSERT_THAT(scope.LocalNames(), ElementsAre("w"));
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("w", kSquare, /*persistable=*/true));
  AddVar(b, Var("q", kSquare, /*persistable=*/true));
  b.AppendOp(Op("assign", {{"X", {"w"}}}, {{"Out", {"q"}}}));
  absl::StatusOr<RunResult> result = executor_->Run(p, {}, {}, &scope);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("persistable 'w'"));
  EXPECT_THAT(scope.LocalNames(), ElementsAre("w")) << "a refused run added q";
}

TEST_F(ExecutorTest, FetchedPersistableWithoutAValueIsRefusedBeforeRunning) {
  // A program with no ops that fetches a persistable: on cpu nothing reads it, but the
  // fetch does.
  Init();
  Scope scope;
  ir::ProgramDesc p;
  AddVar(p.mutable_global_block(), Var("w", kSquare, /*persistable=*/true));
  absl::StatusOr<RunResult> result = executor_->Run(p, {}, {"w"}, &scope);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("'w'"));
  EXPECT_TRUE(scope.LocalNames().empty()) << "a refused run created w";
}

TEST_F(ExecutorTest, ProgramWithoutOpsFetchesPersistables) {
  for (Device device : {kCpu, kSim}) {
    SCOPED_TRACE(device.ToString());
    Init(device);
    Scope scope;
    ASSERT_TRUE(executor_->Run(Startup(kSquare, 1.25), {}, {}, &scope).ok());
    ir::ProgramDesc p;
    AddVar(p.mutable_global_block(), Var("w", kSquare, /*persistable=*/true));
    absl::StatusOr<RunResult> result = executor_->Run(p, {}, {"w"}, &scope);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->fetches[0].ToVector<float>(), std::vector<float>(16, 1.25f));
    executor_.reset();
  }
}

TEST_F(ExecutorTest, PreparedRunOutlivesItsCacheEntry) {
  ExecutorOptions options;
  options.max_cached_interpreters = 1;
  Init(kSim, options);
  Scope scope;
  ASSERT_TRUE(executor_->Run(Startup(), {}, {}, &scope).ok());
  absl::StatusOr<PreparedRun> prepared = executor_->Prepare(CounterMain(), {"x"}, {"y"}, &scope);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_THAT(prepared->feed_names(), ElementsAre("x"));
  EXPECT_THAT(prepared->fetch_names(), ElementsAre("y"));
  EXPECT_EQ(prepared->lowering().inserted_copies, 2);  // x in, y out
  const int64_t misses = executor_->cache_misses();
  // Another program evicts the prepared one from the one-entry cache.
  ASSERT_TRUE(executor_->Run(Chain(), {{"x", Filled(kSquare, 1.0f)}}, {"c"}, &scope).ok());
  for (int run = 0; run < 3; ++run) {
    absl::StatusOr<RunResult> result = executor_->Run(*prepared, {{"x", Filled(kSquare, 2.0f)}});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result->stats.cache_hit);
    EXPECT_EQ(result->fetches[0].ToVector<float>(), std::vector<float>(16, 2.0f + 1.5f + run));
  }
  EXPECT_EQ(executor_->cache_misses(), misses + 1);  // only Chain was built
  // Feeds must name exactly the prepared feeds; a refused run changes nothing.
  EXPECT_FALSE(executor_->Run(*prepared, {}).ok());
  EXPECT_FALSE(
      executor_->Run(*prepared, {{"x", Filled(kSquare, 2.0f)}, {"t", Filled(kSquare, 2.0f)}}).ok());
  EXPECT_FALSE(executor_->Run(*prepared, {{"x", Filled(Shape({16}), 2.0f)}}).ok());
  EXPECT_EQ(PeekW(&scope), std::vector<float>(16, 3.5f));
  // Prepare reports build errors like Run.
  absl::StatusOr<PreparedRun> bad = executor_->Prepare(CounterMain(), {"x"}, {"nope"}, &scope);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("fetch 'nope'"));
}

// --- RunAsync. ---

TEST_F(ExecutorTest, RunAsyncDeliversEachResultOnceWithConsecutiveSteps) {
  Init(kSim);
  Scope scope;
  ASSERT_TRUE(executor_->Run(Startup(), {}, {}, &scope).ok());  // step 1

  absl::Mutex mu;
  std::map<int64_t, int> calls;  // step -> callback calls
  std::map<int64_t, float> first_value;
  auto callback = [&](const absl::StatusOr<RunResult>& result) {
    absl::MutexLock lock(&mu);
    if (!result.ok()) {
      ADD_FAILURE() << result.status();
      return;
    }
    ++calls[result->stats.step];
    first_value[result->stats.step] = result->fetches[0].ToVector<float>()[0];
  };
  const Feeds feeds = {{"x", Filled(kSquare, 10.0f)}};
  std::vector<std::shared_ptr<RunHandle>> handles;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<std::shared_ptr<RunHandle>> handle =
        executor_->RunAsync(CounterMain(), feeds, {"y"}, &scope, callback);
    ASSERT_TRUE(handle.ok()) << handle.status();
    handles.push_back(*handle);
    if (i == 1) {
      // A run refused before submission: error here, no callback, no step id used.
      absl::StatusOr<std::shared_ptr<RunHandle>> refused =
          executor_->RunAsync(CounterMain(), {}, {"y"}, &scope, callback);
      EXPECT_FALSE(refused.ok());
    }
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    EXPECT_EQ(handles[i]->step(), 2 + static_cast<int64_t>(i));
    const absl::StatusOr<RunResult>& result = handles[i]->Wait();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(handles[i]->done());
    EXPECT_EQ(result->stats.step, handles[i]->step());
    // The callback returned before Wait did.
    absl::MutexLock lock(&mu);
    EXPECT_EQ(calls[handles[i]->step()], 1);
    // w was 0.5 and grows by one per run, in submission order.
    EXPECT_FLOAT_EQ(first_value[handles[i]->step()], 10.0f + 0.5f + 1.0f + i);
  }
  absl::MutexLock lock(&mu);
  EXPECT_EQ(calls.size(), 4u);
}

TEST_F(ExecutorTest, WaitIsRepeatableAndCancelAfterCompletionIsHarmless) {
  Init();
  Scope scope;
  absl::StatusOr<std::shared_ptr<RunHandle>> handle = executor_->RunAsync(
      Chain(), {{"x", HostTensor::FromVector(Ramp(16), kSquare)}}, {"c"}, &scope);
  ASSERT_TRUE(handle.ok());
  ASSERT_TRUE((*handle)->Wait().ok());
  (*handle)->Cancel();
  const absl::StatusOr<RunResult>& result = (*handle)->Wait();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->stats.cancelled);
  EXPECT_FLOAT_EQ(result->fetches[0].ToVector<float>()[3], ChainValue(Ramp(16)[3]));
}

// --- Cancel. ---

// On sim: w += 1 `before` times, the gate, w += 1 `after` times, then y = w (fetched).
ir::ProgramDesc GatedCounter(const Shape& shape, int before, int after) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("w", shape, /*persistable=*/true));
  AddVar(b, Var("g", shape));
  AddVar(b, Var("y", shape));
  for (int i = 0; i < before; ++i) {
    b.AppendOp(Op("scale", {{"X", {"w"}}}, {{"Out", {"w"}}}, ScaleBy(1.0, 1.0)));
  }
  b.AppendOp(Op("test_gate", {{"X", {"w"}}}, {{"Out", {"g"}}}));
  for (int i = 0; i < after; ++i) {
    b.AppendOp(Op("scale", {{"X", {"w"}}}, {{"Out", {"w"}}}, ScaleBy(1.0, 1.0)));
  }
  b.AppendOp(Op("assign", {{"X", {"w"}}}, {{"Out", {"y"}}}));
  return p;
}

TEST_F(ExecutorTest, CancelledRunStopsAndTheNextRunSucceeds) {
  GateControl gate;
  registry_ = RegistryWithGate(&gate);
  Init(kSim, {}, registry_.get());
  Executor& executor = *executor_;
  Scope scope;
  const Shape shape({256});
  constexpr int kBefore = 5, kAfter = 2000;
  ASSERT_TRUE(executor.Run(Startup(shape, 0.0), {}, {}, &scope).ok());
  const ir::ProgramDesc main = GatedCounter(shape, kBefore, kAfter);
  auto peek = [&]() -> std::vector<float> {
    absl::StatusOr<RunResult> r = executor.Run(Peek(shape), {}, {"v"}, &scope);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->fetches[0].ToVector<float>() : std::vector<float>();
  };

  // A full run (the gate is open): every op runs.
  absl::StatusOr<RunResult> full = executor.Run(main, {}, {"y"}, &scope);
  ASSERT_TRUE(full.ok()) << full.status();
  const LoweringStats lowering = executor.LastLowering().value();
  const int64_t total = lowering.ops;
  EXPECT_EQ(total, kBefore + 1 + kAfter + 1 + 1);  // + assign + the d2h copy of y
  EXPECT_EQ(full->stats.ops_run, total);
  EXPECT_EQ(full->fetches[0].ToVector<float>(), std::vector<float>(256, kBefore + kAfter));

  // The gated run: cancelled while the gate holds the sim worker.
  {
    absl::MutexLock lock(&gate.mu);
    gate.armed = true;
  }
  int callbacks = 0;
  absl::StatusOr<std::shared_ptr<RunHandle>> handle = executor.RunAsync(
      main, {}, {"y"}, &scope, [&](const absl::StatusOr<RunResult>&) { ++callbacks; });
  ASSERT_TRUE(handle.ok()) << handle.status();
  gate.started.WaitForNotification();
  (*handle)->Cancel();
  gate.release.Notify();
  const absl::StatusOr<RunResult>& cancelled = (*handle)->Wait();
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  // The ops before the gate and the gate itself were launched; nothing after.
  EXPECT_THAT(cancelled.status().message(), HasSubstr(absl::StrCat("after ", kBefore + 1, " ops")));
  EXPECT_EQ(callbacks, 1);

  // What the finished ops wrote stays: w = the full run's value + kBefore.
  const float after_cancel = kBefore + kAfter + kBefore;
  EXPECT_EQ(peek(), std::vector<float>(256, after_cancel));

  // The next run of the same program runs everything.
  absl::StatusOr<RunResult> next = executor.Run(main, {}, {"y"}, &scope);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->stats.cancelled);
  EXPECT_TRUE(next->stats.cache_hit);
  EXPECT_EQ(next->stats.ops_run, total);
  EXPECT_EQ(next->fetches[0].ToVector<float>(),
            std::vector<float>(256, after_cancel + kBefore + kAfter));
  EXPECT_EQ(peek(), std::vector<float>(256, after_cancel + kBefore + kAfter));
  executor_.reset();  // before the gate goes
}

// --- Per-step statistics and traces. ---

// On sim: y = relu(x @ w) + x on compute:0; z = exp(x) * 2 on compute:1.
ir::ProgramDesc TwoStreamMain() {
  ir::ProgramDesc p;
  ir::BlockDesc& m = p.mutable_global_block();
  AddVar(m, Var("x", kSquare));
  AddVar(m, Var("w", kSquare, /*persistable=*/true));
  for (const char* name : {"xw", "r", "y", "e", "z"}) AddVar(m, Var(name, kSquare));
  m.AppendOp(Op("matmul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"xw"}}}));
  m.AppendOp(Op("relu", {{"X", {"xw"}}}, {{"Out", {"r"}}}));
  m.AppendOp(Op("add", {{"X", {"r"}}, {"Y", {"x"}}}, {{"Out", {"y"}}}));
  m.AppendOp(Op("exp", {{"X", {"x"}}}, {{"Out", {"e"}}}, OnStream("compute:1")));
  m.AppendOp(Op("scale", {{"X", {"e"}}}, {{"Out", {"z"}}}, OnStream("compute:1", ScaleBy(2.0))));
  return p;
}

TEST_F(ExecutorTest, StepStatsMatchTheLowering) {
  Init(kSim, Unfused());  // counts one op per block op
  Scope scope;
  absl::StatusOr<RunResult> startup = executor_->Run(Startup(), {}, {}, &scope);
  ASSERT_TRUE(startup.ok()) << startup.status();
  EXPECT_EQ(startup->stats.step, 1);
  const Feeds feeds = {{"x", HostTensor::FromVector(Ramp(16), kSquare)}};
  for (int run = 0; run < 2; ++run) {
    absl::StatusOr<RunResult> result = executor_->Run(TwoStreamMain(), feeds, {"y", "z"}, &scope);
    ASSERT_TRUE(result.ok()) << result.status();
    const LoweringStats lowering = executor_->LastLowering().value();
    const StepStats& s = result->stats;
    EXPECT_EQ(s.step, 2 + run);
    EXPECT_EQ(lowering.ops, 5 + 3);  // + h2d of x, d2h of y and z
    EXPECT_EQ(lowering.inserted_copies, 3);
    EXPECT_EQ(s.ops_run, lowering.ops);
    EXPECT_EQ(s.instructions, lowering.instructions + 1);  // + the completion barrier
    EXPECT_EQ(s.syncs, lowering.stream_waits + lowering.record_events);
    EXPECT_GT(s.syncs, 0);
    EXPECT_GT(s.wall_ns, 0);
    EXPECT_GT(s.peak_bytes, 0);
    EXPECT_FALSE(s.cancelled);
    EXPECT_EQ(s.cache_hit, run == 1);
    EXPECT_THAT(s.ToString(), HasSubstr(absl::StrCat("step ", s.step)));
    const std::vector<float> x = Ramp(16);
    const std::vector<float> y = result->fetches[0].ToVector<float>();
    const std::vector<float> z = result->fetches[1].ToVector<float>();
    for (int i = 0; i < 4; ++i) {
      float row = 0;
      for (int k = 0; k < 4; ++k) row += x[i * 4 + k] * 0.5f;
      for (int j = 0; j < 4; ++j) {
        EXPECT_NEAR(y[i * 4 + j], std::max(row, 0.0f) + x[i * 4 + j], 1e-5);
        EXPECT_NEAR(z[i * 4 + j], 2 * std::exp(x[i * 4 + j]), 1e-5);
      }
    }
  }
}

TEST_F(ExecutorTest, LastLoweringBeforeAnyRunIsAnError) {
  Init();
  EXPECT_EQ(executor_->LastLowering().status().code(), absl::StatusCode::kFailedPrecondition);
}

// Minimal JSON well-formedness: brackets balance outside strings, strings close.
bool BalancedJson(const std::string& text) {
  std::vector<char> stack;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      stack.push_back(c);
    } else if (c == '}' || c == ']') {
      if (stack.empty() || stack.back() != (c == '}' ? '{' : '[')) return false;
      stack.pop_back();
    }
  }
  return !in_string && stack.empty();
}

int CountOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

TEST_F(ExecutorTest, TraceHasOneSlicePerOpAndOneRowPerStream) {
  Init(kSim, Unfused());  // counts one op per block op
  Scope scope;
  ASSERT_TRUE(executor_->Run(Startup(), {}, {}, &scope).ok());
  const std::string path = ::testing::TempDir() + "/executor_test_trace.json";
  std::remove(path.c_str());
  RunOptions run_options;
  run_options.trace_path = path;
  absl::StatusOr<RunResult> result =
      executor_->Run(TwoStreamMain(), {{"x", HostTensor::FromVector(Ramp(16), kSquare)}},
                     {"y", "z"}, &scope, run_options);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string json = ReadFile(path);
  ASSERT_FALSE(json.empty()) << path;
  EXPECT_EQ(json.front(), '{');
  EXPECT_TRUE(BalancedJson(json)) << json;
  EXPECT_EQ(CountOf(json, "\"ph\":\"X\""), result->stats.ops_run);
  const std::map<std::string, int> runs = {{"memcpy_h2d", 1}, {"matmul", 1}, {"relu", 1},
                                           {"add", 1},        {"exp", 1},    {"scale", 1},
                                           {"memcpy_d2h", 2}};
  for (const auto& [op, count] : runs) {
    EXPECT_EQ(CountOf(json, absl::StrCat("{\"name\":\"", op, "\",\"cat\":\"op\"")), count) << op;
  }
  // One row per stream that ran an op: h2d, compute, compute:1, d2h of sim:0.
  EXPECT_EQ(CountOf(json, "\"thread_name\""), 4);
  for (const StreamKey& key :
       {StreamKey{kSim, StreamType::kHost2Device, 0}, StreamKey{kSim, StreamType::kCompute, 0},
        StreamKey{kSim, StreamType::kCompute, 1}, StreamKey{kSim, StreamType::kDevice2Host, 0}}) {
    EXPECT_EQ(CountOf(json, absl::StrCat("\"args\":{\"name\":\"", key.ToString(), "\"}")), 1)
        << key.ToString();
  }

  // Without trace_path nothing is written; a run after a traced one is not traced.
  std::remove(path.c_str());
  ASSERT_TRUE(executor_
                  ->Run(TwoStreamMain(), {{"x", HostTensor::FromVector(Ramp(16), kSquare)}},
                        {"y", "z"}, &scope)
                  .ok());
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST_F(ExecutorTest, BadTracePathIsAnErrorNamingIt) {
  Init();
  Scope scope;
  const std::string path = ::testing::TempDir() + "/no_such_directory_for_traces/trace.json";
  RunOptions run_options;
  run_options.trace_path = path;
  const Feeds feeds = {{"x", HostTensor::FromVector(Ramp(16), kSquare)}};
  absl::StatusOr<RunResult> result = executor_->Run(Chain(), feeds, {"c"}, &scope, run_options);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr(path));
  // Still usable, and the next run is not traced.
  absl::StatusOr<RunResult> next = executor_->Run(Chain(), feeds, {"c"}, &scope);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FLOAT_EQ(next->fetches[0].ToVector<float>()[0], ChainValue(Ramp(16)[0]));
}

// --- Kernel errors at run time. ---

// Loss = softmax_with_cross_entropy(logits, label); w += 1 on the side.
ir::ProgramDesc CrossEntropy() {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("logits", Shape({4, 3})));
  AddVar(b, Var("label", Shape({4, 1}), false, DataType::kI64));
  AddVar(b, Var("softmax", Shape({4, 3})));
  AddVar(b, Var("loss", Shape({4, 1})));
  AddVar(b, Var("w", kSquare, /*persistable=*/true));
  AddVar(b, Var("t", kSquare));
  b.AppendOp(Op("scale", {{"X", {"w"}}}, {{"Out", {"t"}}}, ScaleBy(1.0, 1.0)));
  b.AppendOp(Op("assign", {{"X", {"t"}}}, {{"Out", {"w"}}}));
  b.AppendOp(Op("softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
                {{"Softmax", {"softmax"}}, {"Loss", {"loss"}}}));
  return p;
}

void ExecutorTest::KernelErrorScenario(Device device) {
  Init(device);
  Scope scope;
  ASSERT_TRUE(executor_->Run(Startup(), {}, {}, &scope).ok());
  std::vector<float> logits(12);
  for (int i = 0; i < 12; ++i) logits[i] = 0.1f * i - 0.4f * (i % 3);
  const HostTensor logits_t = HostTensor::FromVector(logits, Shape({4, 3}));
  auto labels = [](std::vector<int64_t> v) { return HostTensor::FromVector(v, Shape({4, 1})); };
  auto expected_loss = [&](const std::vector<int64_t>& label) {
    std::vector<float> loss(4);
    for (int r = 0; r < 4; ++r) {
      float m = -1e30f, sum = 0;
      for (int c = 0; c < 3; ++c) m = std::max(m, logits[r * 3 + c]);
      for (int c = 0; c < 3; ++c) sum += std::exp(logits[r * 3 + c] - m);
      loss[r] = -(logits[r * 3 + label[r]] - m - std::log(sum));
    }
    return loss;
  };
  const ir::ProgramDesc p = CrossEntropy();
  auto check_good = [&](const std::vector<int64_t>& label) {
    absl::StatusOr<RunResult> r =
        executor_->Run(p, {{"logits", logits_t}, {"label", labels(label)}}, {"loss"}, &scope);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<float> got = r->fetches[0].ToVector<float>();
    const std::vector<float> want = expected_loss(label);
    ASSERT_EQ(got.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  };
  check_good({0, 1, 2, 1});

  absl::StatusOr<RunResult> bad =
      executor_->Run(p, {{"logits", logits_t}, {"label", labels({0, 7, 2, 1})}}, {"loss"}, &scope);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("softmax_with_cross_entropy"));
  EXPECT_THAT(bad.status().message(), HasSubstr("Label[1] = 7"));

  // The same interpreter runs again, and so does another program.
  check_good({2, 2, 0, 0});
  absl::StatusOr<RunResult> chain =
      executor_->Run(Chain(), {{"x", HostTensor::FromVector(Ramp(16), kSquare)}}, {"c"}, &scope);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_FLOAT_EQ(chain->fetches[0].ToVector<float>()[5], ChainValue(Ramp(16)[5]));
  // The side counter does not depend on the failing op: all three runs advanced it.
  EXPECT_EQ(PeekW(&scope), std::vector<float>(16, 3.5f));
}

// Loss accumulated into a persistable: w += softmax_with_cross_entropy(logits, label).
ir::ProgramDesc AccumulateLoss() {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("logits", Shape({4, 3})));
  AddVar(b, Var("label", Shape({4, 1}), false, DataType::kI64));
  AddVar(b, Var("softmax", Shape({4, 3})));
  AddVar(b, Var("loss", Shape({4, 1})));
  AddVar(b, Var("w", Shape({4, 1}), /*persistable=*/true));
  b.AppendOp(Op("softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
                {{"Softmax", {"softmax"}}, {"Loss", {"loss"}}}));
  b.AppendOp(Op("add", {{"X", {"w"}}, {"Y", {"loss"}}}, {{"Out", {"w"}}}));
  return p;
}

void ExecutorTest::PoisonScenario(Device device) {
  // A failing run must not leave a persistable that silently stops being updated: after
  // it, a good run either reports an error or updates w, and w stays readable.
  Init(device);
  Scope scope;
  const Shape column({4, 1});
  ASSERT_TRUE(executor_->Run(Startup(column, 0.0), {}, {}, &scope).ok());
  const HostTensor logits = Filled(Shape({4, 3}), 0.0f);  // loss = log(3) per row
  auto labels = [&](std::vector<int64_t> v) { return HostTensor::FromVector(v, column); };
  const float log3 = std::log(3.0f);
  const ir::ProgramDesc p = AccumulateLoss();
  ASSERT_TRUE(
      executor_->Run(p, {{"logits", logits}, {"label", labels({0, 1, 2, 0})}}, {}, &scope).ok());
  std::vector<float> w = PeekW(&scope, column);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_NEAR(w[0], log3, 1e-5);

  absl::StatusOr<RunResult> bad =
      executor_->Run(p, {{"logits", logits}, {"label", labels({0, 9, 2, 0})}}, {}, &scope);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("Label[1] = 9"));

  absl::StatusOr<RunResult> good =
      executor_->Run(p, {{"logits", logits}, {"label", labels({0, 1, 2, 0})}}, {}, &scope);
  absl::StatusOr<RunResult> peek = executor_->Run(Peek(column), {}, {"v"}, &scope);
  if (good.ok()) {
    ASSERT_TRUE(peek.ok()) << "the run after the failure reported OK but w is unreadable: "
                           << peek.status();
    w = peek->fetches[0].ToVector<float>();
    EXPECT_NEAR(w[0], 2 * log3, 1e-5) << "the run after the failure reported OK but w "
                                         "was not updated";
  }
}

TEST_F(ExecutorTest, KernelErrorOnCpuIsTheRunStatusAndTheExecutorStaysUsable) {
  KernelErrorScenario(kCpu);
}

TEST_F(ExecutorTest, KernelErrorOnSimIsTheRunStatusAndTheExecutorStaysUsable) {
  KernelErrorScenario(kSim);
}

TEST_F(ExecutorTest, FailedRunDoesNotSilentlyStallAPersistableOnCpu) { PoisonScenario(kCpu); }

TEST_F(ExecutorTest, FailedRunDoesNotSilentlyStallAPersistableOnSim) { PoisonScenario(kSim); }

}  // namespace
}  // namespace sluice::framework::executor_test
