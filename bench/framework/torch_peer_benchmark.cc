// The libtorch peer of BM_Eager_MlpTrainStep (eager_autograd_benchmark.cc): the same
// model, loss and loop in libtorch's eager C++ API, in the same benchmark run. Built only
// when CMake finds libtorch (Debian's libtorch-dev); never a dependency of the library.
//
//   BM_Torch_MlpTrainStep  3 x (matmul by a 16x16 weight, relu, * 0.5) on a 16x16 input;
//                          mse against a 16x16 target; backward; w -= 0.01 * grad under
//                          torch::NoGradGuard with the gradients zeroed; loss.item().
#include <torch/torch.h>

#include <vector>

#include "benchmark/benchmark.h"

namespace {

void BM_Torch_MlpTrainStep(benchmark::State& state) {
  torch::manual_seed(7);
  at::set_num_threads(1);
  std::vector<torch::Tensor> weights;
  for (int l = 0; l < 3; ++l) {
    weights.push_back((torch::rand({16, 16}) * 0.5 - 0.25).requires_grad_(true));
  }
  const torch::Tensor x = torch::rand({16, 16}) * 2 - 1;
  const torch::Tensor target = torch::rand({16, 16}) * 2 - 1;
  float loss_value = 0;
  for (auto _ : state) {
    torch::Tensor h = x;
    for (const torch::Tensor& w : weights) h = torch::relu(torch::matmul(h, w)) * 0.5;
    torch::Tensor loss = (h - target).square().mean();
    loss.backward();
    {
      torch::NoGradGuard no_grad;
      for (torch::Tensor& w : weights) {
        w.sub_(w.grad(), 0.01);
        w.mutable_grad().zero_();
      }
    }
    loss_value = loss.item<float>();
  }
  state.counters["loss"] = loss_value;
}
BENCHMARK(BM_Torch_MlpTrainStep)->UseRealTime();

}  // namespace
