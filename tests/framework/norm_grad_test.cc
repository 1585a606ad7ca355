// Gradients of layer_norm and batch_norm_infer (ops/norm_ops.cc) through the framework, on cpu
// and sim (the sync checker on), in f64: eager autograd against central differences of
// loss = sum(Out * W) for every element of every input (X, Scale and Bias; Mean and Var for
// batch norm), over several axes, with and without Bias; and static autodiff (AppendBackward,
// Executor) giving the eager gradients, also where the op has no Bias (its grad op then
// leaves BiasGrad out).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
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

namespace sluice::framework::norm_grad_test {
namespace {

std::vector<double> Random(int64_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

std::vector<double> ToDoubles(const eager::Tensor& t) {
  absl::StatusOr<std::vector<uint8_t>> bytes = t.ToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  std::vector<double> values(bytes->size() / sizeof(double));
  if (!values.empty()) std::memcpy(values.data(), bytes->data(), bytes->size());
  return values;
}

// One operand of the op under test: its shape and values (f64).
struct Operand {
  Shape shape;
  std::vector<double> values;
  bool present = true;  // false: an empty optional slot (layer_norm without Bias)
};

class NormGradTest : public ::testing::TestWithParam<Device> {
 protected:
  NormGradTest() : context_(program_test::NewContext(1, /*check_sync=*/true)) {}

  // sum(Out * w) of `op` on `operands` (Out: the first output); with `grads`, also the
  // gradient of the loss with respect to each present operand, by eager autograd.
  double Loss(const std::string& op, const std::vector<Operand>& operands, const vm::AttrMap& attrs,
              const std::vector<double>& w, std::vector<std::vector<double>>* grads = nullptr) {
    std::vector<std::vector<eager::Tensor>> slots;
    for (const Operand& o : operands) {
      slots.emplace_back();
      if (!o.present) continue;
      absl::StatusOr<eager::Tensor> t = context_->FromVector(o.values, o.shape, GetParam());
      EXPECT_TRUE(t.ok()) << t.status();
      if (!t.ok()) return 0;
      if (grads != nullptr) EXPECT_TRUE(autograd::SetRequiresGrad(*t).ok());
      slots.back().push_back(*t);
    }
    absl::StatusOr<std::vector<eager::Tensor>> out = context_->Call(op, slots, attrs);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return 0;
    absl::StatusOr<eager::Tensor> wt = context_->FromVector(w, (*out)[0].shape(), GetParam());
    EXPECT_TRUE(wt.ok());
    absl::StatusOr<eager::Tensor> loss = fn::ReduceSum(fn::Mul((*out)[0], *wt).value());
    EXPECT_TRUE(loss.ok()) << loss.status();
    if (!loss.ok()) return 0;
    if (grads != nullptr) {
      const absl::Status backward = autograd::Backward(*loss);
      EXPECT_TRUE(backward.ok()) << backward;
      grads->clear();
      for (const std::vector<eager::Tensor>& slot : slots) {
        grads->push_back(slot.empty() ? std::vector<double>{}
                                      : ToDoubles(autograd::GradOf(slot[0])));
      }
    }
    return ToDoubles(*loss).at(0);
  }

  // Eager gradients against central differences of the loss, every element of every
  // present operand. Returns the eager gradients.
  std::vector<std::vector<double>> CheckGradients(const std::string& op,
                                                  const std::vector<Operand>& operands,
                                                  const vm::AttrMap& attrs,
                                                  const std::string& what) {
    int64_t out_elements = operands[0].shape.NumElements();
    const std::vector<double> w = Random(out_elements, 99);
    std::vector<std::vector<double>> grads;
    Loss(op, operands, attrs, w, &grads);
    EXPECT_EQ(grads.size(), operands.size());
    const double h = 1e-6;
    for (size_t s = 0; s < operands.size(); ++s) {
      if (!operands[s].present) continue;
      EXPECT_EQ(grads[s].size(), operands[s].values.size()) << what << " operand " << s;
      if (grads[s].size() != operands[s].values.size()) continue;
      for (size_t i = 0; i < operands[s].values.size(); ++i) {
        std::vector<Operand> plus = operands, minus = operands;
        plus[s].values[i] += h;
        minus[s].values[i] -= h;
        const double numeric = (Loss(op, plus, attrs, w) - Loss(op, minus, attrs, w)) / (2 * h);
        EXPECT_NEAR(grads[s][i], numeric, 1e-6 + 1e-5 * std::abs(numeric))
            << what << ": d loss / d operand " << s << " element " << i;
      }
    }
    return grads;
  }

  std::unique_ptr<eager::Context> context_;
};

struct LayerNormCase {
  Shape x;
  int64_t axis;
};

std::vector<LayerNormCase> LayerNormCases() {
  return {{{3, 4}, -1}, {{2, 3, 4}, 1}, {{2, 3, 2, 2}, 2}, {{5}, 0}, {{2, 3, 4}, 0}};
}

std::vector<Operand> LayerNormOperands(const LayerNormCase& c, bool with_bias, uint32_t seed) {
  const int rank = c.x.rank();
  const int a = static_cast<int>(c.axis < 0 ? c.axis + rank : c.axis);
  const Shape normalized(c.x.dims().subspan(a));
  return {{c.x, Random(c.x.NumElements(), seed, -2, 2)},
          {normalized, Random(normalized.NumElements(), seed + 1, 0.5, 1.5)},
          {normalized, Random(normalized.NumElements(), seed + 2), with_bias}};
}

TEST_P(NormGradTest, LayerNormGradientsMatchCentralDifferences) {
  uint32_t seed = 10;
  for (const LayerNormCase& c : LayerNormCases()) {
    for (bool with_bias : {true, false}) {
      const std::string what = absl::StrCat("layer_norm ", c.x.ToString(), " axis ", c.axis,
                                            with_bias ? " with" : " without", " Bias");
      CheckGradients("layer_norm", LayerNormOperands(c, with_bias, seed += 3),
                     vm::AttrMap().Set("axis", c.axis).Set("epsilon", 1e-3), what);
    }
  }
}

TEST_P(NormGradTest, BatchNormGradientsMatchCentralDifferences) {
  for (const Shape& x : {Shape({2, 3, 2}), Shape({4, 2}), Shape({5})}) {
    const int64_t c = x.rank() >= 2 ? x.dim(1) : 1;
    const std::vector<Operand> operands = {{x, Random(x.NumElements(), 1, -2, 2)},
                                           {{c}, Random(c, 2)},
                                           {{c}, Random(c, 3)},
                                           {{c}, Random(c, 4)},
                                           {{c}, Random(c, 5, 0.5, 1.5)}};
    CheckGradients("batch_norm_infer", operands, vm::AttrMap().Set("epsilon", 1e-2),
                   absl::StrCat("batch_norm_infer ", x.ToString()));
  }
}

TEST_P(NormGradTest, StaticAutodiffGivesTheEagerGradients) {
  uint32_t seed = 40;
  for (const LayerNormCase& c : LayerNormCases()) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(absl::StrCat(c.x.ToString(), " axis ", c.axis, with_bias ? " with" : " without",
                                " Bias"));
      const std::vector<Operand> operands = LayerNormOperands(c, with_bias, seed += 3);
      const vm::AttrMap attrs = vm::AttrMap().Set("axis", c.axis);
      const std::vector<double> w = Random(c.x.NumElements(), 7);
      std::vector<std::vector<double>> eager_grads;
      Loss("layer_norm", operands, attrs, w, &eager_grads);

      Program main(&context_->registry());
      Program startup(&context_->registry());
      const char* names[] = {"x", "scale", "bias"};
      Feeds feeds;
      std::vector<std::string> fetches;
      {
        ProgramGuard guard(main, startup);
        std::vector<std::vector<Var>> inputs;
        for (int s = 0; s < 3; ++s) {
          inputs.emplace_back();
          if (!operands[s].present) continue;
          absl::StatusOr<Var> v = Data(names[s], operands[s].shape, DataType::kF64);
          ASSERT_TRUE(v.ok()) << v.status();
          v->set_stop_gradient(false);
          inputs.back().push_back(*v);
          feeds.emplace_back(names[s],
                             HostTensor::FromVector(operands[s].values, operands[s].shape));
          fetches.push_back(ops::GradContext::GradName(names[s]));
        }
        absl::StatusOr<Var> wv = Data("w", c.x, DataType::kF64);
        ASSERT_TRUE(wv.ok());
        feeds.emplace_back("w", HostTensor::FromVector(w, c.x));
        absl::StatusOr<std::vector<std::vector<Var>>> out =
            AppendOp(main, "layer_norm", inputs, attrs);
        ASSERT_TRUE(out.ok()) << out.status();
        absl::StatusOr<fn::Value> loss = fn::ReduceSum(fn::Mul((*out)[0][0], *wv).value());
        ASSERT_TRUE(loss.ok()) << loss.status();
        const absl::Status backward = AppendBackward(loss->var()).status();
        ASSERT_TRUE(backward.ok()) << backward;
      }
      ExecutorOptions options;
      options.interpreter.device = GetParam();
      Executor executor(&context_->registry(), context_->vm(), options);
      Scope scope;
      absl::StatusOr<RunResult> run = executor.Run(main.desc(), feeds, fetches, &scope);
      ASSERT_TRUE(run.ok()) << run.status();
      size_t k = 0;
      for (int s = 0; s < 3; ++s) {
        if (!operands[s].present) continue;
        const std::vector<double> got = run->fetches[k++].ToVector<double>();
        ASSERT_EQ(got.size(), eager_grads[s].size()) << names[s];
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_NEAR(got[i], eager_grads[s][i], 1e-12 * (1 + std::abs(eager_grads[s][i])))
              << names[s] << " element " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, NormGradTest,
                         ::testing::Values(program_test::kCpu, program_test::kSim),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

}  // namespace
}  // namespace sluice::framework::norm_grad_test
