// The CUDA back end of the subgraph compiler without a GPU: generated sources have the entry
// point, one statement per node, the broadcast reads and exact constants, and NVRTC compiles
// every one of them (each op in f32 and f64, casts, broadcasts, several outputs, a deep chain,
// 200 random subgraphs) to PTX that defines the entry point. A broken source must fail with
// NVRTC's log. The compile checks skip only in a build without CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ep/cuda/cuda_device.h"
#include "ep/cuda/ptx_compiler.h"
#include "framework/compiler/cuda/cuda_source.h"

namespace sluice::framework::compiler::compiler_cuda_source_test {
namespace {

Subgraph ParseOrDie(absl::string_view text) {
  absl::StatusOr<Subgraph> g = Subgraph::Parse(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Subgraph();
}

CudaSource GenerateOrDie(const Subgraph& g) {
  absl::StatusOr<CudaSource> source = GenerateCudaSource(g);
  EXPECT_TRUE(source.ok()) << source.status();
  return source.ok() ? *std::move(source) : CudaSource();
}

// PTX, or nullopt in a build without CUDA (then the caller skips); a compile error fails.
std::optional<std::string> Compile(const CudaSource& source) {
  absl::StatusOr<std::string> ptx = ep::CompileToPtx(source.source, source.entry + ".cu");
  if (ptx.status().code() == absl::StatusCode::kUnimplemented) {
    EXPECT_FALSE(ep::CudaProviderBuilt()) << ptx.status();
    return std::nullopt;
  }
  EXPECT_TRUE(ptx.ok()) << ptx.status() << "\n" << source.source;
  return ptx.ok() ? std::optional<std::string>(*ptx) : std::optional<std::string>("");
}

// The source declares the entry point and computes each node in one statement.
void ExpectWellFormed(const Subgraph& g, const CudaSource& source) {
  EXPECT_TRUE(absl::StartsWith(source.entry, "sluice_fused_")) << source.entry;
  EXPECT_TRUE(absl::StrContains(source.source,
                                absl::StrCat("extern \"C\" __global__ void ", source.entry, "(")))
      << source.source;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const int id = static_cast<int>(g.inputs.size() + k);
    const std::string statement = absl::StrCat(" v", id, " = ");
    const size_t at = source.source.find(statement);
    EXPECT_NE(at, std::string::npos) << "node " << k << "\n" << source.source;
    EXPECT_EQ(source.source.find(statement, at + 1), std::string::npos) << "node " << k;
  }
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    EXPECT_TRUE(absl::StrContains(source.source, absl::StrCat("out", o, "[i] = v", g.outputs[o])))
        << source.source;
  }
}

// The PTX defines the entry point (visible, so the driver finds it by name).
void ExpectEntry(const std::string& ptx, const std::string& entry) {
  EXPECT_TRUE(absl::StrContains(ptx, absl::StrCat(".entry ", entry, "("))) << ptx;
  EXPECT_TRUE(absl::StrContains(ptx, ".visible")) << ptx;
}

// A subgraph of one node of `op` in `dtype` over [3, 4, 5]: its operands are inputs of the
// domain's shape (of the other dtype for cast), sgd's rate an input of shape [1].
Subgraph OneOp(ExprOp op, DataType dtype) {
  const DataType other = dtype == DataType::kF32 ? DataType::kF64 : DataType::kF32;
  std::string text = "sg1/d:3x4x5";
  const int arity = ExprOpArity(op);
  for (int a = 0; a < arity; ++a) {
    const bool rate = op == ExprOp::kSgd && a == 2;
    absl::StrAppend(&text, "/i:", DataTypeName(op == ExprOp::kCast ? other : dtype), ":",
                    rate ? "1" : "3x4x5");
  }
  absl::StrAppend(&text, "/n:", ExprOpName(op), ":", DataTypeName(dtype));
  for (int a = 0; a < arity; ++a) absl::StrAppend(&text, ":", a);
  if (op == ExprOp::kScale) absl::StrAppend(&text, ":1.5:-0.25");
  absl::StrAppend(&text, "/o:", arity);
  return ParseOrDie(text);
}

TEST(CudaSourceTest, EveryOpInBothDtypesCompiles) {
  for (int o = 0; o < kNumExprOps; ++o) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const ExprOp op = static_cast<ExprOp>(o);
      SCOPED_TRACE(absl::StrCat(ExprOpName(op), " ", DataTypeName(dtype)));
      const Subgraph g = OneOp(op, dtype);
      const CudaSource source = GenerateOrDie(g);
      ExpectWellFormed(g, source);
      const std::optional<std::string> ptx = Compile(source);
      if (!ptx) continue;  // built without CUDA: the sources are still checked
      ExpectEntry(*ptx, source.entry);
      // f32 code stays in f32: a double literal or a double math call would show here.
      if (dtype == DataType::kF32 && op != ExprOp::kCast) {
        EXPECT_FALSE(absl::StrContains(*ptx, ".f64")) << source.source << "\n" << *ptx;
      }
    }
  }
  if (!ep::CudaProviderBuilt()) GTEST_SKIP() << "built without CUDA: sources not compiled";
}

TEST(CudaSourceTest, FormulasFollowTheUncompiledKernels) {
  auto statement = [](ExprOp op, DataType dtype) {
    const Subgraph g = OneOp(op, dtype);
    const std::string source = GenerateOrDie(g).source;
    const std::string id = absl::StrCat(" v", g.inputs.size(), " = ");
    const size_t begin = source.find(id);
    if (begin == std::string::npos) return std::string();
    return source.substr(begin + id.size(), source.find(';', begin) - begin - id.size());
  };
  const DataType f32 = DataType::kF32, f64 = DataType::kF64;
  EXPECT_EQ(statement(ExprOp::kScale, f32), "0x1.8p+0f * v0 + (-0x1p-2f)");
  EXPECT_EQ(statement(ExprOp::kScale, f64), "0x1.8p+0 * v0 + (-0x1p-2)");
  EXPECT_EQ(statement(ExprOp::kRelu, f32), "v0 < 0.0f ? 0.0f : v0");
  // max and min keep a NaN in either argument (a on a tie or when a is NaN, else b).
  EXPECT_EQ(statement(ExprOp::kMax, f64), "(v0 >= v1 || v0 != v0) ? v0 : v1");
  EXPECT_EQ(statement(ExprOp::kMin, f32), "(v0 <= v1 || v0 != v0) ? v0 : v1");
  EXPECT_EQ(statement(ExprOp::kMaxGradY, f32), "(v0 >= v1 || v0 != v0) ? 0.0f : v2");
  EXPECT_EQ(statement(ExprOp::kMinGradX, f64), "(v0 <= v1 || v0 != v0) ? v2 : 0.0");
  EXPECT_EQ(statement(ExprOp::kDivGradY, f32), "-(v2 / v1) * (v0 / v1)");
  EXPECT_EQ(statement(ExprOp::kSgd, f32), "v0 - v2 * v1");
  EXPECT_EQ(statement(ExprOp::kSigmoidGrad, f64), "v1 * v0 * (1.0 - v0)");
  EXPECT_EQ(statement(ExprOp::kSqrtGrad, f32), "0.5f * v1 / v0");
  EXPECT_EQ(statement(ExprOp::kSquareGrad, f32), "2.0f * v0 * v1");
  EXPECT_EQ(statement(ExprOp::kExp, f32), "expf(v0)");
  EXPECT_EQ(statement(ExprOp::kLog, f64), "log(v0)");
  EXPECT_EQ(statement(ExprOp::kCast, f32), "static_cast<float>(v0)");
  EXPECT_EQ(statement(ExprOp::kSigmoid, f32), "SluiceSigmoid(v0)");
  const std::string sigmoid = GenerateOrDie(OneOp(ExprOp::kSigmoid, f32)).source;
  EXPECT_TRUE(absl::StrContains(sigmoid, "(x >= 0.0f ? 1.0f : e) / (1.0f + e)")) << sigmoid;
  // sgd's rate, an input of one element, is read at 0.
  EXPECT_TRUE(absl::StrContains(GenerateOrDie(OneOp(ExprOp::kSgd, f32)).source, "= in2[0];"));
}

TEST(CudaSourceTest, ConstantsAreExact) {
  const Subgraph g = ParseOrDie(
      "sg1/d:8/i:f32:8/i:f64:8/n:scale:f32:0:0.1:1e-45/n:scale:f64:1:0.1:-3.0000000000000004"
      "/n:scale:f32:0:inf:-inf/n:scale:f64:1:1e300:-0/o:2/o:3/o:4/o:5");
  const std::string source = GenerateOrDie(g).source;
  // The f32 constants are the doubles rounded to float first, as the scale kernel does.
  const float tenth = 0.1f;
  char expected[64];
  std::snprintf(expected, sizeof(expected), "%af * v0 + 0x1p-149f", static_cast<double>(tenth));
  EXPECT_TRUE(absl::StrContains(source, expected)) << expected << "\n" << source;
  EXPECT_TRUE(absl::StrContains(source, "0x1.999999999999ap-4 * v1 + (-0x1.8000000000001p+1)"))
      << source;
  EXPECT_TRUE(
      absl::StrContains(source, "__int_as_float(0x7f800000) * v0 + __int_as_float(0xff800000)"))
      << source;
  EXPECT_TRUE(absl::StrContains(source, "0x1.7e43c8800759cp+996 * v1 + (-0x0p+0)")) << source;
  // Every hex literal reads back as the value it stands for.
  EXPECT_EQ(std::strtof("0x1.99999ap-4", nullptr), tenth);
  EXPECT_EQ(std::strtod("0x1.7e43c8800759cp+996", nullptr), 1e300);
  const std::optional<std::string> ptx = Compile(GenerateOrDie(g));
  if (!ptx) GTEST_SKIP() << "built without CUDA";
}

TEST(CudaSourceTest, BroadcastInputsReadThroughConstantCoordinates) {
  // [1], [5], [4, 1], [3, 4, 5] and a scalar against [3, 4, 5], in f32 and f64.
  for (const char* t : {"f32", "f64"}) {
    SCOPED_TRACE(t);
    const Subgraph g = ParseOrDie(absl::StrCat(
        "sg1/d:3x4x5/i:", t, ":1/i:", t, ":5/i:", t, ":4x1/i:", t, ":3x4x5/i:", t, ":s/n:add:", t,
        ":0:1/n:mul:", t, ":5:2/n:sub:", t, ":3:6/n:div:", t, ":7:4/o:8"));
    const CudaSource source = GenerateOrDie(g);
    ExpectWellFormed(g, source);
    for (const char* read : {"= in0[0];", "= in1[c2];", "= in2[c1];", "= in3[i];", "= in4[0];",
                             "const long long c1 = i / 5 % 4;", "const long long c2 = i % 5;"}) {
      EXPECT_TRUE(absl::StrContains(source.source, read)) << read << "\n" << source.source;
    }
    EXPECT_FALSE(absl::StrContains(source.source, " c0 = ")) << source.source;
    const std::optional<std::string> ptx = Compile(source);
    if (!ptx) GTEST_SKIP() << "built without CUDA";
    ExpectEntry(*ptx, source.entry);
  }
}

TEST(CudaSourceTest, CastsAndSeveralOutputs) {
  const Subgraph g = ParseOrDie(
      "sg1/d:2x3/i:f32:2x3/i:f64:3/n:cast:f64:0/n:mul:f64:2:1/n:cast:f32:3/n:exp:f32:4"
      "/n:tanh:f64:3/o:5/o:3/o:6/o:2");
  const CudaSource source = GenerateOrDie(g);
  ExpectWellFormed(g, source);
  EXPECT_TRUE(absl::StrContains(
      source.source, absl::StrCat("(const float* in0, const double* in1, float* out0, "
                                  "double* out1, double* out2, double* out3, long long n)")))
      << source.source;
  const std::optional<std::string> ptx = Compile(source);
  if (!ptx) GTEST_SKIP() << "built without CUDA";
  ExpectEntry(*ptx, source.entry);
  EXPECT_TRUE(absl::StrContains(*ptx, "cvt.rn.f32.f64")) << *ptx;
}

TEST(CudaSourceTest, DeepChainIsRoundedOpByOp) {
  // y = ((((x * 1.5 + 0.5) * x - 0.25) * 0.75 + x) * x - 1.0), scale nodes for the constants.
  for (const char* t : {"f32", "f64"}) {
    SCOPED_TRACE(t);
    const Subgraph g = ParseOrDie(absl::StrReplaceAll(
        "sg1/d:1000/i:T:1000/n:scale:T:0:1.5:0.5/n:mul:T:1:0/n:scale:T:2:1:-0.25"
        "/n:scale:T:3:0.75:0/n:add:T:4:0/n:mul:T:5:0/n:scale:T:6:1:-1/o:7",
        {{"T", t}}));
    const CudaSource source = GenerateOrDie(g);
    ExpectWellFormed(g, source);
    const std::optional<std::string> ptx = Compile(source);
    if (!ptx) GTEST_SKIP() << "built without CUDA";
    ExpectEntry(*ptx, source.entry);
    // --fmad=false: every multiply and add rounds on its own, no contraction into fma.
    EXPECT_FALSE(absl::StrContains(*ptx, "fma.")) << *ptx;
    EXPECT_TRUE(absl::StrContains(*ptx, absl::StrCat("mul.rn.", t))) << *ptx;
    EXPECT_TRUE(absl::StrContains(*ptx, absl::StrCat("add.rn.", t))) << *ptx;
  }
}

TEST(CudaSourceTest, EqualSubgraphsShareTheirSource) {
  Subgraph a = ParseOrDie("sg1/d:4/i:f32:4/n:relu:f32:0/o:1/f:relu");
  Subgraph b = ParseOrDie("sg1/d:4/i:f32:4/n:relu:f32:0/o:1/f:other_name");
  Subgraph c = ParseOrDie("sg1/d:5/i:f32:5/n:relu:f32:0/o:1/f:relu");
  EXPECT_EQ(GenerateOrDie(a).source, GenerateOrDie(b).source);
  EXPECT_EQ(GenerateOrDie(a).entry, GenerateOrDie(b).entry);
  EXPECT_NE(GenerateOrDie(a).entry, GenerateOrDie(c).entry);
}

TEST(CudaSourceTest, InvalidSubgraphIsRefused) {
  Subgraph g = ParseOrDie("sg1/d:4/i:f32:4/n:relu:f32:0/o:1");
  g.nodes[0].args[0] = 1;  // itself
  EXPECT_EQ(GenerateCudaSource(g).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaSourceTest, BrokenSourceFailsWithTheNvrtcLog) {
  const std::string broken =
      "extern \"C\" __global__ void broken(float* x) { x[0] = not_declared_anywhere; }\n";
  absl::StatusOr<std::string> ptx = ep::CompileToPtx(broken, "broken_kernel.cu");
  if (ptx.status().code() == absl::StatusCode::kUnimplemented) {
    EXPECT_FALSE(ep::CudaProviderBuilt());
    GTEST_SKIP() << "built without CUDA";
  }
  ASSERT_FALSE(ptx.ok());
  EXPECT_EQ(ptx.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(ptx.status().message(), "not_declared_anywhere")) << ptx.status();
  EXPECT_TRUE(absl::StrContains(ptx.status().message(), "broken_kernel.cu")) << ptx.status();
  // The same kernel with the name declared compiles: the failure was the source's.
  EXPECT_TRUE(ep::CompileToPtx("extern \"C\" __global__ void fine(float* x) { x[0] = 1.0f; }\n",
                               "fine_kernel.cu")
                  .ok());
}

TEST(CudaSourceTest, UnsupportedArchitectureIsInvalidArgument) {
  absl::StatusOr<std::string> ptx =
      ep::CompileToPtx("extern \"C\" __global__ void k() {}\n", "k.cu", 1, 0);
  if (ptx.status().code() == absl::StatusCode::kUnimplemented) GTEST_SKIP() << "no CUDA";
  EXPECT_EQ(ptx.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(ptx.status().message(), "compute_10")) << ptx.status();
}

// A random valid subgraph: 1-4 inputs broadcasting into a domain of rank 0-4, 1-12 nodes of
// random ops over earlier values of the node's dtype (a cast when only the other dtype has
// values), 1-3 outputs.
Subgraph RandomSubgraph(std::mt19937& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Subgraph g;
  std::vector<int64_t> domain(static_cast<size_t>(uniform(0, 4)));
  for (int64_t& d : domain) d = uniform(1, 6);
  g.domain = Shape(domain);
  std::vector<int> values[2];  // ids per dtype: f32, f64
  for (int k = uniform(1, 4); k > 0; --k) {
    const int rank = uniform(0, static_cast<int>(domain.size()));
    std::vector<int64_t> dims(domain.end() - rank, domain.end());
    for (int64_t& d : dims) {
      if (uniform(0, 2) == 0) d = 1;
    }
    const int t = uniform(0, 3) == 0 ? 1 : 0;
    values[t].push_back(static_cast<int>(g.inputs.size()));
    g.inputs.push_back({t == 0 ? DataType::kF32 : DataType::kF64, Shape(dims)});
  }
  const int n_in = static_cast<int>(g.inputs.size());
  for (int k = uniform(1, 12); k > 0; --k) {
    int t = uniform(0, 1);
    ExprNode n;
    n.dtype = t == 0 ? DataType::kF32 : DataType::kF64;
    n.op = static_cast<ExprOp>(uniform(0, kNumExprOps - 1));
    if (values[t].empty() || n.op == ExprOp::kCast) {
      if (values[1 - t].empty()) continue;  // a cast from t needs a value of the other dtype
      n.op = ExprOp::kCast;
      n.args[0] = values[1 - t][uniform(0, static_cast<int>(values[1 - t].size()) - 1)];
    } else {
      for (int a = 0; a < ExprOpArity(n.op); ++a) {
        n.args[a] = values[t][uniform(0, static_cast<int>(values[t].size()) - 1)];
      }
      if (n.op == ExprOp::kScale) {
        n.params[0] = std::uniform_real_distribution<double>(-4, 4)(rng);
        n.params[1] = std::uniform_real_distribution<double>(-4, 4)(rng);
      }
    }
    values[t].push_back(n_in + static_cast<int>(g.nodes.size()));
    g.nodes.push_back(n);
  }
  if (g.nodes.empty()) {  // every draw was a cast without a source value
    ExprNode copy;
    copy.op = ExprOp::kCopy;
    copy.dtype = g.inputs[0].dtype;
    copy.args[0] = 0;
    g.nodes.push_back(copy);
  }
  std::vector<int> ids;
  for (int v = n_in; v < g.num_values(); ++v) ids.push_back(v);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(static_cast<size_t>(std::min<int>(uniform(1, 3), static_cast<int>(ids.size()))));
  g.outputs = ids;
  return g;
}

TEST(CudaSourceTest, RandomSubgraphsCompile) {
  std::mt19937 rng(20240611);
  std::vector<double> milliseconds;
  for (int trial = 0; trial < 200; ++trial) {
    const Subgraph g = RandomSubgraph(rng);
    SCOPED_TRACE(absl::StrCat("trial ", trial, ": ", g.ToText()));
    ASSERT_TRUE(g.Validate().ok()) << g.Validate();
    const CudaSource source = GenerateOrDie(g);
    ExpectWellFormed(g, source);
    const auto start = std::chrono::steady_clock::now();
    const std::optional<std::string> ptx = Compile(source);
    const auto stop = std::chrono::steady_clock::now();
    if (ptx) {
      milliseconds.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
      ExpectEntry(*ptx, source.entry);
    }
    if (HasFailure()) return;
  }
  if (milliseconds.empty()) GTEST_SKIP() << "built without CUDA: sources not compiled";
  std::sort(milliseconds.begin(), milliseconds.end());
  const double median = milliseconds[milliseconds.size() / 2];
  RecordProperty("median_nvrtc_ms", std::to_string(median));
  std::printf("NVRTC compile time over %zu kernels: median %.1f ms, max %.1f ms\n",
              milliseconds.size(), median, milliseconds.back());
}

}  // namespace
}  // namespace sluice::framework::compiler::compiler_cuda_source_test
