// AppendBackward through cond and while (framework/autodiff/internal/control_flow_grad.h):
// for a cond taken either way, loops of 0, 1 and many iterations, a loop in a loop and a
// cond in a loop, the gradients the interpreter computes (cpu, one and two compute streams,
// under the sync checker) equal those of the equivalent unrolled straight-line program and
// agree with central finite differences of the forward program, all in f64. Also the
// refusals (a while without max_iterations) and the rewrite's shape (stacks written by the
// forward body, read back by the backward one).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autodiff/backward.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/functional.h"
#include "framework/builder/layers.h"
#include "framework/builder/losses.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/io/npy.h"
#include "framework/ir/control_flow.h"
#include "framework/optim/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"
#include "vm/sync_checker.h"

namespace sluice::framework::autodiff_control_flow_test {
namespace {

using ::testing::HasSubstr;

// A feed of the models below: f64; `differentiate` ones get gradients (stop_gradient off).
struct Input {
  std::string name;
  Shape shape;
  std::vector<double> values;
  bool differentiate = false;
};

// Builds a forward program over the inputs (as Vars, in order) and returns its loss.
using BuildFn = std::function<absl::StatusOr<Var>(const std::vector<Var>&)>;

std::vector<double> RandomValues(std::mt19937& rng, int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

Input Scalar(std::string name, double value) { return {std::move(name), Shape(), {value}}; }

// fn:: calls return StatusOr<Value>; the models are written with this macro-free helper.
Value Get(absl::StatusOr<Value> v) {
  SLUICE_CHECK(v.ok());
  return *std::move(v);
}

Value Const(double value) { return Get(fn::FillConstant(Shape(), value, DataType::kF64)); }

// ---- The models: each a control-flow program and its unrolled equivalent ----

// Inputs flag, x [3], w [3], b [3], c [3]: (y, z) = flag > 0 ? (tanh(x w) + x, x) : (x^2 b,
// b^2); loss = sum((y + z^2) c). The true branch yields a capture as is; w is read only by
// the true branch, b only by the false one.
std::vector<Value> CondTrue(const std::vector<Var>& v) {
  return {Get(fn::Add(Get(fn::Tanh(Get(fn::Mul(v[1], v[2])))), v[1])), v[1]};
}
std::vector<Value> CondFalse(const std::vector<Var>& v) {
  return {Get(fn::Mul(Get(fn::Square(v[1])), v[3])), Get(fn::Mul(v[3], v[3]))};
}
absl::StatusOr<Var> CondLoss(const std::vector<Value>& out, const Var& c) {
  SLUICE_ASSIGN_OR_RETURN(Value z2, fn::Square(out[1]));
  SLUICE_ASSIGN_OR_RETURN(Value sum, fn::Add(out[0], z2));
  SLUICE_ASSIGN_OR_RETURN(Value weighted, fn::Mul(sum, c));
  SLUICE_ASSIGN_OR_RETURN(Value loss, fn::ReduceSum(weighted));
  return loss.var();
}
absl::StatusOr<Var> CondModel(const std::vector<Var>& v) {
  SLUICE_ASSIGN_OR_RETURN(Value pred, fn::GreaterThan(v[0], Const(0)));
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<Value> out,
      fn::Cond(
          pred, [&]() -> absl::StatusOr<std::vector<Value>> { return CondTrue(v); },
          [&]() -> absl::StatusOr<std::vector<Value>> { return CondFalse(v); }));
  return CondLoss(out, v[4]);
}
BuildFn UnrolledCond(bool taken) {
  return [taken](const std::vector<Var>& v) {
    return CondLoss(taken ? CondTrue(v) : CondFalse(v), v[4]);
  };
}

// Inputs i0, n, x [3], w [3], c [3]: h = x; while i < n (at most 8 times) { i += 1;
// h = tanh(h w + x) }; loss = sum(h c). x is both a loop variable's initial value and a
// capture.
Value RnnStep(const Value& h, const Var& w, const Var& x) {
  return Get(fn::Tanh(Get(fn::Add(Get(fn::Mul(h, w)), x))));
}
absl::StatusOr<Var> WeightedSum(const Value& h, const Var& c) {
  SLUICE_ASSIGN_OR_RETURN(Value loss, fn::ReduceSum(Get(fn::Mul(h, c))));
  return loss.var();
}
absl::StatusOr<Var> WhileModel(const std::vector<Var>& v) {
  fn::WhileOptions options;
  options.max_iterations = 8;
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<Value> out,
      fn::WhileLoop(
          [&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], v[1]); },
          [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
            return std::vector<Value>{Get(fn::Increment(vars[0])), RnnStep(vars[1], v[3], v[2])};
          },
          {v[0], v[2]}, options));
  return WeightedSum(out[1], v[4]);
}
BuildFn UnrolledWhile(int n) {
  return [n](const std::vector<Var>& v) {
    Value h = v[2];
    for (int k = 0; k < n; ++k) h = RnnStep(h, v[3], v[2]);
    return WeightedSum(h, v[4]);
  };
}

// Inputs i0, j0, n, m, x [3], w [3], c [3]: h = x; while i < n (at most 4) { g = h;
// while j < m (at most 3) { g = tanh(g w + h) }; h = g x }; loss = sum(h c). The inner
// loop captures the outer loop's current value.
absl::StatusOr<Var> NestedModel(const std::vector<Var>& v) {
  fn::WhileOptions outer_options, inner_options;
  outer_options.max_iterations = 4;
  inner_options.max_iterations = 3;
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<Value> out,
      fn::WhileLoop(
          [&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], v[2]); },
          [&](const std::vector<Value>& outer) -> absl::StatusOr<std::vector<Value>> {
            SLUICE_ASSIGN_OR_RETURN(
                std::vector<Value> inner,
                fn::WhileLoop(
                    [&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], v[3]); },
                    [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                      const Value g =
                          Get(fn::Tanh(Get(fn::Add(Get(fn::Mul(vars[1], v[5])), outer[1]))));
                      return std::vector<Value>{Get(fn::Increment(vars[0])), g};
                    },
                    {v[1], outer[1]}, inner_options));
            return std::vector<Value>{Get(fn::Increment(outer[0])), Get(fn::Mul(inner[1], v[4]))};
          },
          {v[0], v[4]}, outer_options));
  return WeightedSum(out[1], v[6]);
}
BuildFn UnrolledNested(int n, int m) {
  return [n, m](const std::vector<Var>& v) {
    Value h = v[4];
    for (int a = 0; a < n; ++a) {
      Value g = h;
      for (int b = 0; b < m; ++b) g = Get(fn::Tanh(Get(fn::Add(Get(fn::Mul(g, v[5])), h))));
      h = Get(fn::Mul(g, v[4]));
    }
    return WeightedSum(h, v[6]);
  };
}

// Inputs i0, n, x [3], w [3], c [3]: h = x; while i < n (at most 8) { h = i < n / 2 ?
// 1.5 h w + 0.25 : tanh(h) + x; i += 1 }; loss = sum(h c).
Value Early(const Value& h, const Var& w) { return Get(fn::Scale(Get(fn::Mul(h, w)), 1.5, 0.25)); }
Value Late(const Value& h, const Var& x) { return Get(fn::Add(Get(fn::Tanh(h)), x)); }
absl::StatusOr<Var> CondInWhileModel(const std::vector<Var>& v) {
  fn::WhileOptions options;
  options.max_iterations = 8;
  SLUICE_ASSIGN_OR_RETURN(Value half, fn::Scale(v[1], 0.5));
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<Value> out,
      fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], v[1]); },
                    [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_ASSIGN_OR_RETURN(Value early, fn::LessThan(vars[0], half));
                      SLUICE_ASSIGN_OR_RETURN(std::vector<Value> next,
                                              fn::Cond(
                                                  early,
                                                  [&]() -> absl::StatusOr<std::vector<Value>> {
                                                    return std::vector<Value>{Early(vars[1], v[3])};
                                                  },
                                                  [&]() -> absl::StatusOr<std::vector<Value>> {
                                                    return std::vector<Value>{Late(vars[1], v[2])};
                                                  }));
                      return std::vector<Value>{Get(fn::Increment(vars[0])), next[0]};
                    },
                    {v[0], v[2]}, options));
  return WeightedSum(out[1], v[4]);
}
BuildFn UnrolledCondInWhile(int n) {
  return [n](const std::vector<Var>& v) {
    Value h = v[2];
    for (int k = 0; k < n; ++k) h = 2 * k < n ? Early(h, v[3]) : Late(h, v[2]);
    return WeightedSum(h, v[4]);
  };
}

class AutodiffControlFlowTest : public ::testing::Test {
 protected:
  AutodiffControlFlowTest() {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 0;
    options.runtime.enable_cuda = false;
    options.vm.check_sync = true;
    context_.emplace(eager::Context::Create(options).value());
    SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok());
  }

  ~AutodiffControlFlowTest() override {
    EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0);
  }

  struct Built {
    ir::ProgramDesc forward;   // before AppendBackward
    ir::ProgramDesc backward;  // after
    std::string loss;
  };

  // The program `build` makes over `inputs`, before and after AppendBackward.
  absl::StatusOr<Built> BuildProgram(const std::vector<Input>& inputs, const BuildFn& build) {
    Program main(&registry_), startup(&registry_);
    ProgramGuard guard(main, startup);
    std::vector<Var> vars;
    for (const Input& input : inputs) {
      SLUICE_ASSIGN_OR_RETURN(Var var, Data(input.name, input.shape, DataType::kF64));
      if (input.differentiate) var.set_stop_gradient(false);
      vars.push_back(var);
    }
    SLUICE_ASSIGN_OR_RETURN(Var loss, build(vars));
    Built built;
    built.forward = main.desc();
    built.loss = loss.name();
    SLUICE_RETURN_IF_ERROR(AppendBackward(loss).status());
    SLUICE_RETURN_IF_ERROR(main.desc().Validate());
    built.backward = main.desc();
    return built;
  }

  static Feeds ToFeeds(const std::vector<Input>& inputs) {
    Feeds feeds;
    for (const Input& input : inputs) {
      feeds.emplace_back(input.name, HostTensor::FromVector(input.values, input.shape));
    }
    return feeds;
  }

  // Runs `program` on `inputs` through an executor; the fetched values.
  std::vector<std::vector<double>> Run(const ir::ProgramDesc& program,
                                       const std::vector<Input>& inputs,
                                       const std::vector<std::string>& fetches, int streams) {
    ExecutorOptions options;
    options.interpreter.compute_streams = streams;
    Executor executor(&context_->registry(), context_->vm(), options);
    Scope scope;
    absl::StatusOr<RunResult> result = executor.Run(program, ToFeeds(inputs), fetches, &scope);
    EXPECT_TRUE(result.ok()) << result.status();
    std::vector<std::vector<double>> values;
    if (!result.ok()) return values;
    for (const HostTensor& t : result->fetches) values.push_back(t.ToVector<double>());
    return values;
  }

  // The gradient of every differentiated input (zeros when the program has none: nothing
  // the loss depends on reads it).
  std::vector<std::vector<double>> Gradients(const Built& built, const std::vector<Input>& inputs,
                                             int streams) {
    std::vector<std::string> fetches;
    std::vector<size_t> fetched;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k].differentiate) continue;
      const std::string grad = inputs[k].name + "@GRAD";
      if (built.backward.global_block().HasVar(grad)) {
        fetches.push_back(grad);
        fetched.push_back(k);
      }
    }
    const std::vector<std::vector<double>> values = Run(built.backward, inputs, fetches, streams);
    std::vector<std::vector<double>> grads;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k].differentiate) continue;
      auto it = std::find(fetched.begin(), fetched.end(), k);
      if (it == fetched.end() || values.size() != fetches.size()) {
        grads.emplace_back(inputs[k].values.size(), 0.0);
      } else {
        grads.push_back(values[it - fetched.begin()]);
      }
    }
    return grads;
  }

  // Central differences of the forward program's loss, per differentiated input.
  std::vector<std::vector<double>> FiniteDifferences(const Built& built,
                                                     const std::vector<Input>& inputs) {
    constexpr double kStep = 1e-6;
    std::vector<std::vector<double>> grads;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k].differentiate) continue;
      grads.emplace_back();
      for (size_t j = 0; j < inputs[k].values.size(); ++j) {
        double loss_at[2];
        for (int side = 0; side < 2; ++side) {
          std::vector<Input> moved = inputs;
          moved[k].values[j] += side == 0 ? kStep : -kStep;
          const std::vector<std::vector<double>> loss = Run(built.forward, moved, {built.loss}, 1);
          loss_at[side] = loss.empty() ? NAN : loss[0][0];
        }
        grads.back().push_back((loss_at[0] - loss_at[1]) / (2 * kStep));
      }
    }
    return grads;
  }

  // The control-flow program's gradients, on one and two streams, equal the unrolled
  // program's and agree with finite differences. Returns them (empty on failure).
  std::vector<std::vector<double>> ExpectGradients(const std::vector<Input>& inputs,
                                                   const BuildFn& control_flow,
                                                   const BuildFn& unrolled) {
    absl::StatusOr<Built> cf = BuildProgram(inputs, control_flow);
    EXPECT_TRUE(cf.ok()) << cf.status();
    absl::StatusOr<Built> flat = BuildProgram(inputs, unrolled);
    EXPECT_TRUE(flat.ok()) << flat.status();
    if (!cf.ok() || !flat.ok()) return {};
    const std::vector<std::vector<double>> want = Gradients(*flat, inputs, 1);
    const std::vector<std::vector<double>> numeric = FiniteDifferences(*cf, inputs);
    std::vector<std::vector<double>> got;
    for (int streams : {1, 2}) {
      got = Gradients(*cf, inputs, streams);
      EXPECT_EQ(got.size(), want.size());
      if (got.size() != want.size() || numeric.size() != want.size()) return {};
      size_t g = 0;
      for (const Input& input : inputs) {
        if (!input.differentiate) continue;
        EXPECT_EQ(got[g].size(), input.values.size());
        if (got[g].size() != input.values.size()) return {};
        for (size_t j = 0; j < input.values.size(); ++j) {
          const std::string what = absl::StrCat(input.name, "[", j, "], ", streams, " streams");
          // The unrolled program sums the same terms, possibly in another order.
          EXPECT_NEAR(got[g][j], want[g][j], 1e-12 * std::max(1.0, std::abs(want[g][j]))) << what;
          EXPECT_NEAR(got[g][j], numeric[g][j], 1e-6 * std::max(1.0, std::abs(numeric[g][j])))
              << what;
        }
        ++g;
      }
    }
    return got;
  }

  static double Largest(const std::vector<std::vector<double>>& grads) {
    double largest = 0;
    for (const auto& g : grads) {
      for (double v : g) largest = std::max(largest, std::abs(v));
    }
    return largest;
  }

  ops::OpRegistry registry_;
  std::optional<eager::Context> context_;
};

// Three vectors of 3 in [-1, 1] (the last, the loss weights, not differentiated) after the
// scalars; a fixed seed per test.
std::vector<Input> WithVectors(std::vector<Input> inputs, std::vector<std::string> names,
                               unsigned seed) {
  std::mt19937 rng(seed);
  for (size_t k = 0; k < names.size(); ++k) {
    Input input{names[k], Shape({3}), RandomValues(rng, 3, -1.0, 1.0)};
    input.differentiate = k + 1 < names.size();
    inputs.push_back(std::move(input));
  }
  return inputs;
}

TEST_F(AutodiffControlFlowTest, CondTakenEitherWay) {
  for (double flag : {1.0, -1.0}) {
    SCOPED_TRACE(flag);
    const std::vector<Input> inputs = WithVectors({Scalar("flag", flag)}, {"x", "w", "b", "c"}, 7);
    const std::vector<std::vector<double>> grads =
        ExpectGradients(inputs, CondModel, UnrolledCond(flag > 0));
    ASSERT_EQ(grads.size(), 3u);  // x, w, b
    EXPECT_GT(Largest(grads), 1e-3);
    // What only the other branch reads gets zeros: b when the true branch runs, w else.
    const std::vector<double>& unused = flag > 0 ? grads[2] : grads[1];
    EXPECT_THAT(unused, ::testing::Each(0.0));
    const std::vector<double>& used = flag > 0 ? grads[1] : grads[2];
    EXPECT_GT(Largest({used}), 1e-3);
  }
}

TEST_F(AutodiffControlFlowTest, WhileWithZeroOneAndManyIterations) {
  for (int n : {0, 1, 5, 8}) {
    SCOPED_TRACE(n);
    const std::vector<Input> inputs =
        WithVectors({Scalar("i0", 0), Scalar("n", n)}, {"x", "w", "c"}, 11);
    const std::vector<std::vector<double>> grads =
        ExpectGradients(inputs, WhileModel, UnrolledWhile(n));
    ASSERT_EQ(grads.size(), 2u);  // x, w
    if (n == 0) {
      // No iteration: loss = sum(x c), so dx = c and dw = 0.
      EXPECT_EQ(grads[0], inputs[4].values);
      EXPECT_THAT(grads[1], ::testing::Each(0.0));
    } else {
      EXPECT_GT(Largest({grads[1]}), 1e-3);
    }
  }
}

TEST_F(AutodiffControlFlowTest, WhileInWhile) {
  for (auto [n, m] : std::vector<std::pair<int, int>>{{3, 2}, {2, 0}, {1, 3}, {0, 2}}) {
    SCOPED_TRACE(absl::StrCat(n, " outer, ", m, " inner"));
    const std::vector<Input> inputs = WithVectors(
        {Scalar("i0", 0), Scalar("j0", 0), Scalar("n", n), Scalar("m", m)}, {"x", "w", "c"}, 13);
    const std::vector<std::vector<double>> grads =
        ExpectGradients(inputs, NestedModel, UnrolledNested(n, m));
    ASSERT_EQ(grads.size(), 2u);
    EXPECT_GT(Largest({grads[0]}), 1e-3);
    if (n > 0 && m > 0) {
      EXPECT_GT(Largest({grads[1]}), 1e-3);
    }
  }
}

TEST_F(AutodiffControlFlowTest, CondInWhile) {
  for (int n : {1, 4, 7}) {
    SCOPED_TRACE(n);
    const std::vector<Input> inputs =
        WithVectors({Scalar("i0", 0), Scalar("n", n)}, {"x", "w", "c"}, 17);
    const std::vector<std::vector<double>> grads =
        ExpectGradients(inputs, CondInWhileModel, UnrolledCondInWhile(n));
    ASSERT_EQ(grads.size(), 2u);
    EXPECT_GT(Largest(grads), 1e-3);
  }
}

// The rewrite: the forward loop writes rows of its stacks, the backward loop reads them,
// and the forward loop's original outputs keep their values.
TEST_F(AutodiffControlFlowTest, ForwardLoopSavesWhatItsGradientReads) {
  const std::vector<Input> inputs =
      WithVectors({Scalar("i0", 0), Scalar("n", 3)}, {"x", "w", "c"}, 19);
  absl::StatusOr<Built> built = BuildProgram(inputs, WhileModel);
  ASSERT_TRUE(built.ok()) << built.status();
  int writes = 0, reads = 0, loops = 0;
  for (int b = 0; b < built->backward.num_blocks(); ++b) {
    for (const ir::OpDesc& op : built->backward.block(b).ops()) {
      writes += op.type == "write_row";
      reads += op.type == "read_row";
      loops += op.type == ir::kWhileOp;
    }
  }
  EXPECT_EQ(loops, 2);
  EXPECT_GT(writes, 0);
  EXPECT_EQ(reads, writes);
  EXPECT_EQ(Run(built->backward, inputs, {built->loss}, 1),
            Run(built->forward, inputs, {built->loss}, 1));
}

// A recurrent model trained through a while loop: h <- tanh(W x_t + U h + b) over the rows
// x_t of a sequence (read_row at the loop's i64 counter), then a linear readout and an MSE
// loss; Sgd's Minimize appends the backward pass (the parameters are captures of the loop
// body) and the updates. Run for several steps through the executor on two streams, the
// loss falls steadily.
TEST_F(AutodiffControlFlowTest, RecurrentModelTrainsThroughAWhileLoop) {
  constexpr int64_t kSteps = 4, kBatch = 3, kIn = 2, kHidden = 5;
  Program main(&registry_), startup(&registry_);
  std::string loss_name;
  {
    ProgramGuard guard(main, startup);
    nn::LinearOptions f64;
    f64.dtype = DataType::kF64;
    const Var xs = Data("xs", Shape({kSteps, kBatch, kIn}), DataType::kF64).value();
    const Var h0 = Data("h0", Shape({kBatch, kHidden}), DataType::kF64).value();
    const Var target = Data("target", Shape({kBatch, 1}), DataType::kF64).value();
    const nn::Linear input = nn::Linear::Create(kIn, kHidden, f64).value();
    const nn::Linear recur = nn::Linear::Create(kHidden, kHidden, f64).value();
    const nn::Linear readout = nn::Linear::Create(kHidden, 1, f64).value();
    const Value t0 = Get(fn::FillConstant(Shape(), 0, DataType::kI64));
    const Value steps = Get(fn::FillConstant(Shape(), kSteps, DataType::kI64));
    fn::WhileOptions options;
    options.max_iterations = kSteps;
    absl::StatusOr<std::vector<Value>> out = fn::WhileLoop(
        [&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], steps); },
        [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
          SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> row,
                                  AppendOp(main, "read_row", {{xs}, {vars[0].var()}}));
          SLUICE_ASSIGN_OR_RETURN(Var a, input(row[0][0]));
          SLUICE_ASSIGN_OR_RETURN(Var b, recur(vars[1].var()));
          SLUICE_ASSIGN_OR_RETURN(Value sum, fn::Add(a, b));
          SLUICE_ASSIGN_OR_RETURN(Value h, fn::Tanh(sum));
          SLUICE_ASSIGN_OR_RETURN(Value t, fn::Increment(vars[0]));
          return std::vector<Value>{t, h};
        },
        {t0, h0}, options);
    ASSERT_TRUE(out.ok()) << out.status();
    const Var y = readout((*out)[1].var()).value();
    const Var loss = nn::MseLoss(y, target).value();
    loss_name = loss.name();
    absl::StatusOr<std::vector<std::pair<Var, Var>>> params = Sgd(0.02).Minimize(loss);
    ASSERT_TRUE(params.ok()) << params.status();
    EXPECT_EQ(params->size(), 6u);  // every weight and bias, all read inside the loop or after
  }
  ASSERT_TRUE(main.desc().Validate().ok()) << main.desc().Validate();
  std::mt19937 rng(23);
  const Feeds feeds = {
      {"xs", HostTensor::FromVector(RandomValues(rng, kSteps * kBatch * kIn, -1, 1),
                                    Shape({kSteps, kBatch, kIn}))},
      {"h0", HostTensor::FromVector(std::vector<double>(kBatch * kHidden, 0.0),
                                    Shape({kBatch, kHidden}))},
      {"target", HostTensor::FromVector(RandomValues(rng, kBatch, -0.5, 0.5), Shape({kBatch, 1}))}};
  ExecutorOptions options;
  options.interpreter.compute_streams = 2;
  Executor executor(&context_->registry(), context_->vm(), options);
  Scope scope;
  ASSERT_TRUE(executor.Run(startup.desc(), {}, {}, &scope).ok());
  std::vector<double> losses;
  for (int step = 0; step < 40; ++step) {
    absl::StatusOr<RunResult> result = executor.Run(main.desc(), feeds, {loss_name}, &scope);
    ASSERT_TRUE(result.ok()) << result.status();
    losses.push_back(result->fetches[0].ToVector<double>()[0]);
  }
  for (size_t k = 1; k < losses.size(); ++k) EXPECT_LT(losses[k], losses[k - 1]) << "step " << k;
  EXPECT_LT(losses.back(), 0.2 * losses.front());

  // The example of examples/control_flow/README.md is this model, written out when asked.
  if (const char* dir = std::getenv("SLUICE_WRITE_RNN_EXAMPLE")) {
    const std::string prefix = absl::StrCat(dir, "/");
    ASSERT_TRUE(main.desc().Save(prefix + "rnn_main.program").ok());
    ASSERT_TRUE(startup.desc().Save(prefix + "rnn_startup.program").ok());
    for (const auto& [name, tensor] : feeds) {
      ASSERT_TRUE(io::WriteNpy(absl::StrCat(prefix, "rnn_", name, ".npy"),
                               io::NpyArray{tensor.dtype, tensor.shape, tensor.bytes})
                      .ok());
    }
  }
}

TEST_F(AutodiffControlFlowTest, WhileWithoutMaxIterationsIsRefused) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  Var i0 = Data("i0", Shape(), DataType::kF64).value();
  Var n = Data("n", Shape(), DataType::kF64).value();
  Var x = Data("x", Shape({3}), DataType::kF64).value();
  x.set_stop_gradient(false);
  absl::StatusOr<std::vector<Value>> out = fn::WhileLoop(
      [&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
      [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
        return std::vector<Value>{Get(fn::Increment(vars[0])), Get(fn::Tanh(vars[1]))};
      },
      {i0, x});
  ASSERT_TRUE(out.ok()) << out.status();
  const Var loss = Get(fn::ReduceSum((*out)[1])).var();
  const ir::ProgramDesc before = main.desc();
  absl::StatusOr<std::vector<std::pair<Var, Var>>> grads = AppendBackward(loss);
  EXPECT_EQ(grads.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(grads.status().message(), HasSubstr("'while'"));
  EXPECT_THAT(grads.status().message(), HasSubstr("max_iterations"));
  EXPECT_EQ(main.desc(), before);
  EXPECT_EQ(main.current_block(), 0);
}

}  // namespace
}  // namespace sluice::framework::autodiff_control_flow_test
