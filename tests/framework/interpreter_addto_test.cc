// The add-to pass (framework/interpreter/addto_pass.h): a gradient summed from three unary
// grads is accumulated in its own buffer (the sum goes, the contributions' temporaries are
// never allocated, the peak falls), bit for bit as the sum computed it, on cpu over one to
// three streams and on two sim streams under the sync checker; one variant per rule breaks
// exactly that rule and keeps the sum; the gated MLP trains with the same losses with the
// pass on and off; and random differentiable programs give the same gradients, bit for bit,
// on cpu over 1-3 streams and on two sim streams. (A kernel that overwrote instead of
// adding fails all but the rule test; a sim that poisoned added-into outputs fails the
// random programs, through matmul_grad, whose outputs are in no in-place pair.)
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "framework/autodiff/backward.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/functional.h"
#include "framework/builder/layers.h"
#include "framework/builder/program.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/interpreter_options.h"
#include "framework/ir/program_desc.h"
#include "framework/models/gated_mlp.h"
#include "gtest/gtest.h"
#include "tests/framework/compiled_program_test_util.h"
#include "tests/framework/program_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::framework::interpreter_addto_test {
namespace {

using program_test::AddVar;
using program_test::Fill;
using program_test::Op;
using program_test::Var;

const Shape kSquare({4, 4});

ExecutorOptions Unfused(bool addto, Device device = program_test::kCpu, int streams = 1,
                        bool inplace = true) {
  ExecutorOptions options;
  options.interpreter.inplace = inplace;
  options.interpreter.device = device;
  options.interpreter.compute_streams = streams;
  options.interpreter.compile_subgraphs = false;
  options.interpreter.addto = addto;
  return options;
}

// What each variant changes in the base program.
struct Variant {
  bool reversed = false;            // the sum lists its inputs against the writers' order
  bool fetch_contribution = false;  // gs is fetched too
  bool read_contribution = false;   // relu(gs) is fetched: gs has a second reader
  bool cannot_add = false;          // gs = mul(s, g): mul adds into nothing
  bool out_written_before = false;  // out = fill_constant first: the sum is not its first write
};

// x, g fed; t = tanh(x), s = sigmoid(x), e = exp(x); gt = tanh_grad(t, g),
// gs = sigmoid_grad(s, g), ge = exp_grad(e, g); out = sum(gt, gs, ge); out, t, s, e fetched.
ir::ProgramDesc Program(const Variant& v, std::vector<std::string>& fetches) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* name : {"x", "g", "t", "s", "e", "gt", "gs", "ge", "out", "r"}) {
    AddVar(b, Var(name, kSquare));
  }
  // t, s and e are fetched, so they live to the end: the contributions cannot take their
  // storage, and all of them are live at the sum.
  fetches = {"out", "t", "s", "e"};
  b.AppendOp(Op("tanh", {{"X", {"x"}}}, {{"Out", {"t"}}}));
  b.AppendOp(Op("sigmoid", {{"X", {"x"}}}, {{"Out", {"s"}}}));
  b.AppendOp(Op("exp", {{"X", {"x"}}}, {{"Out", {"e"}}}));
  if (v.out_written_before)
    b.AppendOp(Op("fill_constant", {}, {{"Out", {"out"}}}, Fill(kSquare, 2.0)));
  b.AppendOp(Op("tanh_grad", {{"Out", {"t"}}, {"OutGrad", {"g"}}}, {{"XGrad", {"gt"}}}));
  if (v.cannot_add) {
    b.AppendOp(Op("mul", {{"X", {"s"}}, {"Y", {"g"}}}, {{"Out", {"gs"}}}));
  } else {
    b.AppendOp(Op("sigmoid_grad", {{"Out", {"s"}}, {"OutGrad", {"g"}}}, {{"XGrad", {"gs"}}}));
  }
  b.AppendOp(Op("exp_grad", {{"Out", {"e"}}, {"OutGrad", {"g"}}}, {{"XGrad", {"ge"}}}));
  const std::vector<std::string> order = v.reversed ? std::vector<std::string>{"ge", "gs", "gt"}
                                                    : std::vector<std::string>{"gt", "gs", "ge"};
  b.AppendOp(Op("sum", {{"X", order}}, {{"Out", {"out"}}}));
  if (v.fetch_contribution) fetches.push_back("gs");
  if (v.read_contribution) {
    b.AppendOp(Op("relu", {{"X", {"gs"}}}, {{"Out", {"r"}}}));
    fetches.push_back("r");
  }
  return p;
}

Feeds BaseFeeds() {
  std::vector<float> x(16), g(16);
  for (size_t i = 0; i < 16; ++i) {
    x[i] = 0.37f * static_cast<float>(i) - 2.9f;
    g[i] = 1.0f / (1.0f + static_cast<float>(i)) - 0.31f;
  }
  return {{"x", HostTensor::FromVector(x, kSquare)}, {"g", HostTensor::FromVector(g, kSquare)}};
}

class InterpreterAddToTest : public ::testing::Test {
 protected:
  InterpreterAddToTest() : context_(program_test::NewContext(1, /*check_sync=*/true)) {}
  ~InterpreterAddToTest() override {
    EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0)
        << context_->vm()->sync_checker()->status().message();
  }

  // Runs the variant with the pass off and on (fetches compared bit for bit); the stats of
  // each.
  std::pair<LoweringStats, LoweringStats> Run(const Variant& v, Device device = program_test::kCpu,
                                              int streams = 1, bool inplace = true) {
    std::vector<std::string> fetches;
    const ir::ProgramDesc program = Program(v, fetches);
    LoweringStats stats[2];
    std::vector<HostTensor> results[2];
    for (int addto = 0; addto < 2; ++addto) {
      Executor executor(&context_->registry(), context_->vm(),
                        Unfused(addto == 1, device, streams, inplace));
      Scope scope;
      for (int step = 0; step < 2; ++step) {
        absl::StatusOr<RunResult> result = executor.Run(program, BaseFeeds(), fetches, &scope);
        EXPECT_TRUE(result.ok()) << result.status();
        if (!result.ok()) return {stats[0], stats[1]};
        results[addto] = result->fetches;
      }
      stats[addto] = executor.LastLowering().value();
    }
    EXPECT_EQ(results[0].size(), results[1].size());
    for (size_t f = 0; f < results[0].size() && f < results[1].size(); ++f) {
      EXPECT_TRUE(compiled_test::SameValues(results[0][f], results[1][f])) << "fetch " << f;
    }
    return {stats[0], stats[1]};
  }

  std::unique_ptr<eager::Context> context_;
};

TEST_F(InterpreterAddToTest, ThreeContributionsAccumulateWhereTheyLie) {
  struct Where {
    Device device;
    int streams;
  };
  for (const Where& w : {Where{program_test::kCpu, 1}, Where{program_test::kCpu, 2},
                         Where{program_test::kCpu, 3}, Where{program_test::kSim, 2}}) {
    SCOPED_TRACE(w.device.ToString() + " x" + std::to_string(w.streams));
    for (bool inplace : {false, true}) {
      const auto [off, on] = Run({}, w.device, w.streams, inplace);
      EXPECT_EQ(off.addto_sums, 0);
      EXPECT_EQ(on.addto_sums, 1);
      EXPECT_EQ(on.addto_writes, 2);
      EXPECT_EQ(on.ops, off.ops - 1);
      if (w.device == program_test::kCpu) {
        // Off: gt, gs, ge and out live at the sum beside t, s and e (7 x 64 B); on: out
        // alone beside them.
        EXPECT_EQ(off.peak_temporary_bytes, 448);
        EXPECT_EQ(on.peak_temporary_bytes, 256);
      } else {
        // On sim the fetch copies to the host peak first.
        EXPECT_LE(on.peak_temporary_bytes, off.peak_temporary_bytes);
      }
    }
  }
}

// The first contributor is skipped (its input comes from a uniform_random whose bounds are
// crossed, which fails), so the sum's output carries that error. The later contributors must
// not add into it as if it held a value: the gradient and the persistable copied from it
// stay poisoned, and the next run is refused for it, as without the pass.
TEST_F(InterpreterAddToTest, AFailedContributorPoisonsTheAccumulatedGradient) {
  std::vector<std::string> fetches;
  ir::ProgramDesc program = Program({}, fetches);
  ir::BlockDesc& b = program.mutable_global_block();
  AddVar(b, Var("bad", kSquare));
  AddVar(b, Var("p", kSquare, /*persistable=*/true));
  b.AppendOp(
      Op("uniform_random", {}, {{"Out", {"bad"}}},
         vm::AttrMap().Set("shape", std::vector<int64_t>{4, 4}).Set("min", 1.0).Set("max", 0.0)));
  b.AppendOp(Op("assign", {{"X", {"out"}}}, {{"Out", {"p"}}}));
  // tanh reads `bad` instead of x: t, and so gt (the first contribution), are skipped.
  for (ir::OpDesc& op : b.mutable_ops()) {
    if (op.type == "tanh") op.inputs = {{"X", {"bad"}}};
  }
  // uniform_random must come first: move it to the front.
  std::vector<ir::OpDesc>& ops = b.mutable_ops();
  std::rotate(ops.begin(), ops.end() - 2, ops.end() - 1);
  for (int addto = 0; addto < 2; ++addto) {
    SCOPED_TRACE(addto == 1 ? "add-to on" : "add-to off");
    Executor executor(&context_->registry(), context_->vm(), Unfused(addto == 1));
    Scope scope;
    absl::StatusOr<RunResult> first = executor.Run(program, BaseFeeds(), {"t"}, &scope);
    ASSERT_FALSE(first.ok());
    EXPECT_EQ(executor.LastLowering().value().addto_sums, addto);
    absl::StatusOr<RunResult> second = executor.Run(program, BaseFeeds(), {"t"}, &scope);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(std::string(second.status().message()).find("persistable 'p'"), std::string::npos)
        << second.status();
  }
}

// The sum's value, computed by hand in the sum's order: the pass must reproduce it.
TEST_F(InterpreterAddToTest, TheAccumulatedValueIsTheSumsBitForBit) {
  std::vector<std::string> fetches;
  const ir::ProgramDesc program = Program({}, fetches);
  Executor executor(&context_->registry(), context_->vm(), Unfused(true));
  Scope scope;
  const Feeds feeds = BaseFeeds();
  absl::StatusOr<RunResult> result = executor.Run(program, feeds, fetches, &scope);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(executor.LastLowering().value().addto_sums, 1);
  const std::vector<float> x = feeds[0].second.ToVector<float>();
  const std::vector<float> g = feeds[1].second.ToVector<float>();
  const std::vector<float> got = result->fetches[0].ToVector<float>();
  ASSERT_EQ(got.size(), 16u);
  for (size_t i = 0; i < 16; ++i) {
    const float t = std::tanh(x[i]);
    const float s = 1.0f / (1.0f + std::exp(-x[i]));
    const float e = std::exp(x[i]);
    const float gt = g[i] * (1.0f - t * t);
    const float gs = g[i] * s * (1.0f - s);
    const float ge = g[i] * e;
    EXPECT_NEAR(got[i], (gt + gs) + ge, 1e-5f * (1.0f + std::abs(ge))) << i;
  }
}

TEST_F(InterpreterAddToTest, EachBrokenRuleKeepsTheSum) {
  struct Case {
    const char* rule;
    Variant variant;
  };
  const std::vector<Case> cases = {
      {"the sum's order is not the writers'", {.reversed = true}},
      {"a contribution is fetched", {.fetch_contribution = true}},
      {"a contribution has another reader", {.read_contribution = true}},
      {"a later contributor cannot add (mul)", {.cannot_add = true}},
      {"the sum is not its output's first write", {.out_written_before = true}},
  };
  for (const Case& c : cases) {
    const auto [off, on] = Run(c.variant);
    EXPECT_EQ(on.addto_sums, 0) << c.rule;
    EXPECT_EQ(on.ops, off.ops) << c.rule;
  }
}

// Autodiff's own sums: the gated MLP's h feeds tanh, sigmoid and a scale, so its gradient
// has three contributions per hidden layer. Adam's losses over several steps are the same
// bits with the pass on and off, on cpu and on two sim streams under the sync checker.
TEST_F(InterpreterAddToTest, TheGatedMlpTrainsToTheSameLosses) {
  GatedMlpOptions mlp;
  mlp.batch = 16;
  mlp.features = 8;
  mlp.hidden = 12;
  GatedMlp model = BuildGatedMlp(&context_->registry(), mlp).value();
  const Feeds feeds = {{model.x, GatedMlpInput(mlp)}, {model.y, GatedMlpTarget(mlp)}};
  for (const Device& device : {program_test::kCpu, program_test::kSim}) {
    SCOPED_TRACE(device.ToString());
    std::vector<std::vector<uint8_t>> losses[2];
    int64_t sums = 0;
    for (int addto = 0; addto < 2; ++addto) {
      Executor executor(&context_->registry(), context_->vm(),
                        Unfused(addto == 1, device, device == program_test::kSim ? 2 : 1));
      Scope scope;
      ASSERT_TRUE(executor.Run(model.startup->desc(), {}, {}, &scope).ok());
      for (int step = 0; step < 6; ++step) {
        absl::StatusOr<RunResult> result =
            executor.Run(model.main->desc(), feeds, {model.loss}, &scope);
        ASSERT_TRUE(result.ok()) << result.status();
        losses[addto].push_back(result->fetches[0].bytes);
      }
      if (addto == 1) sums = executor.LastLowering().value().addto_sums;
    }
    EXPECT_EQ(losses[0], losses[1]);
    EXPECT_NE(losses[1].front(), losses[1].back());  // training moved the loss
    EXPECT_EQ(sums, mlp.hidden_layers);
  }
}

// A random differentiable program (seeded): x -> Linear(4, 4) -> h_0, then ops taking a
// random earlier value — tanh, sigmoid, relu, exp of a scaled value, scale, add, mul, a
// scaled matmul, a cond — so
// that values have several readers and their gradients several contributions; the loss is
// the mean of the sum of the last three values. Its parameter gradients are fetched.
struct RandomTraining {
  std::unique_ptr<framework::Program> main;
  std::unique_ptr<framework::Program> startup;
  std::vector<std::string> fetches;
};

RandomTraining MakeRandomTraining(const ops::OpRegistry* registry, uint32_t seed) {
  RandomTraining r;
  r.main = std::make_unique<framework::Program>(registry);
  r.startup = std::make_unique<framework::Program>(registry);
  std::mt19937 rng(seed);
  ProgramGuard guard(*r.main, *r.startup);
  const framework::Var x = Data("x", kSquare).value();
  nn::Linear linear = nn::Linear::Create(4, 4).value();
  std::vector<Value> pool = {linear(x).value()};
  for (int i = 0; i < 10; ++i) {
    const Value& a = pool[rng() % pool.size()];
    const Value& b = pool[rng() % pool.size()];
    switch (rng() % 9) {
      case 0:
        pool.push_back(fn::Tanh(a).value());
        break;
      case 1:
        pool.push_back(fn::Sigmoid(a).value());
        break;
      case 2:
        pool.push_back(fn::Relu(a).value());
        break;
      case 3:
        pool.push_back(fn::Exp(fn::Scale(a, 0.25).value()).value());
        break;
      case 4:
        pool.push_back(fn::Scale(a, 0.5, 0.125).value());
        break;
      case 5:
        pool.push_back(fn::Add(a, b).value());
        break;
      case 6:
        pool.push_back(fn::Mul(a, b).value());
        break;
      case 7: {  // a cond: its gradient is a control-flow op, which adds into nothing
        const Value pred =
            fn::GreaterThan(fn::ReduceMean(a).value(), fn::ReduceMean(b).value()).value();
        pool.push_back(fn::Cond(
                           pred,
                           [&]() -> absl::StatusOr<std::vector<Value>> {
                             return std::vector<Value>{fn::Tanh(a).value()};
                           },
                           [&]() -> absl::StatusOr<std::vector<Value>> {
                             return std::vector<Value>{fn::Scale(b, 2.0).value()};
                           })
                           .value()[0]);
        break;
      }
      default:  // both gradients of a matmul may add into their sums
        pool.push_back(fn::Scale(fn::Matmul(a, b).value(), 0.25).value());
        break;
    }
  }
  Value total = pool[pool.size() - 1];
  for (size_t k = pool.size() - 3; k + 1 < pool.size(); ++k)
    total = fn::Add(total, pool[k]).value();
  const framework::Var loss = fn::ReduceMean(total).value().var();
  r.fetches = {loss.name()};
  // Held in a local: a range-for over `.value()` of the temporary would outlive it.
  const std::vector<std::pair<framework::Var, framework::Var>> grads = AppendBackward(loss).value();
  for (const auto& [param, grad] : grads) r.fetches.push_back(grad.name());
  return r;
}

// The pass on against off, bit for bit, over random programs: every fetched gradient on cpu
// over 1-3 streams and on two sim streams under the sync checker, for three steps of plain
// runs (the same parameters each step: the program has no optimizer).
TEST_F(InterpreterAddToTest, RandomProgramsGiveTheSameGradients) {
  int64_t sums = 0;
  for (uint32_t seed = 1; seed <= 16; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const RandomTraining r = MakeRandomTraining(&context_->registry(), seed);
    const Device device = seed % 4 == 0 ? program_test::kSim : program_test::kCpu;
    const int streams = device == program_test::kSim ? 2 : 1 + static_cast<int>(seed % 3);
    std::vector<std::vector<HostTensor>> results[2];
    for (int addto = 0; addto < 2; ++addto) {
      Executor executor(&context_->registry(), context_->vm(),
                        Unfused(addto == 1, device, streams));
      Scope scope;
      ASSERT_TRUE(executor.Run(r.startup->desc(), {}, {}, &scope).ok());
      for (int step = 0; step < 3; ++step) {
        absl::StatusOr<RunResult> result =
            executor.Run(r.main->desc(), {{"x", BaseFeeds()[0].second}}, r.fetches, &scope);
        ASSERT_TRUE(result.ok()) << result.status();
        results[addto].push_back(result->fetches);
      }
      if (addto == 1) sums += executor.LastLowering().value().addto_sums;
    }
    for (size_t step = 0; step < 3; ++step) {
      for (size_t f = 0; f < r.fetches.size(); ++f) {
        EXPECT_TRUE(compiled_test::SameValues(results[0][step][f], results[1][step][f]))
            << "fetch '" << r.fetches[f] << "' step " << step;
      }
    }
  }
  EXPECT_GT(sums, 4);  // the programs do have sums the pass takes apart
}

}  // namespace
}  // namespace sluice::framework::interpreter_addto_test
