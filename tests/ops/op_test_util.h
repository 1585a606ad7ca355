// Shared fixtures for the op tests: a Runtime (cpu + two sim devices), a VM with the sync
// checker on, the standard op registry and an OpDispatcher; host upload/download helpers;
// and a numeric gradient check that runs an op's grad ops (from its grad maker) through the
// VM and compares them with central finite differences of the forward op, in f64.
#ifndef SLUICE_TESTS_OPS_OP_TEST_UTIL_H_
#define SLUICE_TESTS_OPS_OP_TEST_UTIL_H_

#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ep/runtime.h"
#include "gtest/gtest.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "vm/instructions_builder.h"
#include "vm/sync_checker.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::testing {

inline const Device kCpu(DeviceType::kCpu, 0);
inline const Device kSim0(DeviceType::kSim, 0);
inline const Device kSim1(DeviceType::kSim, 1);

struct OpsHarness {
  // `cpu_intra_op_threads`: the cpu device's intra-op pool width (ep::CpuOptions; 0 = the
  // host's hardware threads, 1 = every kernel on its worker alone).
  explicit OpsHarness(int cpu_intra_op_threads = 0) {
    ep::RuntimeOptions runtime_options;
    runtime_options.num_sim_devices = 2;
    runtime_options.enable_cuda = false;
    runtime_options.cpu.intra_op_threads = cpu_intra_op_threads;
    runtime = ep::Runtime::Create(runtime_options).value();
    vm::VmOptions options;
    options.check_sync = true;
    vm = vm::VirtualMachine::Create(runtime.get(), options).value();
    const absl::Status registered = RegisterStandardOps(&registry);
    EXPECT_TRUE(registered.ok()) << registered;
    builder = std::make_unique<vm::InstructionsBuilder>(vm.get());
    dispatcher = std::make_unique<OpDispatcher>(&registry, vm.get(), builder.get());
  }
  ~OpsHarness() {
    EXPECT_TRUE(vm->Sync().ok());
    EXPECT_EQ(vm->sync_checker()->violation_count(), 0) << vm->sync_checker()->status().message();
    dispatcher.reset();
    builder.reset();
    vm.reset();
  }

  // A tensor on `device` holding `values` converted to `dtype`.
  vm::BlobRef Upload(Device device, DataType dtype, const Shape& shape,
                     const std::vector<double>& values) {
    EXPECT_EQ(static_cast<int64_t>(values.size()), shape.NumElements());
    vm::Stream* stream = vm->GetStream(StreamKey{device}).value();
    vm::BlobRef blob = vm->NewBlob(stream, dtype, shape).value();
    std::vector<uint8_t> bytes(blob->bytes());
    for (size_t i = 0; i < values.size(); ++i) Store(dtype, bytes.data(), i, values[i]);
    const absl::Status written = builder->WriteBlob(blob, bytes);
    EXPECT_TRUE(written.ok()) << written;
    return blob;
  }
  // The tensor's values as doubles (blocks until they are ready).
  std::vector<double> Download(const vm::BlobRef& blob) {
    absl::StatusOr<std::vector<uint8_t>> bytes = builder->ReadBlob(blob);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (!bytes.ok()) return {};
    const size_t n = blob->bytes() / SizeOf(blob->dtype());
    std::vector<double> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = Load(blob->dtype(), bytes->data(), i);
    return values;
  }

  absl::StatusOr<SlotBlobs> Run(absl::string_view op, const SlotBlobs& inputs,
                                const vm::AttrMap& attrs = {}, Device device = kCpu) {
    DispatchOptions options;
    options.default_device = device;
    return dispatcher->Call(op, inputs, attrs, options);
  }

  static void Store(DataType dtype, uint8_t* base, size_t i, double v) {
    switch (dtype) {
      case DataType::kF32: {
        const float f = static_cast<float>(v);
        std::memcpy(base + i * 4, &f, 4);
        break;
      }
      case DataType::kF64:
        std::memcpy(base + i * 8, &v, 8);
        break;
      case DataType::kI32: {
        const int32_t x = static_cast<int32_t>(v);
        std::memcpy(base + i * 4, &x, 4);
        break;
      }
      case DataType::kI64: {
        const int64_t x = static_cast<int64_t>(v);
        std::memcpy(base + i * 8, &x, 8);
        break;
      }
      case DataType::kBool:
        base[i] = v != 0;
        break;
    }
  }
  static double Load(DataType dtype, const uint8_t* base, size_t i) {
    switch (dtype) {
      case DataType::kF32: {
        float f;
        std::memcpy(&f, base + i * 4, 4);
        return f;
      }
      case DataType::kF64: {
        double d;
        std::memcpy(&d, base + i * 8, 8);
        return d;
      }
      case DataType::kI32: {
        int32_t x;
        std::memcpy(&x, base + i * 4, 4);
        return x;
      }
      case DataType::kI64: {
        int64_t x;
        std::memcpy(&x, base + i * 8, 8);
        return static_cast<double>(x);
      }
      case DataType::kBool:
        return base[i] != 0 ? 1.0 : 0.0;
    }
    return 0;
  }

  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<vm::VirtualMachine> vm;
  OpRegistry registry;
  std::unique_ptr<vm::InstructionsBuilder> builder;
  std::unique_ptr<OpDispatcher> dispatcher;
};

// Uniform values in [lo, hi) from a fixed seed.
inline std::vector<double> RandomValues(int64_t n, uint64_t seed, double lo = -1.0,
                                        double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(n);
  for (double& v : values) v = dist(rng);
  return values;
}

// One input tensor of a gradient check, in f64 unless `dtype` says otherwise (integer
// inputs such as labels are not differentiated).
struct GradInput {
  Shape shape;
  std::vector<double> values;
  DataType dtype = DataType::kF64;
};

// Checks d(sum_k <W_k, Out_k>)/d(input) computed by the op's grad ops against central
// differences, for every element of the f64 inputs of `slots_to_check` (all f64 inputs if
// empty). W_k are fixed random weights. Keep inputs small: two forward runs per element.
inline void ExpectGradientsMatch(OpsHarness& h, absl::string_view op,
                                 const std::vector<std::vector<GradInput>>& inputs,
                                 const vm::AttrMap& attrs = {}, Device device = kCpu,
                                 std::set<std::string> slots_to_check = {}, double eps = 1e-6,
                                 double atol = 1e-6, double rtol = 1e-5) {
  SCOPED_TRACE(absl::StrCat("gradient check of '", op, "' on ", device.ToString()));
  const OpSchema* schema = h.registry.FindSchema(op).value();
  ASSERT_TRUE(schema->has_grad()) << op << " has no grad maker";
  ASSERT_EQ(inputs.size(), schema->inputs().size());

  auto upload_all = [&](const std::vector<std::vector<GradInput>>& values) {
    SlotBlobs slots(values.size());
    for (size_t s = 0; s < values.size(); ++s) {
      for (const GradInput& in : values[s]) {
        slots[s].push_back(h.Upload(device, in.dtype, in.shape, in.values));
      }
    }
    return slots;
  };
  absl::StatusOr<SlotBlobs> outputs = h.Run(op, upload_all(inputs), attrs, device);
  ASSERT_TRUE(outputs.ok()) << outputs.status();

  // Fixed weights per output tensor; the loss is their dot product with the outputs.
  std::vector<std::vector<std::vector<double>>> weights(outputs->size());
  uint64_t seed = 1234;
  for (size_t s = 0; s < outputs->size(); ++s) {
    for (const vm::BlobRef& out : (*outputs)[s]) {
      weights[s].push_back(RandomValues(out->shape().NumElements(), seed++));
    }
  }
  auto loss = [&](const std::vector<std::vector<GradInput>>& values) {
    absl::StatusOr<SlotBlobs> outs = h.Run(op, upload_all(values), attrs, device);
    EXPECT_TRUE(outs.ok()) << outs.status();
    double total = 0;
    for (size_t s = 0; s < outs->size(); ++s) {
      for (size_t k = 0; k < (*outs)[s].size(); ++k) {
        const std::vector<double> v = h.Download((*outs)[s][k]);
        for (size_t i = 0; i < v.size(); ++i) total += weights[s][k][i] * v[i];
      }
    }
    return total;
  };

  // Names: inputs "in<slot>_<i>", outputs "out<slot>_<i>".
  absl::flat_hash_map<std::string, vm::BlobRef> env;
  GradContext::Slots in_slots, out_slots;
  SlotBlobs input_blobs = upload_all(inputs);
  for (size_t s = 0; s < inputs.size(); ++s) {
    std::vector<std::string> names;
    for (size_t i = 0; i < inputs[s].size(); ++i) {
      names.push_back(absl::StrCat("in", s, "_", i));
      env[names.back()] = input_blobs[s][i];
    }
    in_slots.emplace_back(schema->inputs()[s].name, names);
  }
  for (size_t s = 0; s < outputs->size(); ++s) {
    std::vector<std::string> names;
    for (size_t i = 0; i < (*outputs)[s].size(); ++i) {
      names.push_back(absl::StrCat("out", s, "_", i));
      env[names.back()] = (*outputs)[s][i];
      const vm::BlobRef& out = (*outputs)[s][i];
      env[GradContext::GradName(names.back())] =
          h.Upload(device, out->dtype(), out->shape(), weights[s][i]);
    }
    out_slots.emplace_back(schema->outputs()[s].name, names);
  }
  absl::StatusOr<vm::AttrMap> normalized = schema->NormalizeAttrs(attrs);
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  const GradContext grad_ctx(in_slots, out_slots, &*normalized);
  const std::vector<GradOpDesc> grad_ops = schema->grad_maker()(grad_ctx);
  ASSERT_FALSE(grad_ops.empty());
  for (const GradOpDesc& g : grad_ops) {
    SlotBlobs slots;
    const OpSchema* grad_schema = h.registry.FindSchema(g.type).value();
    for (const ArgDef& arg : grad_schema->inputs()) {
      vm::BlobList list;
      for (const auto& [slot, names] : g.inputs) {
        if (slot != arg.name) continue;
        for (const std::string& name : names) {
          ASSERT_TRUE(env.contains(name)) << g.type << " reads unknown variable " << name;
          list.push_back(env[name]);
        }
      }
      slots.push_back(std::move(list));
    }
    absl::StatusOr<SlotBlobs> produced = h.Run(g.type, slots, g.attrs, device);
    ASSERT_TRUE(produced.ok()) << g.type << ": " << produced.status();
    for (size_t s = 0; s < grad_schema->outputs().size(); ++s) {
      for (const auto& [slot, names] : g.outputs) {
        if (slot != grad_schema->outputs()[s].name) continue;
        ASSERT_EQ(names.size(), (*produced)[s].size()) << g.type << " output " << slot;
        for (size_t i = 0; i < names.size(); ++i) {
          if (env.contains(names[i])) {  // a gradient written twice accumulates
            absl::StatusOr<SlotBlobs> summed =
                h.Run("sum", {{env[names[i]], (*produced)[s][i]}}, {}, device);
            ASSERT_TRUE(summed.ok()) << summed.status();
            env[names[i]] = (*summed)[0][0];
          } else {
            env[names[i]] = (*produced)[s][i];
          }
        }
      }
    }
  }

  for (size_t s = 0; s < inputs.size(); ++s) {
    const std::string& slot = schema->inputs()[s].name;
    if (!slots_to_check.empty() && !slots_to_check.contains(slot)) continue;
    for (size_t i = 0; i < inputs[s].size(); ++i) {
      if (inputs[s][i].dtype != DataType::kF64) continue;
      const std::string grad_name = GradContext::GradName(absl::StrCat("in", s, "_", i));
      ASSERT_TRUE(env.contains(grad_name)) << "no gradient for input " << slot << "[" << i << "]";
      const std::vector<double> analytic = h.Download(env[grad_name]);
      ASSERT_EQ(analytic.size(), inputs[s][i].values.size());
      for (size_t e = 0; e < analytic.size(); ++e) {
        std::vector<std::vector<GradInput>> plus = inputs, minus = inputs;
        plus[s][i].values[e] += eps;
        minus[s][i].values[e] -= eps;
        const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
        EXPECT_NEAR(analytic[e], numeric, atol + rtol * std::abs(numeric))
            << "d loss / d " << slot << "[" << i << "] element " << e;
      }
    }
  }
}

}  // namespace sluice::ops::testing

#endif  // SLUICE_TESTS_OPS_OP_TEST_UTIL_H_
