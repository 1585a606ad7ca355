// Compiler's cache (hits, misses, failures, what the key includes, one compile for threads
// racing on a cold key, cached errors, back ends missing in this build) and the text form it
// keys on: Subgraph::Parse(ToText()) is exact and Parse names the token it rejects.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "ep/cuda/ptx_compiler.h"
#include "framework/compiler/compiler.h"
#include "framework/compiler/cpu/tile_program.h"

namespace sluice::framework::compiler::compiler_cache_test {
namespace {

// relu(x * scale + bias) over [4] (or `domain`), fused from "scale" and "relu".
Subgraph ScaleRelu(double scale = 2, double bias = 1, Shape domain = Shape({4})) {
  Subgraph g;
  g.domain = domain;
  g.inputs = {{DataType::kF32, domain}};
  ExprNode s;
  s.op = ExprOp::kScale;
  s.args[0] = 0;
  s.params[0] = scale;
  s.params[1] = bias;
  ExprNode r;
  r.op = ExprOp::kRelu;
  r.args[0] = 1;
  g.nodes = {s, r};
  g.outputs = {2};
  g.fused = {"scale", "relu"};
  return g;
}

bool CudaCompilerMissing() {
  return ep::CompileToPtx("", "x").status().code() == absl::StatusCode::kUnimplemented;
}

TEST(CompilerTest, SecondCompileIsAHitWithTheSameResult) {
  Compiler compiler;
  auto first = compiler.Compile(ScaleRelu(), DeviceType::kCpu);
  ASSERT_TRUE(first.ok()) << first.status();
  CompilerStats stats = compiler.stats();
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, 0);
  EXPECT_EQ(stats.entries, 1);
  auto second = compiler.Compile(ScaleRelu(), DeviceType::kCpu);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->get(), second->get());
  stats = compiler.stats();
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.failures, 0);
  EXPECT_EQ(stats.entries, 1);
  EXPECT_GE(stats.compile_ns, 0);
  const CompiledSubgraph& c = **first;
  EXPECT_EQ(c.device_type(), DeviceType::kCpu);
  EXPECT_EQ(c.content_hash(), ContentHash(ScaleRelu().CacheText()));
  EXPECT_NE(c.tile_program(), nullptr);
  EXPECT_TRUE(c.ptx().empty());
  ASSERT_NE(c.kernel(), nullptr);
  EXPECT_EQ(c.kernel()->name(), "fused[scale+relu]");
  EXPECT_EQ(c.graph().ToText(), ScaleRelu().ToText());
}

// The kernel carries its name (traces, records, errors), so groups that replace other ops
// get kernels of their own even when they compute the same thing.
TEST(CompilerTest, FusedNamesArePartOfTheKey) {
  Compiler compiler;
  Subgraph other = ScaleRelu();
  other.fused = {"mul", "add", "relu"};
  EXPECT_NE(other.CacheText(), ScaleRelu().CacheText());
  auto a = compiler.Compile(ScaleRelu(), DeviceType::kCpu);
  auto b = compiler.Compile(other, DeviceType::kCpu);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ((*a)->kernel()->name(), "fused[scale+relu]");
  EXPECT_EQ((*b)->kernel()->name(), "fused[mul+add+relu]");
  EXPECT_EQ(compiler.stats().entries, 2);
  EXPECT_EQ(compiler.Compile(other, DeviceType::kCpu)->get(), b->get());
  EXPECT_EQ(compiler.stats().hits, 1);
}

TEST(CompilerTest, ConstantsShapesDtypesAndDeviceTypesAreKeys) {
  Compiler compiler;
  std::vector<std::pair<Subgraph, DeviceType>> variants = {
      {ScaleRelu(2, 1), DeviceType::kCpu},
      {ScaleRelu(2, 1.0000000000000002), DeviceType::kCpu},  // one ulp apart
      {ScaleRelu(2, -0.0), DeviceType::kCpu},
      {ScaleRelu(2, 0.0), DeviceType::kCpu},  // 0 and -0 differ in a product's sign
      {ScaleRelu(2, 1, Shape({5})), DeviceType::kCpu},
      {ScaleRelu(2, 1, Shape({4, 1})), DeviceType::kCpu},
      {ScaleRelu(2, 1), DeviceType::kSim},
  };
  Subgraph wide = ScaleRelu();
  wide.inputs[0].dtype = DataType::kF64;
  wide.nodes[0].dtype = DataType::kF64;
  wide.nodes[1].dtype = DataType::kF64;
  variants.push_back({wide, DeviceType::kCpu});
  std::vector<const CompiledSubgraph*> seen;
  for (const auto& [graph, device] : variants) {
    auto compiled = compiler.Compile(graph, device);
    ASSERT_TRUE(compiled.ok()) << graph.ToText() << ": " << compiled.status();
    EXPECT_EQ(std::find(seen.begin(), seen.end(), compiled->get()), seen.end())
        << graph.ToText() << " shares an entry";
    seen.push_back(compiled->get());
  }
  const CompilerStats stats = compiler.stats();
  EXPECT_EQ(stats.misses, static_cast<int64_t>(variants.size()));
  EXPECT_EQ(stats.hits, 0);
  EXPECT_EQ(stats.entries, static_cast<int64_t>(variants.size()));
  EXPECT_NE(seen.back()->tile_program(), nullptr);
  EXPECT_EQ(seen[6]->device_type(), DeviceType::kSim);
}

TEST(CompilerTest, ThreadsRacingOnAColdKeyCompileOnce) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 20; ++round) {
    Compiler compiler;
    const Subgraph graph = ScaleRelu(round, 0.5, Shape({64, 64}));
    std::vector<absl::StatusOr<std::shared_ptr<const CompiledSubgraph>>> results(
        kThreads, absl::UnknownError("not run"));
    absl::BlockingCounter ready(kThreads);
    absl::Notification go;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        ready.DecrementCount();
        go.WaitForNotification();
        results[static_cast<size_t>(t)] = compiler.Compile(graph, DeviceType::kCpu);
      });
    }
    ready.Wait();
    go.Notify();
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_TRUE(results[static_cast<size_t>(t)].ok()) << results[static_cast<size_t>(t)].status();
      EXPECT_EQ(results[static_cast<size_t>(t)]->get(), results[0]->get()) << "thread " << t;
    }
    const CompilerStats stats = compiler.stats();
    EXPECT_EQ(stats.misses, 1);
    EXPECT_EQ(stats.hits, kThreads - 1);
    EXPECT_EQ(stats.entries, 1);
  }
}

TEST(CompilerTest, InvalidSubgraphFailureIsCachedAndCounted) {
  Compiler compiler;
  Subgraph bad = ScaleRelu();
  bad.nodes[1].args[0] = 2;  // relu reads its own value
  ASSERT_FALSE(bad.Validate().ok());
  auto first = compiler.Compile(bad, DeviceType::kCpu);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), absl::StatusCode::kInvalidArgument);
  auto second = compiler.Compile(bad, DeviceType::kCpu);
  EXPECT_EQ(second.status(), first.status());
  const CompilerStats stats = compiler.stats();
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.failures, 1);
  EXPECT_EQ(stats.entries, 1);
  // The valid graph is another key.
  EXPECT_TRUE(compiler.Compile(ScaleRelu(), DeviceType::kCpu).ok());
  EXPECT_EQ(compiler.stats().failures, 1);
}

// Validate rejects an argument past a node's arity, but the cache key (CacheText) prints
// only the arguments within the arity: the invalid graph and its valid twin share a key, so
// whichever is compiled first decides what the other gets.
TEST(CompilerTest, KeyCoversEverythingValidateChecks) {
  Subgraph bad = ScaleRelu();
  bad.nodes[1].args[1] = 0;  // relu takes one argument
  ASSERT_FALSE(bad.Validate().ok());
  {
    Compiler compiler;
    EXPECT_EQ(compiler.Compile(bad, DeviceType::kCpu).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(compiler.Compile(ScaleRelu(), DeviceType::kCpu).ok());
  }
  {
    Compiler compiler;
    EXPECT_TRUE(compiler.Compile(ScaleRelu(), DeviceType::kCpu).ok());
    EXPECT_EQ(compiler.Compile(bad, DeviceType::kCpu).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(CompilerTest, CudaWithoutTheToolkitIsUnimplemented) {
  if (!CudaCompilerMissing()) GTEST_SKIP() << "built with CUDA";
  Compiler compiler;
  auto compiled = compiler.Compile(ScaleRelu(), DeviceType::kCuda);
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(compiler.Compile(ScaleRelu(), DeviceType::kCuda).status(), compiled.status());
  EXPECT_EQ(compiler.stats().failures, 1);
  EXPECT_EQ(compiler.stats().hits, 1);
  // The cpu entry is separate and fine.
  EXPECT_TRUE(compiler.Compile(ScaleRelu(), DeviceType::kCpu).ok());
}

TEST(CompilerTest, MadeKeyFindsTheSameEntry) {
  const CompileKey key = Compiler::MakeKey(ScaleRelu(), DeviceType::kCpu);
  EXPECT_EQ(key.content_hash, ContentHash(ScaleRelu().CacheText()));
  EXPECT_EQ(key.device, DeviceType::kCpu);
  EXPECT_EQ(key.text, ScaleRelu().CacheText() + "@cpu");
  const CompileKey sim = Compiler::MakeKey(ScaleRelu(), DeviceType::kSim);
  EXPECT_NE(sim.text, key.text);
  EXPECT_EQ(sim.content_hash, key.content_hash);  // the content alone

  Compiler compiler;
  auto by_key = compiler.Compile(key, ScaleRelu());
  auto by_graph = compiler.Compile(ScaleRelu(), DeviceType::kCpu);
  ASSERT_TRUE(by_key.ok());
  ASSERT_TRUE(by_graph.ok());
  EXPECT_EQ(by_key->get(), by_graph->get());
  EXPECT_EQ((*by_key)->content_hash(), key.content_hash);
  EXPECT_EQ(compiler.stats().misses, 1);
  EXPECT_EQ(compiler.stats().hits, 1);
}

TEST(CompilerTest, NodeLimitFailsAndIsCached) {
  CompilerOptions options;
  options.max_nodes = 2;
  Compiler compiler(options);
  EXPECT_TRUE(compiler.Compile(ScaleRelu(), DeviceType::kCpu).ok());  // two nodes
  Subgraph three = ScaleRelu();
  ExprNode neg;
  neg.op = ExprOp::kNeg;
  neg.args[0] = 2;
  three.nodes.push_back(neg);
  three.outputs = {3};
  auto failed = compiler.Compile(three, DeviceType::kCpu);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(compiler.Compile(three, DeviceType::kCpu).status(), failed.status());
  const CompilerStats stats = compiler.stats();
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.failures, 1);
  // Compiled() lists the successes only.
  const std::vector<std::shared_ptr<const CompiledSubgraph>> compiled = compiler.Compiled();
  ASSERT_EQ(compiled.size(), 1u);
  EXPECT_EQ(compiled[0]->graph().nodes.size(), 2u);
}

TEST(CompilerTest, SimCompilesToATileProgram) {
  Compiler compiler;
  auto compiled = compiler.Compile(ScaleRelu(-1, 0.5), DeviceType::kSim);
  ASSERT_TRUE(compiled.ok());
  const cpu::TileProgram* program = (*compiled)->tile_program();
  ASSERT_NE(program, nullptr);
  const float x[4] = {-1, 0, 0.25f, 3};
  float y[4] = {9, 9, 9, 9};
  program->Run({x}, {y});
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], 0.25f);
  EXPECT_EQ(y[3], 0.0f);
}

// ---- The text form ----

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

void ExpectSameGraph(const Subgraph& a, const Subgraph& b) {
  EXPECT_EQ(a.domain, b.domain);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].dtype, b.inputs[i].dtype) << "input " << i;
    EXPECT_EQ(a.inputs[i].shape, b.inputs[i].shape) << "input " << i;
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t k = 0; k < a.nodes.size(); ++k) {
    const ExprNode& x = a.nodes[k];
    const ExprNode& y = b.nodes[k];
    EXPECT_EQ(x.op, y.op) << "node " << k;
    EXPECT_EQ(x.dtype, y.dtype) << "node " << k;
    for (int j = 0; j < 3; ++j) EXPECT_EQ(x.args[j], y.args[j]) << "node " << k << " arg " << j;
    for (int j = 0; j < 2; ++j) {
      EXPECT_TRUE(SameBits(x.params[j], y.params[j]))
          << "node " << k << " param " << j << ": " << x.params[j] << " vs " << y.params[j];
    }
  }
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_EQ(a.fused, b.fused);
}

TEST(CompilerTest, ParseOfToTextIsExact) {
  // Every op, both dtypes, a cast each way, and scale constants that need all 17 digits.
  Subgraph g;
  g.domain = Shape({2, 3});
  g.inputs = {{DataType::kF32, Shape({2, 3})},
              {DataType::kF32, Shape({3})},
              {DataType::kF64, Shape()},
              {DataType::kF64, Shape({2, 1})}};
  for (int op = 0; op < kNumExprOps; ++op) {
    for (const DataType dtype : {DataType::kF32, DataType::kF64}) {
      ExprNode n;
      n.op = static_cast<ExprOp>(op);
      n.dtype = dtype;
      const bool f32 = dtype == DataType::kF32;
      for (int a = 0; a < ExprOpArity(n.op); ++a) n.args[a] = f32 ? a % 2 : 2 + a % 2;
      if (n.op == ExprOp::kCast) n.args[0] = f32 ? 2 : 0;
      g.nodes.push_back(n);
    }
  }
  const double denormal_min = std::numeric_limits<double>::denorm_min();
  const double constants[][2] = {
      {0.1, 1e-300},
      {-0.0, std::numeric_limits<double>::infinity()},
      {-std::numeric_limits<double>::infinity(), denormal_min},
      {std::numeric_limits<double>::max(), 1.0 / 3.0},
      {-2.5e-8, 0.0},
      {std::numeric_limits<double>::min(), -1e300},
  };
  for (const auto& c : constants) {
    ExprNode n;
    n.op = ExprOp::kScale;
    n.dtype = DataType::kF64;
    n.args[0] = 3;
    n.params[0] = c[0];
    n.params[1] = c[1];
    g.nodes.push_back(n);
  }
  g.outputs = {g.num_values() - 1, static_cast<int>(g.inputs.size()), 9, 20};
  g.fused = {"scale", "relu_grad", "cast", "sgd"};
  ASSERT_TRUE(g.Validate().ok()) << g.Validate();
  const std::string text = g.ToText();
  for (char c : text) {
    EXPECT_TRUE(c != ',' && c != '=' && c != ' ' && c != '\n' && c != '\t') << text;
  }
  absl::StatusOr<Subgraph> parsed = Subgraph::Parse(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  ExpectSameGraph(g, *parsed);
  EXPECT_EQ(parsed->ToText(), text);
  EXPECT_EQ(parsed->CacheText(), g.CacheText());
  EXPECT_EQ(ContentHash(parsed->CacheText()), ContentHash(g.CacheText()));
  EXPECT_NE(text.find("-0:inf"), std::string::npos) << text;
  EXPECT_NE(text.find(":0.10000000000000001:"), std::string::npos) << text;

  // A rank-0 domain, no fused names.
  Subgraph scalar;
  scalar.inputs = {{DataType::kF32, Shape()}};
  ExprNode n;
  n.op = ExprOp::kNeg;
  n.args[0] = 0;
  scalar.nodes = {n};
  scalar.outputs = {1};
  EXPECT_EQ(scalar.ToText(), "sg1/d:s/i:f32:s/n:neg:f32:0/o:1");
  absl::StatusOr<Subgraph> parsed_scalar = Subgraph::Parse(scalar.ToText());
  ASSERT_TRUE(parsed_scalar.ok()) << parsed_scalar.status();
  ExpectSameGraph(scalar, *parsed_scalar);
  EXPECT_EQ(scalar.KernelName(), "fused[]");
}

TEST(CompilerTest, ParseOfRandomScaleConstantsIsExact) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    // Random bit patterns: every exponent, both signs, subnormals, infinities (NaNs aside).
    uint64_t bits[2] = {rng(), rng()};
    double params[2];
    std::memcpy(params, bits, sizeof(params));
    if (std::isnan(params[0]) || std::isnan(params[1])) continue;
    const Subgraph g = ScaleRelu(params[0], params[1]);
    absl::StatusOr<Subgraph> parsed = Subgraph::Parse(g.ToText());
    ASSERT_TRUE(parsed.ok()) << parsed.status() << " " << g.ToText();
    ASSERT_TRUE(SameBits(parsed->nodes[0].params[0], params[0])) << g.ToText();
    ASSERT_TRUE(SameBits(parsed->nodes[0].params[1], params[1])) << g.ToText();
  }
}

// NaN constants: the text keeps NaN (its payload aside) and its sign as printf spells it.
TEST(CompilerTest, ParseKeepsNaNConstants) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Subgraph g = ScaleRelu(nan, -nan);
  const std::string text = g.ToText();
  absl::StatusOr<Subgraph> parsed = Subgraph::Parse(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << " " << text;
  EXPECT_TRUE(std::isnan(parsed->nodes[0].params[0]));
  EXPECT_TRUE(std::isnan(parsed->nodes[0].params[1]));
  EXPECT_EQ(std::signbit(parsed->nodes[0].params[0]), std::signbit(nan));
  EXPECT_EQ(std::signbit(parsed->nodes[0].params[1]), std::signbit(-nan));
  EXPECT_EQ(parsed->ToText(), text);
}

TEST(CompilerTest, ParseRejectsMalformedTextNamingTheToken) {
  const std::string ok = "sg1/d:4/i:f32:4/n:relu:f32:0/o:1";
  ASSERT_TRUE(Subgraph::Parse(ok).ok());
  struct Case {
    std::string text;
    std::string named;  // what the message must contain
  };
  const std::vector<Case> cases = {
      {"sg2/d:4/i:f32:4/n:relu:f32:0/o:1", "'sg1'"},
      {"", "'sg1'"},
      {"sg1/d:4/i:f32:4/n:frob:f32:0/o:1", "'n:frob:f32:0'"},
      {"sg1/d:4/i:f99:4/n:relu:f32:0/o:1", "'i:f99:4'"},
      {"sg1/d:4/i:f32:4x/n:relu:f32:0/o:1", "'i:f32:4x'"},
      {"sg1/d:4x/i:f32:4/n:relu:f32:0/o:1", "'d:4x'"},
      {"sg1/d:-4/i:f32:4/n:relu:f32:0/o:1", "'d:-4'"},
      {"sg1/d:4:5/i:f32:4/n:relu:f32:0/o:1", "'d:4:5'"},
      {"sg1/d:4/i:f32:4/n:add:f32:0/o:1", "'n:add:f32:0'"},
      {"sg1/d:4/i:f32:4/n:relu:f32:0:0/o:1", "'n:relu:f32:0:0'"},
      {"sg1/d:4/i:f32:4/n:relu:f32:zero/o:1", "'n:relu:f32:zero'"},
      {"sg1/d:4/i:f32:4/n:relu:q32:0/o:1", "'n:relu:q32:0'"},
      {"sg1/d:4/i:f32:4/n:scale:f32:0:two:1/o:1", "'n:scale:f32:0:two:1'"},
      {"sg1/d:4/i:f32:4/n:scale:f32:0:1/o:1", "'n:scale:f32:0:1'"},
      {"sg1/d:4/i:f32:4/n:relu:f32:0/o:one", "'o:one'"},
      {"sg1/d:4/i:f32:4/n:relu:f32:0/q:1/o:1", "'q:1'"},
      {"sg1/d:4/i:f32:4//n:relu:f32:0/o:1", "''"},
      {"sg1/d:4/i:f32:4/n:relu:f32:0/o:1/", "token 5 ''"},
      {"sg1/d:4/n:relu:f32:0/i:f32:4/o:0", "'i:f32:4'"},
      // Well-formed tokens that Validate rejects.
      {"sg1/i:f32:4/n:relu:f32:0/o:1", "'d:'"},
      {"sg1/d:4/i:f32:4/n:relu:f32:5/o:1", "not an earlier value"},
      {"sg1/d:4/i:f32:5/n:relu:f32:0/o:1", "does not broadcast"},
      {"sg1/d:4/i:f32:4/n:relu:i32:0/o:1", "not floating"},
      {"sg1/d:4/i:f64:4/n:relu:f32:0/o:1", "argument 0 is f64"},
      {"sg1/d:4/i:f32:4/n:relu:f32:0", "no outputs"},
      {"sg1/d:4/i:f32:4/n:relu:f32:0/o:0", "not a node"},
      {"sg1/d:4/i:f32:4/n:relu:f32:0/o:1/o:1", "repeats value 1"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Subgraph> parsed = Subgraph::Parse(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(parsed.status().message().find(c.named), absl::string_view::npos)
        << c.text << " -> " << parsed.status().message();
  }
}

}  // namespace
}  // namespace sluice::framework::compiler::compiler_cache_test
