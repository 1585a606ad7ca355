// Random elementwise programs with broadcasting for the subgraph compiler's differential
// tests: the same program run with compile_subgraphs on and off must give bitwise equal
// fetches (the compiler neither reassociates nor contracts: docs/design.md, "Subgraph
// compilation"). Used by compiled_program_test.cc (a few dozen programs, also under the
// sanitizers) and framework_long/compiled_program_long_test.cc (10^3).
#ifndef SLUICE_TESTS_FRAMEWORK_COMPILED_PROGRAM_TEST_UTIL_H_
#define SLUICE_TESTS_FRAMEWORK_COMPILED_PROGRAM_TEST_UTIL_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "framework/compiler/compiler.h"
#include "framework/executor/executor.h"
#include "framework/ir/program_desc.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::compiled_test {

struct RandomElementwiseProgram {
  ir::ProgramDesc startup;
  ir::ProgramDesc main;
  std::vector<std::pair<std::string, HostTensor>> feeds;
  std::vector<std::string> fetches;
};

// `on_streams`: some ops carry a "stream" attribute (compute:0 or compute:1).
inline RandomElementwiseProgram MakeRandomElementwiseProgram(uint32_t seed, bool on_streams) {
  using program_test::Op;
  using program_test::Var;
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const std::vector<int64_t> base = {uniform(1, 4), uniform(2, 6), uniform(1, 9)};
  auto random_shape = [&]() {
    const int rank = uniform(0, 3);
    std::vector<int64_t> dims;
    for (int i = 3 - rank; i < 3; ++i)
      dims.push_back(chance(0.3) ? 1 : base[static_cast<size_t>(i)]);
    return Shape(dims);
  };
  RandomElementwiseProgram r;
  ir::BlockDesc& b = r.main.mutable_global_block();
  struct Value {
    std::string name;
    Shape shape;
  };
  std::vector<Value> values;
  auto new_var = [&](const Shape& shape) {
    const std::string name = absl::StrCat("v", values.size());
    EXPECT_TRUE(b.AddVar(Var(name, shape)).ok());
    values.push_back({name, shape});
    return name;
  };
  auto attrs = [&](vm::AttrMap a) {
    if (on_streams && chance(0.3)) a.Set("stream", chance(0.5) ? "compute:0" : "compute:1");
    return a;
  };
  auto random_value = [&]() -> const Value& {
    return values[static_cast<size_t>(uniform(0, static_cast<int>(values.size()) - 1))];
  };
  // Feeds: one of the full shape, two of random broadcastable shapes.
  for (int f = 0; f < 3; ++f) {
    const Shape shape = f == 0 ? Shape(base) : random_shape();
    const std::string name = new_var(shape);
    std::vector<float> data(static_cast<size_t>(shape.NumElements()));
    for (float& x : data) x = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
    r.feeds.emplace_back(name, HostTensor::FromVector(data, shape));
  }
  static const char* kBinary[] = {"add", "sub", "mul", "div", "max", "min"};
  static const char* kUnary[] = {"relu", "sigmoid", "tanh", "square"};
  const int ops = uniform(4, 24);
  for (int k = 0; k < ops; ++k) {
    const int kind = uniform(0, 99);
    if (kind < 42) {
      const Value x = random_value(), y = random_value();
      const std::string out = new_var(BroadcastShapes(x.shape, y.shape).value());
      b.AppendOp(Op(kBinary[uniform(0, 5)], {{"X", {x.name}}, {"Y", {y.name}}}, {{"Out", {out}}},
                    attrs({})));
    } else if (kind < 60) {
      const Value x = random_value();
      const std::string out = new_var(x.shape);
      b.AppendOp(Op(kUnary[uniform(0, 3)], {{"X", {x.name}}}, {{"Out", {out}}}, attrs({})));
    } else if (kind < 66) {  // log or sqrt of exp(x): a positive argument
      const Value x = random_value();
      const std::string e = new_var(x.shape);
      b.AppendOp(Op("exp", {{"X", {x.name}}}, {{"Out", {e}}}, attrs({})));
      const std::string out = new_var(x.shape);
      b.AppendOp(Op(chance(0.5) ? "log" : "sqrt", {{"X", {e}}}, {{"Out", {out}}}, attrs({})));
    } else if (kind < 78) {
      const Value x = random_value();
      const std::string out = new_var(x.shape);
      const double scale = std::uniform_real_distribution<double>(-3, 3)(rng);
      const double bias = std::uniform_real_distribution<double>(-1, 1)(rng);
      b.AppendOp(Op("scale", {{"X", {x.name}}}, {{"Out", {out}}},
                    attrs(program_test::ScaleBy(scale, bias))));
    } else if (kind < 84) {  // a unary op's gradient: value and OutGrad of one shape
      const Value v = random_value();
      const std::string out = new_var(v.shape);
      static const char* kGrad[] = {"relu_grad", "sigmoid_grad", "tanh_grad", "square_grad"};
      const char* grad = kGrad[uniform(0, 3)];
      const std::string slot = std::string(grad) == "square_grad" ? "X" : "Out";
      b.AppendOp(
          Op(grad, {{slot, {v.name}}, {"OutGrad", {v.name}}}, {{"XGrad", {out}}}, attrs({})));
    } else if (kind < 90) {  // a binary op's gradient, nothing broadcast
      const Value x = random_value();
      const std::string y = new_var(x.shape);
      b.AppendOp(
          Op("scale", {{"X", {x.name}}}, {{"Out", {y}}}, attrs(program_test::ScaleBy(0.5, 1.0))));
      const std::string dx = new_var(x.shape);
      const std::string dy = new_var(x.shape);
      static const char* kGrad[] = {"add_grad", "sub_grad", "mul_grad",
                                    "div_grad", "max_grad", "min_grad"};
      b.AppendOp(Op(kGrad[uniform(0, 5)], {{"X", {x.name}}, {"Y", {y}}, {"OutGrad", {x.name}}},
                    {{"XGrad", {dx}}, {"YGrad", {dy}}}, attrs({})));
    } else if (kind < 95) {  // through f64 and back
      const Value x = random_value();
      const std::string wide = absl::StrCat("w", values.size());
      EXPECT_TRUE(b.AddVar(Var(wide, x.shape, false, DataType::kF64)).ok());
      b.AppendOp(Op("cast", {{"X", {x.name}}}, {{"Out", {wide}}},
                    attrs(vm::AttrMap().Set("dtype", std::string("f64")))));
      const std::string wide2 = absl::StrCat("w", values.size(), "b");
      EXPECT_TRUE(b.AddVar(Var(wide2, x.shape, false, DataType::kF64)).ok());
      b.AppendOp(Op("scale", {{"X", {wide}}}, {{"Out", {wide2}}},
                    attrs(program_test::ScaleBy(1.0 / 3.0, 0.125))));
      const std::string out = new_var(x.shape);
      b.AppendOp(Op("cast", {{"X", {wide2}}}, {{"Out", {out}}},
                    attrs(vm::AttrMap().Set("dtype", std::string("f32")))));
    } else {  // not fusible: sum of two values of one shape
      const Value x = random_value();
      const std::string out = new_var(x.shape);
      b.AppendOp(Op("sum", {{"X", {x.name, x.name}}}, {{"Out", {out}}}, attrs({})));
    }
  }
  // An sgd update of a persistable parameter by the last value of its shape, when there is one.
  const Shape param_shape({base[1], base[2]});
  for (size_t v = values.size(); v-- > 3;) {
    if (values[v].shape != param_shape) continue;
    EXPECT_TRUE(b.AddVar(Var("param", param_shape, true)).ok());
    EXPECT_TRUE(b.AddVar(Var("lr", Shape({1}))).ok());
    b.AppendOp(Op("sgd",
                  {{"Param", {"param"}}, {"Grad", {values[v].name}}, {"LearningRate", {"lr"}}},
                  {{"ParamOut", {"param"}}}, attrs({})));
    r.feeds.emplace_back("lr", HostTensor::FromVector(std::vector<float>{0.125f}, Shape({1})));
    ir::BlockDesc& s = r.startup.mutable_global_block();
    EXPECT_TRUE(s.AddVar(Var("param", param_shape, true)).ok());
    s.AppendOp(
        Op("fill_constant", {}, {{"Out", {"param"}}}, program_test::Fill(param_shape, 0.25)));
    r.fetches.push_back("param");
    break;
  }
  r.fetches.push_back(values.back().name);
  for (int f = 0; f < 2; ++f) {
    const std::string name = random_value().name;
    if (std::find(r.fetches.begin(), r.fetches.end(), name) == r.fetches.end()) {
      r.fetches.push_back(name);
    }
  }
  return r;
}

// Bytes equal, where two NaNs of one width count as equal whatever their payloads.
inline bool SameValues(const HostTensor& a, const HostTensor& b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.bytes.size() != b.bytes.size()) return false;
  if (a.dtype != DataType::kF32) return a.bytes == b.bytes;
  const size_t n = a.bytes.size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    float x, y;
    std::memcpy(&x, a.bytes.data() + i * sizeof(float), sizeof(float));
    std::memcpy(&y, b.bytes.data() + i * sizeof(float), sizeof(float));
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::bit_cast<uint32_t>(x) != std::bit_cast<uint32_t>(y)) return false;
  }
  return true;
}

// Distance in units in the last place between two finite floats of one sign convention
// (ordered as integers); NaN against anything but NaN is "infinitely" far.
inline int64_t UlpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  auto ordered = [](float x) {
    const int32_t i = std::bit_cast<int32_t>(x);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

struct DifferentialOutcome {
  int64_t compiled_subgraphs = 0;
  int64_t fused_ops = 0;
  int64_t max_ulp = 0;
};

// Runs `r` twice (two steps) with and without compilation on `device` with `streams`
// compute streams, each in a scope of its own, and expects equal fetches.
inline DifferentialOutcome RunCompiledAndUnfused(eager::Context& context,
                                                 const RandomElementwiseProgram& r,
                                                 const Device& device, int streams) {
  DifferentialOutcome outcome;
  std::vector<std::vector<HostTensor>> results[2];
  for (int compiled = 0; compiled < 2; ++compiled) {
    ExecutorOptions options;
    options.interpreter.device = device;
    options.interpreter.compute_streams = streams;
    options.interpreter.compile_subgraphs = compiled == 1;
    Executor executor(&context.registry(), context.vm(), options);
    Scope scope;
    absl::StatusOr<RunResult> startup = executor.Run(r.startup, {}, {}, &scope);
    EXPECT_TRUE(startup.ok()) << startup.status();
    for (int step = 0; step < 2; ++step) {
      absl::StatusOr<RunResult> result = executor.Run(r.main, r.feeds, r.fetches, &scope);
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) return outcome;
      results[compiled].push_back(result->fetches);
    }
    if (compiled == 1) {
      const LoweringStats lowering = executor.LastLowering().value();
      outcome.compiled_subgraphs = lowering.compiled_subgraphs;
      outcome.fused_ops = lowering.fused_ops;
      EXPECT_EQ(lowering.compile_fallbacks, 0);
    }
  }
  for (size_t step = 0; step < results[0].size() && step < results[1].size(); ++step) {
    for (size_t f = 0; f < r.fetches.size(); ++f) {
      const HostTensor& want = results[0][step][f];
      const HostTensor& got = results[1][step][f];
      EXPECT_TRUE(SameValues(want, got)) << "fetch '" << r.fetches[f] << "' step " << step;
      if (want.dtype == DataType::kF32 && want.bytes.size() == got.bytes.size()) {
        for (size_t i = 0; i < want.bytes.size() / 4; ++i) {
          float x, y;
          std::memcpy(&x, want.bytes.data() + 4 * i, 4);
          std::memcpy(&y, got.bytes.data() + 4 * i, 4);
          outcome.max_ulp = std::max(outcome.max_ulp, UlpDistance(x, y));
        }
      }
    }
  }
  return outcome;
}

// The subgraphs the partitioning pass forms for programs `first`..`last` on cpu (each built
// by an Executor sharing one compiler): what the cuda back end must compile too.
inline std::vector<compiler::Subgraph> SubgraphsOfRandomPrograms(eager::Context& context,
                                                                 uint32_t first, uint32_t last) {
  auto shared = std::make_shared<compiler::Compiler>();
  for (uint32_t seed = first; seed <= last; ++seed) {
    const RandomElementwiseProgram r = MakeRandomElementwiseProgram(seed, false);
    ExecutorOptions options;
    options.compiler = shared;
    Executor executor(&context.registry(), context.vm(), options);
    std::vector<std::string> feed_names;
    for (const auto& [name, value] : r.feeds) feed_names.push_back(name);
    Scope run_scope;
    EXPECT_TRUE(executor.Run(r.startup, {}, {}, &run_scope).ok());
    EXPECT_TRUE(executor.Prepare(r.main, feed_names, r.fetches, &run_scope).ok());
  }
  std::vector<compiler::Subgraph> graphs;
  for (const auto& compiled : shared->Compiled()) graphs.push_back(compiled->graph());
  return graphs;
}

}  // namespace sluice::framework::compiled_test

#endif  // SLUICE_TESTS_FRAMEWORK_COMPILED_PROGRAM_TEST_UTIL_H_
