// Graphs called from eager code (framework/graph): a call is one instruction on the
// device's launcher stream whose outputs are eager tensors; new input shapes trace again,
// and the cache of specializations is bounded (least recently used dropped); eager
// parameters are bound, not copied, and a graph updates them in place; a failing op inside
// poisons the outputs and the next read names it, while the context stays usable; bad
// calls are refused naming the culprit; the tracer shows the launch and its steps on the
// launcher stream among the eager ops; the recorder writes the launch's steps.
#include "framework/graph/graph.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/status.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/optim/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/sync_checker.h"
#include "vm/tracer.h"

namespace sluice::framework::graph::graph_test {
namespace {

using ::testing::HasSubstr;

#define EXPECT_OK(expr)             \
  do {                              \
    const absl::Status _s = (expr); \
    EXPECT_TRUE(_s.ok()) << _s;     \
  } while (0)
#define ASSERT_OK(expr)             \
  do {                              \
    const absl::Status _s = (expr); \
    ASSERT_TRUE(_s.ok()) << _s;     \
  } while (0)

eager::Context NewContext(bool check_sync = true) {
  eager::ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.sim.max_jitter_us = 5;
  options.runtime.enable_cuda = false;
  options.vm.check_sync = check_sync;
  return eager::Context::Create(options).value();
}

std::vector<float> Values(const eager::Tensor& t) { return t.ToVector<float>().value(); }

// x + 1.
GraphFunction PlusOne() {
  return [](Trace&, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
    SLUICE_ASSIGN_OR_RETURN(Value y, fn::Scale(in[0], 1.0, 1.0));
    return std::vector<Value>{y};
  };
}

class GraphTest : public ::testing::TestWithParam<const char*> {
 protected:
  Device device() const { return Device::Parse(GetParam()).value(); }
  eager::Context ctx_ = NewContext();
};

TEST_P(GraphTest, TrivialCallReturnsEagerTensorsAtOnce) {
  Graph g = Graph::Create(ctx_, PlusOne(), {.name = "plus_one"}).value();
  eager::Tensor x = ctx_.FromVector<float>({1, 2, 3, 4}, Shape({4}), device()).value();
  std::vector<eager::Tensor> out = g({x}).value();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device(), device());
  EXPECT_EQ(out[0].shape(), Shape({4}));
  // The output feeds eager ops and another call, all ordered by the engine.
  eager::Tensor twice = fn::Add(out[0], out[0]).value();
  std::vector<eager::Tensor> again = g({twice}).value();
  EXPECT_EQ(Values(out[0]), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(Values(again[0]), (std::vector<float>{5, 7, 9, 11}));
  EXPECT_EQ(g.stats().traces, 1);
  EXPECT_EQ(g.stats().calls, 2);
  EXPECT_OK(ctx_.Sync());
  EXPECT_EQ(ctx_.vm()->sync_checker()->violation_count(), 0);
}

TEST_P(GraphTest, DeviceResidentCallsCopyNothingThroughTheHost) {
  Graph g = Graph::Create(ctx_, PlusOne(), {.name = "resident"}).value();
  eager::Tensor x = ctx_.FromVector<float>({1, 2, 3, 4}, Shape({4}), device()).value();
  ASSERT_TRUE(g({x}).ok());  // traced (the trace itself copies nothing either)
  EXPECT_OK(ctx_.Sync());
  const vm::VmStats before = ctx_.vm()->stats();
  for (int i = 0; i < 5; ++i) x = g({x}).value()[0];
  EXPECT_OK(ctx_.Sync());
  const vm::VmStats after = ctx_.vm()->stats();
  EXPECT_EQ(after.host_to_device_copies, before.host_to_device_copies) << after.ToString();
  EXPECT_EQ(after.device_to_host_copies, before.device_to_host_copies) << after.ToString();
  EXPECT_GE(after.op_calls - before.op_calls, 5) << after.ToString();
  // The counter moves for a read (so the check above can fail).
  EXPECT_EQ(Values(x), (std::vector<float>{6, 7, 8, 9}));
  EXPECT_GT(ctx_.vm()->stats().device_to_host_copies, after.device_to_host_copies);
}

TEST_P(GraphTest, NewShapesTraceAgainAndTheCacheDropsTheLeastRecentlyUsed) {
  GraphOptions options;
  options.name = "bounded";
  options.max_specializations = 2;
  Graph g = Graph::Create(ctx_, PlusOne(), options).value();
  auto call = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n), 1.0f);
    eager::Tensor x = ctx_.FromVector(v, Shape({n}), device()).value();
    std::vector<float> y = Values(g({x}).value()[0]);
    EXPECT_EQ(y, std::vector<float>(static_cast<size_t>(n), 2.0f)) << n;
  };
  call(4);
  call(5);
  call(4);  // a hit: 5 is now the least recently used
  EXPECT_EQ(g.stats().traces, 2);
  call(6);  // evicts 5
  call(4);  // still cached
  EXPECT_EQ(g.stats().traces, 3);
  call(5);  // traced again, evicting 6
  const GraphStats stats = g.stats();
  EXPECT_EQ(stats.traces, 4) << stats.ToString();
  EXPECT_EQ(stats.evictions, 2) << stats.ToString();
  EXPECT_EQ(stats.specializations, 2) << stats.ToString();
  // A dtype is part of the key too.
  eager::Tensor wide = ctx_.FromVector<double>({1, 2, 3, 4}, Shape({4}), device()).value();
  EXPECT_EQ(g({wide}).value()[0].ToVector<double>().value(), (std::vector<double>{2, 3, 4, 5}));
  EXPECT_EQ(g.stats().traces, 5);
}

TEST_P(GraphTest, ParametersAreSharedAndUpdatedInPlace) {
  eager::Tensor w = ctx_.FromVector<float>({1, 2, 3, 4}, Shape({4}), device()).value();
  // One SGD step on loss = sum(w * x): w <- w - 0.5 * x; the output is the loss.
  Graph g = Graph::Create(
                ctx_,
                [&](Trace& t, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
                  SLUICE_ASSIGN_OR_RETURN(Var p, t.Param(w));
                  SLUICE_ASSIGN_OR_RETURN(Var again, t.Param(w));
                  EXPECT_EQ(p.name(), again.name());  // one variable per tensor
                  SLUICE_ASSIGN_OR_RETURN(Value prod, fn::Mul(p, in[0]));
                  SLUICE_ASSIGN_OR_RETURN(Value loss, fn::ReduceSum(prod));
                  Sgd sgd(0.5);
                  SLUICE_RETURN_IF_ERROR(sgd.Minimize(loss.var()).status());
                  return std::vector<Value>{loss};
                })
                .value();
  eager::Tensor x = ctx_.FromVector<float>({1, 1, 2, 2}, Shape({4}), device()).value();
  std::vector<eager::Tensor> loss = g({x}).value();
  // The eager op after the call reads the updated storage: no copy of w was made.
  eager::Tensor w_plus = fn::Add(w, w).value();
  EXPECT_EQ(Values(loss[0]), (std::vector<float>{1 + 2 + 6 + 8}));
  EXPECT_EQ(Values(w), (std::vector<float>{0.5f, 1.5f, 2, 3}));
  EXPECT_EQ(Values(w_plus), (std::vector<float>{1, 3, 4, 6}));
  loss = g({x}).value();
  EXPECT_EQ(Values(loss[0]), (std::vector<float>{0.5f + 1.5f + 4 + 6}));
  EXPECT_EQ(Values(w), (std::vector<float>{0, 1, 1, 2}));
  EXPECT_OK(ctx_.Sync());
  EXPECT_EQ(ctx_.vm()->sync_checker()->violation_count(), 0);
}

TEST_P(GraphTest, AnUpdateBumpsTheParametersVersionSoBackwardSeesAStaleSave) {
  eager::Tensor w = ctx_.FromVector<float>({1, 2}, Shape({2}), device()).value();
  ASSERT_OK(autograd::SetRequiresGrad(w));
  Graph halve =
      Graph::Create(
          ctx_,
          [&](Trace& t, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
            SLUICE_ASSIGN_OR_RETURN(Var p, t.Param(w));
            SLUICE_ASSIGN_OR_RETURN(Value half, fn::Scale(p, 0.5));
            SLUICE_RETURN_IF_ERROR(AppendOpInto(t.main(), "assign", {{half.var()}}, {{p}}));
            return std::vector<Value>{in[0]};
          })
          .value();
  // mul saves w for its gradient; the graph then halves w in place.
  eager::Tensor y = fn::ReduceSum(fn::Mul(w, w).value()).value();
  eager::Tensor x = ctx_.FromVector<float>({0}, Shape({1}), device()).value();
  ASSERT_TRUE(halve({x}).ok());
  EXPECT_EQ(Values(w), (std::vector<float>{0.5f, 1}));
  absl::Status backward = autograd::Backward(y);
  EXPECT_FALSE(backward.ok());
  EXPECT_THAT(backward.message(), HasSubstr("modified in place"));
  EXPECT_EQ(ctx_.vm()->sync_checker()->violation_count(), 0);
}

TEST_P(GraphTest, FailingOpPoisonsTheOutputsAndTheContextStaysUsable) {
  // softmax_with_cross_entropy fails at run time for a label out of range.
  Graph g =
      Graph::Create(ctx_,
                    [](Trace&, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_ASSIGN_OR_RETURN(auto out, fn::SoftmaxWithCrossEntropy(in[0], in[1]));
                      SLUICE_ASSIGN_OR_RETURN(Value mean, fn::ReduceMean(out.second));
                      return std::vector<Value>{mean, out.first};
                    },
                    {.name = "xent"})
          .value();
  eager::Tensor logits =
      ctx_.FromVector<float>({1, 2, 3, 4, 5, 6}, Shape({2, 3}), device()).value();
  eager::Tensor bad = ctx_.FromVector<int64_t>({0, 7}, Shape({2, 1}), device()).value();
  std::vector<eager::Tensor> out = g({logits, bad}).value();  // submitted: no error yet
  eager::Tensor after = fn::Add(out[0], out[0]).value();
  absl::StatusOr<std::vector<float>> read = after.ToVector<float>();
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("softmax_with_cross_entropy"));
  EXPECT_THAT(read.status().message(), HasSubstr("block 0 op #0"));
  EXPECT_FALSE(ctx_.Sync().ok());  // the error is reported once
  EXPECT_OK(ctx_.Sync());
  // The same graph with good labels, and eager ops, work again.
  eager::Tensor good = ctx_.FromVector<int64_t>({0, 2}, Shape({2, 1}), device()).value();
  out = g({logits, good}).value();
  const float expected = 0.5f * (std::log(std::exp(1.f) + std::exp(2.f) + std::exp(3.f)) - 1.f +
                                 std::log(std::exp(4.f) + std::exp(5.f) + std::exp(6.f)) - 6.f);
  EXPECT_NEAR(Values(out[0])[0], expected, 1e-5);
  EXPECT_EQ(Values(fn::Add(logits, logits).value())[5], 12.0f);
  EXPECT_EQ(ctx_.vm()->sync_checker()->violation_count(), 0);
}

TEST_P(GraphTest, BadCallsAreRefusedNamingTheCulprit) {
  Graph g = Graph::Create(ctx_, PlusOne(), {.name = "g"}).value();
  absl::StatusOr<std::vector<eager::Tensor>> empty = g({eager::Tensor()});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("graph 'g': input 0 is an empty Tensor"));
  eager::Tensor a = ctx_.FromVector<float>({1}, Shape({1}), device()).value();
  eager::Tensor elsewhere = ctx_.FromVector<float>({1}, Shape({1}), Device::Cpu()).value();
  if (device() != Device::Cpu()) {
    absl::StatusOr<std::vector<eager::Tensor>> mixed = g({a, elsewhere});
    EXPECT_THAT(mixed.status().message(), HasSubstr("input 1 is on cpu"));
  }
  // The function's own error, with the graph's name; an eager output.
  Graph failing =
      Graph::Create(ctx_,
                    [](Trace&, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_ASSIGN_OR_RETURN(Value y, fn::Reshape(in[0], {7}));
                      return std::vector<Value>{y};
                    },
                    {.name = "reshape"})
          .value();
  absl::StatusOr<std::vector<eager::Tensor>> traced = failing({a});
  EXPECT_THAT(traced.status().message(), HasSubstr("graph 'reshape': "));
  EXPECT_THAT(traced.status().message(), HasSubstr("reshape"));
  Graph eager_out =
      Graph::Create(ctx_,
                    [&](Trace&, const std::vector<Value>&) -> absl::StatusOr<std::vector<Value>> {
                      return std::vector<Value>{Value(a)};
                    })
          .value();
  EXPECT_THAT(eager_out({a}).status().message(),
              HasSubstr("output 0 is not a value of the traced program"));
  // Trace::Param refuses a tensor on another device.
  if (device() != Device::Cpu()) {
    Graph param =
        Graph::Create(
            ctx_,
            [&](Trace& t, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
              SLUICE_ASSIGN_OR_RETURN(Var p, t.Param(elsewhere));
              SLUICE_ASSIGN_OR_RETURN(Value y, fn::Add(in[0], p));
              return std::vector<Value>{y};
            })
            .value();
    EXPECT_THAT(param({a}).status().message(), HasSubstr("Trace::Param: the tensor is on cpu"));
  }
  eager::Context other = NewContext(/*check_sync=*/false);
  eager::Tensor foreign = other.FromVector<float>({1}, Shape({1}), device()).value();
  EXPECT_THAT(g({foreign}).status().message(),
              HasSubstr("graph 'g': input 0 belongs to another eager context"));
  EXPECT_FALSE(Graph::Create(ctx_, nullptr).ok());
  EXPECT_FALSE(Graph::Create(ctx_, PlusOne(), {.max_specializations = 0}).ok());
  // Nothing was submitted by the refused calls; the context works.
  EXPECT_EQ(Values(g({a}).value()[0]), (std::vector<float>{2}));
}

TEST_P(GraphTest, TimelineShowsTheLaunchAndItsStepsAmongEagerOps) {
  vm::Tracer tracer;
  ctx_.vm()->SetTracer(&tracer);
  Graph g =
      Graph::Create(ctx_,
                    [](Trace&, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_ASSIGN_OR_RETURN(Value y, fn::Mul(in[0], in[0]));
                      SLUICE_ASSIGN_OR_RETURN(Value z, fn::Exp(y));
                      return std::vector<Value>{z};
                    },
                    {.name = "timeline"})
          .value();
  eager::Tensor x = ctx_.FromVector<float>({0.5f, 1}, Shape({2}), device()).value();
  eager::Tensor before = fn::Add(x, x).value();
  eager::Tensor out = g({before}).value()[0];
  eager::Tensor after = fn::Sub(out, x).value();
  ASSERT_TRUE(after.ToVector<float>().ok());
  ASSERT_OK(ctx_.Sync());
  ctx_.vm()->SetTracer(nullptr);
  std::vector<vm::Tracer::Slice> slices = tracer.Take();
  const vm::Tracer::Slice* launch = nullptr;
  int add = 0, sub = 0, inside = 0;
  for (const vm::Tracer::Slice& s : slices) {
    const std::string stream = s.stream->key().ToString();
    if (s.name == "graph 'timeline'") {
      launch = &s;
      EXPECT_THAT(stream, HasSubstr("lazy_job_launcher"));
    }
    if (s.name == "add") ++add;
    if (s.name == "sub") ++sub;
    if ((s.name == "mul" || s.name == "exp" || s.name == "assign") &&
        stream.find("lazy_job_launcher") != std::string::npos) {
      ++inside;
    }
  }
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(add, 1);
  EXPECT_EQ(sub, 1);
  EXPECT_EQ(inside, 4);  // copy in, mul, exp, copy out
  EXPECT_EQ(ctx_.vm()->sync_checker()->violation_count(), 0);
}

INSTANTIATE_TEST_SUITE_P(Devices, GraphTest, ::testing::Values("cpu", "sim:0"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param == std::string("cpu") ? "Cpu" : "Sim");
                         });

}  // namespace
}  // namespace sluice::framework::graph::graph_test
