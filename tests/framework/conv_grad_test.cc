// Gradients of conv2d (with a bias added as a broadcast [M, 1, 1]), max_pool2d and
// avg_pool2d through the framework, on cpu and sim, in f64 on small shapes: eager autograd
// against central differences of the loss sum(model(params) * weights), one element at a
// time, for every parameter (X, W, the bias); and static autodiff (AppendBackward,
// Executor) giving the eager gradients bit for bit.
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

namespace sluice::framework::conv_grad_test {
namespace {

using Ints = std::vector<int64_t>;
using Params = std::vector<fn::Value>;

// A model of f64 parameters of the given shapes.
struct Case {
  std::string name;
  std::vector<Shape> shapes;
  std::function<absl::StatusOr<fn::Value>(const Params&)> model;
};

std::vector<Case> Cases() {
  return {
      {"conv_groups_bias",
       {{2, 4, 5, 6}, {6, 2, 3, 2}, {6}},
       [](const Params& p) -> absl::StatusOr<fn::Value> {
         absl::StatusOr<fn::Value> y = fn::Conv2d(p[0], p[1], {2, 1}, {1, 0, 2, 1}, {1, 2}, 2);
         if (!y.ok()) return y;
         absl::StatusOr<fn::Value> b = fn::Reshape(p[2], {6, 1, 1});
         if (!b.ok()) return b;
         return fn::Add(*y, *b);
       }},
      {"conv_1x1",
       {{1, 3, 4, 4}, {2, 3, 1, 1}},
       [](const Params& p) { return fn::Conv2d(p[0], p[1]); }},
      {"conv_strided_padded",
       {{1, 2, 6, 5}, {3, 2, 3, 3}},
       [](const Params& p) {
         return fn::Conv2d(p[0], p[1], {2, 2}, {1, 1, 1, 1});
       }},
      {"max_pool_ceil_dilated",
       {{2, 2, 5, 6}},
       [](const Params& p) {
         return fn::MaxPool2d(p[0], {3, 2}, {2, 1}, {1, 1, 1, 0}, {1, 2}, /*ceil_mode=*/true);
       }},
      {"max_pool_default_strides",
       {{1, 3, 4, 4}},
       [](const Params& p) {
         return fn::MaxPool2d(p[0], {2, 2});
       }},
      {"avg_pool_include_pad",
       {{1, 3, 5, 4}},
       [](const Params& p) {
         return fn::AvgPool2d(p[0], {2, 3}, {}, {1, 1, 1, 2}, {1, 1}, /*ceil_mode=*/true,
                              /*count_include_pad=*/true);
       }},
      {"avg_pool_exclude_pad",
       {{2, 1, 6, 5}},
       [](const Params& p) {
         return fn::AvgPool2d(p[0], {3, 3}, {2, 1}, {1, 1, 2, 1});
       }},
  };
}

// Uniform values in [-1, 1) from `seed`.
std::vector<double> RandomValues(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> values(static_cast<size_t>(n));
  for (double& v : values) v = dist(rng);
  return values;
}

std::vector<double> ToDoubles(const eager::Tensor& t) {
  absl::StatusOr<std::vector<uint8_t>> bytes = t.ToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  std::vector<double> values(bytes->size() / sizeof(double));
  std::memcpy(values.data(), bytes->data(), bytes->size());
  return values;
}

class ConvGradTest : public ::testing::TestWithParam<Device> {
 protected:
  ConvGradTest() : context_(program_test::NewContext(1, /*check_sync=*/true)) {}

  std::vector<std::vector<double>> Values(const Case& c) {
    std::vector<std::vector<double>> values;
    uint64_t seed = 17;
    for (const Shape& s : c.shapes) {
      values.push_back(RandomValues(s.NumElements(), seed++));
    }
    return values;
  }

  // The model's output for `values` (eagerly); `params` gets the parameter tensors, which
  // require gradients when `grad`.
  absl::StatusOr<eager::Tensor> Forward(const Case& c,
                                        const std::vector<std::vector<double>>& values, bool grad,
                                        std::vector<eager::Tensor>* params) {
    Params p;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      absl::StatusOr<eager::Tensor> t = context_->FromVector(values[i], c.shapes[i], GetParam());
      if (!t.ok()) return t.status();
      if (grad) SLUICE_RETURN_IF_ERROR(autograd::SetRequiresGrad(*t));
      if (params != nullptr) params->push_back(*t);
      p.push_back(*t);
    }
    absl::StatusOr<fn::Value> y = c.model(p);
    if (!y.ok()) return y.status();
    return y->tensor();
  }

  // sum(model(values) * weights), weights of the output's shape.
  double Loss(const Case& c, const std::vector<std::vector<double>>& values,
              const std::vector<double>& weights) {
    absl::StatusOr<eager::Tensor> y = Forward(c, values, false, nullptr);
    EXPECT_TRUE(y.ok()) << y.status();
    if (!y.ok()) return 0;
    const std::vector<double> out = ToDoubles(*y);
    EXPECT_EQ(out.size(), weights.size());
    double loss = 0;
    for (size_t i = 0; i < out.size() && i < weights.size(); ++i) loss += out[i] * weights[i];
    return loss;
  }

  // The eager gradients of the loss for every parameter, and the output's shape.
  void EagerGrads(const Case& c, const std::vector<std::vector<double>>& values,
                  std::vector<double>* weights, Shape* out_shape,
                  std::vector<std::vector<double>>* grads) {
    std::vector<eager::Tensor> params;
    absl::StatusOr<eager::Tensor> y = Forward(c, values, true, &params);
    ASSERT_TRUE(y.ok()) << y.status();
    *out_shape = y->shape();
    *weights = RandomValues(out_shape->NumElements(), 99);
    absl::StatusOr<eager::Tensor> w = context_->FromVector(*weights, *out_shape, GetParam());
    ASSERT_TRUE(w.ok());
    absl::StatusOr<eager::Tensor> prod = fn::Mul(*y, *w);
    ASSERT_TRUE(prod.ok()) << prod.status();
    absl::StatusOr<eager::Tensor> loss = fn::ReduceSum(*prod);
    ASSERT_TRUE(loss.ok()) << loss.status();
    ASSERT_TRUE(autograd::Backward(*loss).ok());
    for (const eager::Tensor& p : params) grads->push_back(ToDoubles(autograd::GradOf(p)));
  }

  std::unique_ptr<eager::Context> context_;
};

TEST_P(ConvGradTest, EagerGradientsMatchCentralDifferences) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<std::vector<double>> values = Values(c);
    std::vector<double> weights;
    Shape out_shape;
    std::vector<std::vector<double>> grads;
    ASSERT_NO_FATAL_FAILURE(EagerGrads(c, values, &weights, &out_shape, &grads));
    ASSERT_EQ(grads.size(), values.size());
    const double h = 1e-6;
    for (size_t p = 0; p < values.size(); ++p) {
      ASSERT_EQ(grads[p].size(), values[p].size()) << "parameter " << p;
      for (size_t e = 0; e < values[p].size(); ++e) {
        std::vector<std::vector<double>> plus = values, minus = values;
        plus[p][e] += h;
        minus[p][e] -= h;
        const double numeric = (Loss(c, plus, weights) - Loss(c, minus, weights)) / (2 * h);
        ASSERT_NEAR(grads[p][e], numeric, 1e-6 * (1 + std::abs(numeric)))
            << "parameter " << p << " element " << e;
      }
    }
  }
}

TEST_P(ConvGradTest, StaticAutodiffGivesTheEagerGradients) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<std::vector<double>> values = Values(c);
    std::vector<double> weights;
    Shape out_shape;
    std::vector<std::vector<double>> eager_grads;
    ASSERT_NO_FATAL_FAILURE(EagerGrads(c, values, &weights, &out_shape, &eager_grads));

    Program main(&context_->registry());
    Program startup(&context_->registry());
    std::vector<std::string> fetches;
    Feeds feeds;
    {
      ProgramGuard guard(main, startup);
      Params params;
      for (size_t i = 0; i < c.shapes.size(); ++i) {
        const std::string name = absl::StrCat("p", i);
        absl::StatusOr<Var> v = Data(name, c.shapes[i], DataType::kF64);
        ASSERT_TRUE(v.ok()) << v.status();
        v->set_stop_gradient(false);
        params.push_back(*v);
        feeds.push_back({name, HostTensor::FromVector(values[i], c.shapes[i])});
        fetches.push_back(ops::GradContext::GradName(name));
      }
      absl::StatusOr<Var> wv = Data("weights", out_shape, DataType::kF64);
      ASSERT_TRUE(wv.ok());
      feeds.push_back({"weights", HostTensor::FromVector(weights, out_shape)});
      absl::StatusOr<fn::Value> y = c.model(params);
      ASSERT_TRUE(y.ok()) << y.status();
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
      EXPECT_EQ(run->fetches[i].ToVector<double>(), eager_grads[i]) << "parameter " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ConvGradTest,
                         ::testing::Values(program_test::kCpu, program_test::kSim),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

}  // namespace
}  // namespace sluice::framework::conv_grad_test
