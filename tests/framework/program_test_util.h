// Test-only helpers for the interpreter and executor tests: building a ProgramDesc by hand
// (ops, variables, common attributes) and a fresh eager::Context whose registry and VM the
// Interpreter or Executor under test use.
#ifndef SLUICE_TESTS_FRAMEWORK_PROGRAM_TEST_UTIL_H_
#define SLUICE_TESTS_FRAMEWORK_PROGRAM_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/eager/context.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/ir/program_desc.h"
#include "gtest/gtest.h"
#include "vm/attrs.h"

namespace sluice::framework::program_test {

inline ir::OpDesc Op(std::string type, ir::OpSlots in, ir::OpSlots out, vm::AttrMap attrs = {}) {
  return ir::OpDesc{std::move(type), std::move(in), std::move(out), std::move(attrs)};
}

inline ir::VarDesc Var(std::string name, Shape shape, bool persistable = false,
                       DataType dtype = DataType::kF32) {
  ir::VarDesc v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.persistable = persistable;
  v.dtype = dtype;
  return v;
}

// Adds a variable, failing the test on a duplicate or bad name.
inline void AddVar(ir::BlockDesc& block, ir::VarDesc var) {
  const std::string name = var.name;
  ASSERT_TRUE(block.AddVar(std::move(var)).ok()) << name;
}

inline std::vector<int64_t> Dims(const Shape& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

// fill_constant attributes.
inline vm::AttrMap Fill(const Shape& shape, double value) {
  return vm::AttrMap().Set("shape", Dims(shape)).Set("value", value);
}

// scale attributes: Out = scale * X + bias.
inline vm::AttrMap ScaleBy(double scale, double bias = 0.0) {
  return vm::AttrMap().Set("scale", scale).Set("bias", bias);
}

// `attrs` placed on a stream of the program's device ("compute:1").
inline vm::AttrMap OnStream(const std::string& stream, vm::AttrMap attrs = {}) {
  attrs.Set("stream", stream);
  return attrs;
}

inline HostTensor Filled(const Shape& shape, float value) {
  return HostTensor::FromVector(std::vector<float>(shape.NumElements(), value), shape);
}

// A fresh context: cpu plus `sim_devices` sim devices, no CUDA.
inline std::unique_ptr<eager::Context> NewContext(int sim_devices = 1, bool check_sync = false) {
  eager::ContextOptions options;
  options.runtime.num_sim_devices = sim_devices;
  options.runtime.enable_cuda = false;
  options.vm.check_sync = check_sync;
  absl::StatusOr<eager::Context> context = eager::Context::Create(options);
  EXPECT_TRUE(context.ok()) << context.status();
  if (!context.ok()) return nullptr;
  return std::make_unique<eager::Context>(*std::move(context));
}

inline const Device kCpu(DeviceType::kCpu, 0);
inline const Device kSim(DeviceType::kSim, 0);

}  // namespace sluice::framework::program_test

#endif  // SLUICE_TESTS_FRAMEWORK_PROGRAM_TEST_UTIL_H_
