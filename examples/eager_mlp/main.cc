// Trains a small MLP eagerly: every op runs at once on the VM, autograd records them, and
// Backward issues the gradient ops; Sgd updates the parameters in place. Prints the loss
// every 20 steps, and exits non-zero unless it fell to under a tenth of where it started.
//
//   build/examples/eager_mlp/eager_mlp [--device cpu|sim:0] [--steps N]
//
// The task: y = sin(x0) + x1 * x2 / 2 on 64 random points of [-1, 1]^3, fit by
// Linear(3, 32) -> tanh -> Linear(32, 32) -> tanh -> Linear(32, 1), mean squared error.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/training/eager_layers.h"
#include "framework/training/eager_optimizers.h"

namespace {

using sluice::Device;
using sluice::Shape;
using sluice::eager::Tensor;

constexpr int64_t kPoints = 64;

absl::Status Train(Device device, int steps) {
  sluice::eager::ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.enable_cuda = false;
  options.default_device = device;
  SLUICE_ASSIGN_OR_RETURN(sluice::eager::Context ctx, sluice::eager::Context::Create(options));

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> xs, ys;
  for (int64_t p = 0; p < kPoints; ++p) {
    const float a = uniform(rng), b = uniform(rng), c = uniform(rng);
    xs.insert(xs.end(), {a, b, c});
    ys.push_back(std::sin(a) + b * c / 2);
  }
  SLUICE_ASSIGN_OR_RETURN(Tensor x, ctx.FromVector(xs, Shape({kPoints, 3}), device));
  SLUICE_ASSIGN_OR_RETURN(Tensor y, ctx.FromVector(ys, Shape({kPoints, 1}), device));

  namespace nn = sluice::eager::nn;
  nn::LinearOptions layer_options;
  layer_options.device = device;
  std::vector<nn::Linear> layers;
  int64_t seed = 1;
  for (auto [in, out] : {std::pair<int64_t, int64_t>{3, 32}, {32, 32}, {32, 1}}) {
    layer_options.seed = seed++;
    SLUICE_ASSIGN_OR_RETURN(nn::Linear layer, nn::Linear::Create(ctx, in, out, layer_options));
    layers.push_back(layer);
  }
  std::vector<Tensor> params;
  for (const nn::Linear& layer : layers) {
    for (const Tensor& p : layer.parameters()) params.push_back(p);
  }
  SLUICE_ASSIGN_OR_RETURN(sluice::eager::Sgd sgd, sluice::eager::Sgd::Create(params, 0.1));

  float first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    Tensor h = x;
    for (size_t l = 0; l < layers.size(); ++l) {
      SLUICE_ASSIGN_OR_RETURN(h, layers[l](h));
      if (l + 1 < layers.size()) {
        SLUICE_ASSIGN_OR_RETURN(h, sluice::fn::Tanh(h));
      }
    }
    SLUICE_ASSIGN_OR_RETURN(Tensor diff, sluice::fn::Sub(h, y));
    SLUICE_ASSIGN_OR_RETURN(Tensor loss, sluice::fn::ReduceMean(sluice::fn::Square(diff).value()));
    SLUICE_RETURN_IF_ERROR(sluice::autograd::Backward(loss));
    SLUICE_RETURN_IF_ERROR(sgd.Step());
    sgd.ZeroGrad();
    SLUICE_ASSIGN_OR_RETURN(std::vector<float> value, loss.ToVector<float>());
    last = value[0];
    if (step == 0) first = last;
    if (step % 20 == 0 || step + 1 == steps) std::printf("step %4d  loss %.6f\n", step, last);
  }
  if (!(last < first / 10)) {
    return absl::InternalError(absl::StrCat("the loss did not fall enough: ", first, " -> ", last));
  }
  std::printf("loss %.6f -> %.6f on %s\n", first, last, device.ToString().c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  Device device = Device::Cpu();
  int steps = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: eager_mlp [--device cpu|sim:0] [--steps N]\n"
          "Trains a 3-32-32-1 tanh MLP eagerly (autograd, SGD) on a toy regression and\n"
          "prints the loss; exits 1 unless it fell below a tenth of its first value.\n");
      return 0;
    }
    if (arg == "--device" && i + 1 < argc) {
      absl::StatusOr<Device> parsed = Device::Parse(argv[++i]);
      if (!parsed.ok()) {
        std::fprintf(stderr, "eager_mlp: --device: %s\n", parsed.status().ToString().c_str());
        return 2;
      }
      device = *parsed;
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
      if (steps < 1) {
        std::fprintf(stderr, "eager_mlp: --steps must be a positive number\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "eager_mlp: unknown argument '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  const absl::Status status = Train(device, steps);
  if (!status.ok()) {
    std::fprintf(stderr, "eager_mlp: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
