// Yields are a parallel assignment (framework/interpreter/control_flow/lower_sub_blocks.h):
// every yielded value is read as it was when the block ended, before any Out is written.
// Programs written as text, whose yields swap, rotate, duplicate and transform their Out
// variables, run through the executor on cpu, on sim and, where there is one, on a cuda
// device (whose predicates reach the host by a device-to-host copy), under the sync
// checker, with the GC plan on and off, and give what a host reference computes: for a
// cond of block 0, for a while whose body yields its loop variables permuted, and for a
// cond inside a while body. A randomized test draws yield lists (permutations with
// repeats, some through tanh) with a fixed seed.
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "ep/cuda/cuda_device.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"
#include "vm/sync_checker.h"

namespace sluice::framework::control_flow_yield_test {
namespace {

// Out i takes variable `var`'s value, through tanh when `tanh`.
struct Yield {
  int var;
  bool tanh = false;
};
using Yields = std::vector<Yield>;
using Values = std::vector<std::array<float, 2>>;

// Where the yields are.
enum class Site { kCondInBlock0, kWhileBody, kCondInWhile };

std::string VarLine(const std::string& name, const char* dtype, const char* shape) {
  return absl::StrCat("var ", name, " dtype=", dtype, " shape=", shape,
                      " persistable=0 parameter=0 stop_gradient=1\n");
}

std::vector<std::string> Names(const std::string& prefix, int n) {
  std::vector<std::string> names;
  for (int k = 0; k < n; ++k) names.push_back(absl::StrCat(prefix, k));
  return names;
}

// A block yielding `yields` over `over` (with `first` yielded before them); a tanh yield
// is a variable of its own, named from `prefix`.
std::string YieldBlock(int index, int parent, const std::vector<std::string>& over,
                       const Yields& yields, const std::string& prefix,
                       const std::string& head = "", const std::string& head_ops = "",
                       const std::string& first = "") {
  std::string vars = head, ops = head_ops;
  std::vector<std::string> names;
  if (!first.empty()) names.push_back(first);
  for (size_t j = 0; j < yields.size(); ++j) {
    const std::string& from = over[static_cast<size_t>(yields[j].var)];
    if (!yields[j].tanh) {
      names.push_back(from);
      continue;
    }
    const std::string t = absl::StrCat(prefix, j);
    absl::StrAppend(&vars, VarLine(t, "f32", "[2]"));
    absl::StrAppend(&ops, "op tanh in X=", from, " out Out=", t, " attrs\n");
    names.push_back(t);
  }
  return absl::StrCat("block ", index, " parent ", parent, "\n", vars, ops,
                      "op yield in X=", absl::StrJoin(names, ","), " out attrs\n");
}

// The program of `site` over n = on_true.size() variables v0.. fed from x0..: the yields
// `on_true` (`on_false`) of a cond taken when feed p is true (false); in a while loop
// (counter i from i0 while i < feed n), the body's yields (kWhileBody: on_true only) or a
// cond's in the body (kCondInWhile, over the body's copies w0.. of v0..). Fetch v0...
std::string Program(Site site, const Yields& on_true, const Yields& on_false) {
  const int n = static_cast<int>(on_true.size());
  const std::vector<std::string> x = Names("x", n), v = Names("v", n), w = Names("w", n);
  const std::string xs = absl::StrJoin(x, ","), vs = absl::StrJoin(v, ","),
                    ws = absl::StrJoin(w, ",");
  std::string text = "sluice-program 2\nblock 0 parent -1\n";
  for (int k = 0; k < n; ++k) {
    absl::StrAppend(&text, VarLine(x[k], "f32", "[2]"), VarLine(v[k], "f32", "[2]"));
  }
  if (site != Site::kWhileBody) absl::StrAppend(&text, VarLine("p", "bool", "[]"));
  if (site == Site::kCondInBlock0) {
    for (int k = 0; k < n; ++k) {
      absl::StrAppend(&text, "op assign in X=", x[k], " out Out=", v[k], " attrs\n");
    }
    absl::StrAppend(&text, "op cond in Cond=p Input=", vs, " out Out=", vs,
                    " attrs false_block=b:2,true_block=b:1\n", YieldBlock(1, 0, v, on_true, "tt"),
                    YieldBlock(2, 0, v, on_false, "tf"), "end\n");
    return text;
  }
  absl::StrAppend(&text, VarLine("n", "f32", "[]"), VarLine("i0", "f32", "[]"),
                  VarLine("i", "f32", "[]"), "op while in X=i0,", xs, " Input=n",
                  site == Site::kCondInWhile ? ",p" : "", " out Out=i,", vs,
                  " attrs body_block=b:2,cond_block=b:1\n", "block 1 parent 0\n",
                  VarLine("c", "bool", "[]"), "op less_than in X=i Y=n out Out=c attrs\n",
                  "op yield in X=c out attrs\n");
  const std::string step = "op increment in X=i out Out=i2 attrs value=f:1\n";
  if (site == Site::kWhileBody) {
    absl::StrAppend(
        &text, YieldBlock(2, 0, v, on_true, "t", VarLine("i2", "f32", "[]"), step, "i2"), "end\n");
    return text;
  }
  absl::StrAppend(&text, "block 2 parent 0\n", VarLine("i2", "f32", "[]"));
  for (int k = 0; k < n; ++k) absl::StrAppend(&text, VarLine(w[k], "f32", "[2]"));
  absl::StrAppend(&text, step);
  for (int k = 0; k < n; ++k) {
    absl::StrAppend(&text, "op assign in X=", v[k], " out Out=", w[k], " attrs\n");
  }
  absl::StrAppend(&text, "op cond in Cond=p Input=", ws, " out Out=", ws,
                  " attrs false_block=b:4,true_block=b:3\n", "op yield in X=i2,", ws,
                  " out attrs\n", YieldBlock(3, 2, w, on_true, "tt"),
                  YieldBlock(4, 2, w, on_false, "tf"), "end\n");
  return text;
}

// The host reference: `yields` applied `times` times to `values`, every yield reading the
// values before the assignment.
Values Apply(const Yields& yields, Values values, int times) {
  for (int t = 0; t < times; ++t) {
    Values next;
    for (const Yield& y : yields) {
      std::array<float, 2> value = values[static_cast<size_t>(y.var)];
      if (y.tanh) {
        for (float& e : value) e = std::tanh(e);
      }
      next.push_back(value);
    }
    values = std::move(next);
  }
  return values;
}

Yields Plain(std::vector<int> vars) {
  Yields yields;
  for (int var : vars) yields.push_back({var});
  return yields;
}

class ControlFlowYieldTest : public ::testing::Test {
 protected:
  ControlFlowYieldTest() {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.sim.max_jitter_us = 5;
    options.runtime.sim.seed = 3;
    options.runtime.enable_cuda = ep::CudaDeviceCount() > 0;
    options.vm.check_sync = true;
    context_.emplace(eager::Context::Create(options).value());
    devices_ = {Device(DeviceType::kCpu, 0), Device(DeviceType::kSim, 0)};
    if (options.runtime.enable_cuda) devices_.push_back(Device(DeviceType::kCuda, 0));
  }

  // Runs the program of `site` on every device of devices_, GC plan on and off, with p = `taken`
  // and (loops) n = `iterations`, and compares v0.. with the reference.
  void Check(Site site, const Yields& on_true, const Yields& on_false, bool taken,
             int iterations = 2) {
    const std::string text = Program(site, on_true, on_false);
    absl::StatusOr<ir::ProgramDesc> program = ir::ProgramDesc::FromText(text);
    ASSERT_TRUE(program.ok()) << program.status() << "\n" << text;
    const int n = static_cast<int>(on_true.size());
    Values initial;
    Feeds feeds;
    for (int k = 0; k < n; ++k) {
      initial.push_back({0.25f * static_cast<float>(k + 1), -1.5f + static_cast<float>(k)});
      feeds.emplace_back(absl::StrCat("x", k),
                         HostTensor::FromVector(
                             std::vector<float>(initial[k].begin(), initial[k].end()), Shape({2})));
    }
    if (site != Site::kWhileBody) {
      feeds.emplace_back("p",
                         HostTensor{DataType::kBool, Shape(), {taken ? uint8_t{1} : uint8_t{0}}});
    }
    int times = 1;
    if (site != Site::kCondInBlock0) {
      feeds.emplace_back("n",
                         HostTensor::FromVector(std::vector<float>{1.0f * iterations}, Shape()));
      feeds.emplace_back("i0", HostTensor::FromVector(std::vector<float>{0.0f}, Shape()));
      times = iterations;
    }
    const Values want = Apply(taken ? on_true : on_false, initial, times);
    const std::vector<std::string> fetches = Names("v", n);
    for (Device device : devices_) {
      for (bool release : {true, false}) {
        ExecutorOptions options;
        options.interpreter.device = device;
        options.interpreter.release_temporaries = release;
        Executor executor(&context_->registry(), context_->vm(), options);
        Scope scope;
        absl::StatusOr<RunResult> result = executor.Run(*program, feeds, fetches, &scope);
        ASSERT_TRUE(result.ok()) << result.status() << "\n" << text;
        ASSERT_EQ(result->fetches.size(), static_cast<size_t>(n));
        for (int k = 0; k < n; ++k) {
          std::array<float, 2> got;
          ASSERT_EQ(result->fetches[k].bytes.size(), sizeof(got));
          std::memcpy(got.data(), result->fetches[k].bytes.data(), sizeof(got));
          for (int e = 0; e < 2; ++e) {
            EXPECT_NEAR(got[e], want[k][e], 1e-5)
                << "v" << k << "[" << e << "] on " << device.ToString() << ", release " << release
                << "\n"
                << text;
          }
        }
      }
    }
    EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0);
  }

  std::optional<eager::Context> context_;
  std::vector<Device> devices_;  // cpu, sim:0, and cuda:0 where there is one
};

TEST_F(ControlFlowYieldTest, CondInBlock0SwapsRotatesAndTransforms) {
  const Yields same = Plain({0, 1, 2});
  for (bool taken : {true, false}) {
    Check(Site::kCondInBlock0, Plain({1, 0}), Plain({0, 1}), taken);        // swap
    Check(Site::kCondInBlock0, Plain({1, 2, 0}), Plain({2, 0, 1}), taken);  // rotations
    Check(Site::kCondInBlock0, {{0, true}, {0}}, {{1}, {1, true}}, taken);  // tanh(a), a
    Check(Site::kCondInBlock0, Plain({2, 2, 0}), same, taken);              // duplicates
  }
}

TEST_F(ControlFlowYieldTest, WhileBodyYieldsItsVariablesPermuted) {
  for (int iterations : {1, 2}) {
    Check(Site::kWhileBody, Plain({1, 0}), {}, true, iterations);
    Check(Site::kWhileBody, Plain({1, 2, 0}), {}, true, iterations);
    Check(Site::kWhileBody, {{0, true}, {0}}, {}, true, iterations);
  }
}

TEST_F(ControlFlowYieldTest, CondInAWhileBody) {
  for (bool taken : {true, false}) {
    Check(Site::kCondInWhile, Plain({1, 0}), Plain({0, 1}), taken, 3);
    Check(Site::kCondInWhile, Plain({1, 2, 0}), Plain({2, 0, 1}), taken, 2);
    Check(Site::kCondInWhile, {{0, true}, {0}}, {{1}, {1, true}}, taken, 2);
  }
}

// Random yield lists (each Out takes a random variable, some through tanh: permutations,
// repeats, cycles through several variables) at every site, against the host reference.
TEST_F(ControlFlowYieldTest, RandomYieldListsMatchTheHostReference) {
  std::mt19937 rng(20261128);
  auto draw = [&rng](int n) {
    Yields yields;
    std::vector<int> order(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), rng);
    for (int k = 0; k < n; ++k) {
      // Half the time a permutation entry, else any variable (repeats).
      const int var = rng() % 2 == 0 ? order[k] : static_cast<int>(rng() % n);
      yields.push_back({var, rng() % 5 == 0});
    }
    return yields;
  };
  for (int trial = 0; trial < 6; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 4);
    const Yields on_true = draw(n), on_false = draw(n);
    const bool taken = rng() % 3 != 0;
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    Check(Site::kCondInBlock0, on_true, on_false, taken);
    Check(Site::kWhileBody, on_true, {}, true, 1 + trial % 3);
    Check(Site::kCondInWhile, on_true, on_false, taken, 1 + trial % 2);
  }
}

}  // namespace
}  // namespace sluice::framework::control_flow_yield_test
