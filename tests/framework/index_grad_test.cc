// Gradients of gather, slice, where and erf through the framework, on cpu and sim (the sync
// checker on), in f64 on small fixed-seed inputs: eager autograd of sum(op(...) * w) against
// central differences of that loss, one input element at a time (repeated gather indices,
// rank-0 indices, negative steps, broadcasting of all three where operands); and static
// autodiff (AppendBackward, Executor) giving the eager gradients bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/autodiff/backward.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/scope.h"
#include "gtest/gtest.h"
#include "ops/op_schema.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::index_grad_test {
namespace {

using Ints = std::vector<int64_t>;

// One operand of a case: f64 operands are differentiated; i32, i64 and bool ones are not.
struct Operand {
  DataType dtype;
  Shape shape;
  std::vector<double> values;
};

struct GradCase {
  std::string name;
  std::vector<Operand> operands;
  std::function<absl::StatusOr<fn::Value>(const std::vector<fn::Value>&)> call;
};

Operand F64(Shape shape, uint64_t seed, double lo = -2, double hi = 2) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(shape.NumElements());
  for (double& x : v) x = dist(rng);
  return {DataType::kF64, std::move(shape), std::move(v)};
}

Operand Bools(Shape shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(shape.NumElements());
  for (double& x : v) x = static_cast<double>(rng() % 2);
  return {DataType::kBool, std::move(shape), std::move(v)};
}

HostTensor ToHost(const Operand& o) {
  HostTensor t{o.dtype, o.shape, {}};
  t.bytes.resize(o.values.size() * SizeOf(o.dtype));
  for (size_t i = 0; i < o.values.size(); ++i) {
    uint8_t* p = t.bytes.data() + i * SizeOf(o.dtype);
    switch (o.dtype) {
      case DataType::kF64:
        std::memcpy(p, &o.values[i], 8);
        break;
      case DataType::kI64: {
        const auto v = static_cast<int64_t>(o.values[i]);
        std::memcpy(p, &v, 8);
        break;
      }
      case DataType::kI32: {
        const auto v = static_cast<int32_t>(o.values[i]);
        std::memcpy(p, &v, 4);
        break;
      }
      case DataType::kBool:
        *p = o.values[i] != 0;
        break;
      case DataType::kF32: {
        const auto v = static_cast<float>(o.values[i]);
        std::memcpy(p, &v, 4);
        break;
      }
    }
  }
  return t;
}

std::vector<double> ToDoubles(const eager::Tensor& t) {
  absl::StatusOr<std::vector<uint8_t>> bytes = t.ToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  std::vector<double> values(bytes->size() / sizeof(double));
  std::memcpy(values.data(), bytes->data(), bytes->size());
  return values;
}

std::vector<GradCase> Cases() {
  auto slice = [](Ints starts, Ints ends, Ints axes, Ints steps) {
    return
        [=](const std::vector<fn::Value>& v) { return fn::Slice(v[0], starts, ends, axes, steps); };
  };
  return {
      {"gather_repeated_rows",
       {F64({4, 3}, 1), {DataType::kI64, {3, 2}, {1, -1, 1, 0, 3, 3}}},
       [](const std::vector<fn::Value>& v) { return fn::Gather(v[0], v[1], 0); }},
      {"gather_scalar_index_last_axis",
       {F64({2, 5}, 2), {DataType::kI32, {}, {-2}}},
       [](const std::vector<fn::Value>& v) { return fn::Gather(v[0], v[1], -1); }},
      {"gather_middle_axis",
       {F64({2, 3, 2}, 3), {DataType::kI32, {4}, {2, 0, 2, -3}}},
       [](const std::vector<fn::Value>& v) { return fn::Gather(v[0], v[1], 1); }},
      {"slice_negative_steps", {F64({4, 5}, 4)}, slice({3, -1}, {-100, 0}, {0, 1}, {-2, -2})},
      {"slice_one_axis_past_the_end", {F64({3, 4, 2}, 5)}, slice({1}, {100}, {-2}, {})},
      {"where_broadcasts_all_three",
       {Bools({2, 1, 3}, 6), F64({3}, 7), F64({2, 4, 1}, 8)},
       [](const std::vector<fn::Value>& v) { return fn::Where(v[0], v[1], v[2]); }},
      {"where_scalar_y",
       {Bools({3}, 9), F64({2, 3}, 10), F64({}, 11)},
       [](const std::vector<fn::Value>& v) { return fn::Where(v[0], v[1], v[2]); }},
      {"erf",
       {F64({9}, 12, -2.5, 2.5)},
       [](const std::vector<fn::Value>& v) { return fn::Erf(v[0]); }},
  };
}

class IndexGradTest : public ::testing::TestWithParam<Device> {
 protected:
  IndexGradTest() : context_(program_test::NewContext(1, /*check_sync=*/true)) {}

  // The operands as eager tensors on the test's device; f64 ones require gradients when
  // `track` is set.
  std::vector<eager::Tensor> Tensors(const std::vector<Operand>& operands, bool track) {
    std::vector<eager::Tensor> tensors;
    for (const Operand& o : operands) {
      const HostTensor host = ToHost(o);
      absl::StatusOr<eager::Tensor> t =
          context_->FromBytes(o.dtype, o.shape, host.bytes, GetParam());
      EXPECT_TRUE(t.ok()) << t.status();
      if (track && o.dtype == DataType::kF64) {
        EXPECT_TRUE(autograd::SetRequiresGrad(*t).ok());
      }
      tensors.push_back(*std::move(t));
    }
    return tensors;
  }

  // sum(op(operands) * w), eagerly; with `grads`, also d loss / d each f64 operand.
  double EagerLoss(const GradCase& c, const std::vector<Operand>& operands,
                   std::vector<std::vector<double>>* grads = nullptr) {
    std::vector<eager::Tensor> tensors = Tensors(operands, grads != nullptr);
    std::vector<fn::Value> values(tensors.begin(), tensors.end());
    absl::StatusOr<fn::Value> y = c.call(values);
    EXPECT_TRUE(y.ok()) << y.status();
    if (!y.ok()) return 0;
    const Shape& shape = y->tensor().shape();
    std::vector<double> w(shape.NumElements());
    for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0 + static_cast<double>(i % 5) * 0.5;
    absl::StatusOr<eager::Tensor> wt = context_->FromVector(w, shape, GetParam());
    EXPECT_TRUE(wt.ok());
    absl::StatusOr<eager::Tensor> loss = fn::ReduceSum(fn::Mul(y->tensor(), *wt).value());
    EXPECT_TRUE(loss.ok()) << loss.status();
    if (!loss.ok()) return 0;
    const double value = ToDoubles(*loss).at(0);
    if (grads != nullptr) {
      EXPECT_TRUE(autograd::Backward(*loss).ok());
      for (size_t i = 0; i < operands.size(); ++i) {
        if (operands[i].dtype == DataType::kF64)
          grads->push_back(ToDoubles(autograd::GradOf(tensors[i])));
      }
    }
    return value;
  }

  std::unique_ptr<eager::Context> context_;
};

TEST_P(IndexGradTest, EagerGradientsMatchCentralDifferences) {
  for (const GradCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<std::vector<double>> grads;
    EagerLoss(c, c.operands, &grads);
    size_t g = 0;
    for (size_t i = 0; i < c.operands.size(); ++i) {
      if (c.operands[i].dtype != DataType::kF64) continue;
      ASSERT_LT(g, grads.size());
      const std::vector<double>& grad = grads[g++];
      ASSERT_EQ(grad.size(), c.operands[i].values.size()) << "operand " << i;
      for (size_t e = 0; e < grad.size(); ++e) {
        const double h = 1e-6;
        std::vector<Operand> plus = c.operands, minus = c.operands;
        plus[i].values[e] += h;
        minus[i].values[e] -= h;
        const double numeric = (EagerLoss(c, plus) - EagerLoss(c, minus)) / (2 * h);
        EXPECT_NEAR(grad[e], numeric, 1e-6 * (1 + std::abs(numeric)))
            << "operand " << i << " element " << e;
      }
    }
    EXPECT_EQ(g, grads.size());
  }
}

TEST_P(IndexGradTest, StaticAutodiffGivesTheEagerGradients) {
  for (const GradCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<std::vector<double>> eager_grads;
    EagerLoss(c, c.operands, &eager_grads);

    Program main(&context_->registry());
    Program startup(&context_->registry());
    Feeds feeds;
    std::vector<std::string> fetches;
    {
      ProgramGuard guard(main, startup);
      std::vector<fn::Value> values;
      for (size_t i = 0; i < c.operands.size(); ++i) {
        const Operand& o = c.operands[i];
        const std::string name = absl::StrCat("in", i);
        absl::StatusOr<Var> v = Data(name, o.shape, o.dtype);
        ASSERT_TRUE(v.ok()) << v.status();
        if (o.dtype == DataType::kF64) {
          v->set_stop_gradient(false);
          fetches.push_back(ops::GradContext::GradName(name));
        }
        feeds.push_back({name, ToHost(o)});
        values.push_back(*v);
      }
      absl::StatusOr<fn::Value> y = c.call(values);
      ASSERT_TRUE(y.ok()) << y.status();
      const Shape& shape = y->var().shape();
      std::vector<double> w(shape.NumElements());
      for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0 + static_cast<double>(i % 5) * 0.5;
      absl::StatusOr<Var> wv = Data("w", shape, DataType::kF64);
      ASSERT_TRUE(wv.ok());
      feeds.push_back({"w", HostTensor::FromVector(w, shape)});
      absl::StatusOr<fn::Value> loss = fn::ReduceSum(fn::Mul(*y, *wv).value());
      ASSERT_TRUE(loss.ok()) << loss.status();
      ASSERT_TRUE(AppendBackward(loss->var()).ok());
    }
    ExecutorOptions options;
    options.interpreter.device = GetParam();
    Executor executor(&context_->registry(), context_->vm(), options);
    Scope scope;
    absl::StatusOr<RunResult> run = executor.Run(main.desc(), feeds, fetches, &scope);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->fetches.size(), eager_grads.size());
    for (size_t i = 0; i < eager_grads.size(); ++i) {
      EXPECT_EQ(run->fetches[i].ToVector<double>(), eager_grads[i]) << fetches[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, IndexGradTest,
                         ::testing::Values(program_test::kCpu, program_test::kSim),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

}  // namespace
}  // namespace sluice::framework::index_grad_test
