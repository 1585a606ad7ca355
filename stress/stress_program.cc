#include "stress/stress_program.h"

#include <random>

namespace sluice::stress {

const char* StressOp::KernelName() const {
  switch (kind) {
    case Kind::kFill:
      return "fill";
    case Kind::kAdd:
      return "add";
    case Kind::kMul:
      return "mul";
    case Kind::kScale:
      return "scale";
    case Kind::kCopy:
      return "copy";
  }
  return "?";
}

StressProgram GenerateStressProgram(const StressShape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  // Devices: index 0 is cpu, 1..n are sim:0..sim:n-1.
  const int devices = 1 + shape.sim_devices;
  auto device_of = [&](int d) { return d == 0 ? Device::Cpu() : Device(DeviceType::kSim, d - 1); };
  auto random_stream = [&](Device device) {
    StreamKey key;
    key.device = device;
    key.type = StreamType::kCompute;
    key.index = device.IsAsync() ? uniform(shape.streams) : 0;
    return key;
  };

  StressProgram program;
  std::vector<std::vector<int>> by_device(devices);
  for (int t = 0; t < shape.tensors; ++t) {
    const int d = uniform(devices);
    by_device[d].push_back(t);
    program.tensor_home.push_back(random_stream(device_of(d)));
  }
  auto same_device_tensor = [&](int t) {
    for (int d = 0; d < devices; ++d) {
      if (device_of(d) == program.tensor_home[t].device) {
        return by_device[d][uniform(static_cast<int>(by_device[d].size()))];
      }
    }
    return t;
  };
  auto small_value = [&]() { return static_cast<float>(uniform(17) - 8) / 4.0f; };

  for (int t = 0; t < shape.tensors; ++t) {
    StressOp fill;
    fill.kind = StressOp::Kind::kFill;
    fill.y = t;
    fill.value = small_value();
    fill.stream = random_stream(program.tensor_home[t].device);
    program.ops.push_back(fill);
  }
  for (int i = 0; i < shape.ops; ++i) {
    StressOp op;
    op.y = uniform(shape.tensors);
    const Device device = program.tensor_home[op.y].device;
    op.stream = random_stream(device);
    switch (uniform(5)) {
      case 0:
        op.kind = StressOp::Kind::kFill;
        op.value = small_value();
        break;
      case 1:
        op.kind = StressOp::Kind::kAdd;
        op.a = same_device_tensor(op.y);
        op.b = same_device_tensor(op.y);
        break;
      case 2:
        op.kind = StressOp::Kind::kMul;
        op.a = same_device_tensor(op.y);
        op.b = same_device_tensor(op.y);
        break;
      case 3:
        op.kind = StressOp::Kind::kScale;
        op.a = same_device_tensor(op.y);
        op.value = 0.5f + static_cast<float>(uniform(5)) / 4.0f;
        op.beta = small_value();
        break;
      default:
        op.kind = StressOp::Kind::kCopy;
        op.a = uniform(shape.tensors);  // any device
        break;
    }
    program.ops.push_back(op);
  }
  return program;
}

std::vector<std::vector<float>> RunStressReference(const StressProgram& program, int64_t elements) {
  std::vector<std::vector<float>> t(program.tensor_home.size(),
                                    std::vector<float>(static_cast<size_t>(elements), 0.0f));
  for (const StressOp& op : program.ops) {
    std::vector<float>& y = t[op.y];
    // Operands are read before the output is written element by element, exactly like the
    // kernels do (inputs and output may alias).
    for (int64_t i = 0; i < elements; ++i) {
      switch (op.kind) {
        case StressOp::Kind::kFill:
          y[i] = op.value;
          break;
        case StressOp::Kind::kAdd:
          y[i] = t[op.a][i] + t[op.b][i];
          break;
        case StressOp::Kind::kMul:
          y[i] = t[op.a][i] * t[op.b][i];
          break;
        case StressOp::Kind::kScale:
          y[i] = op.value * t[op.a][i] + op.beta;
          break;
        case StressOp::Kind::kCopy:
          y[i] = t[op.a][i];
          break;
      }
    }
  }
  return t;
}

}  // namespace sluice::stress
