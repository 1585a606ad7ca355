// The conv family's CUDA kernels (ops/cuda/conv_kernels.cu) against its host kernels
// (ops/cpu/conv_kernels.cc, checked against loops in tests/ops/conv_ops_test.cc): conv2d and
// conv2d_grad with groups, strides, pads and dilations, the 1 x 1 case; max_pool2d and
// avg_pool2d and their grads with ceil_mode, count_include_pad, dilations, ties and a NaN.
// Needs a GPU: every case skips without one. That the kernels are registered for exactly the
// host's dtypes is checked by the registration test (cuda_kernels_test.cc), which runs
// everywhere.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ep/cuda/cuda_device.h"
#include "gtest/gtest.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/ops/cuda/cuda_op_fixture.h"
#include "tests/ops/op_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::conv_cuda_test {
namespace {

using testing::OpsHarness;
using testing::RandomValues;
using Ints = std::vector<int64_t>;

const Device kCpu(DeviceType::kCpu, 0);
const Device kCuda(DeviceType::kCuda, 0);

// One input: its shape and values.
struct In {
  Shape shape;
  std::vector<double> values;
};

class ConvCudaTest : public testing::CudaOpFixture {
 protected:
  vm::BlobRef Upload(DataType dtype, const In& in, Device device) {
    return CudaOpFixture::Upload(dtype, in.shape, in.values, device);
  }
  // Every output of `op` on `device`, downloaded.
  std::vector<std::vector<double>> Run(Device device, const char* op, DataType dtype,
                                       const std::vector<In>& inputs, const vm::AttrMap& attrs) {
    SlotBlobs in;
    for (const In& input : inputs) in.push_back({Upload(dtype, input, device)});
    DispatchOptions options;
    options.default_device = device;
    absl::StatusOr<SlotBlobs> out = dispatcher_->Call(op, in, attrs, options);
    EXPECT_TRUE(out.ok()) << op << " on " << device.ToString() << ": " << out.status();
    if (!out.ok()) return {};
    std::vector<std::vector<double>> values;
    for (const vm::BlobList& slot : *out) values.push_back(Download(slot[0]));
    return values;
  }
  // `op` on cuda:0 gives the host's outputs, within a summation-order tolerance.
  void ExpectSame(const char* op, const std::vector<In>& inputs, const vm::AttrMap& attrs) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::string what = absl::StrCat(op, " ", DataTypeName(dtype), " ", attrs.ToString());
      const double rtol = dtype == DataType::kF32 ? 1e-4 : 1e-11;
      const std::vector<std::vector<double>> cpu = Run(kCpu, op, dtype, inputs, attrs);
      const std::vector<std::vector<double>> cuda = Run(kCuda, op, dtype, inputs, attrs);
      ASSERT_EQ(cuda.size(), cpu.size()) << what;
      for (size_t o = 0; o < cpu.size(); ++o) {
        ASSERT_EQ(cuda[o].size(), cpu[o].size()) << what;
        for (size_t i = 0; i < cpu[o].size(); ++i) {
          if (std::isnan(cpu[o][i])) {
            EXPECT_TRUE(std::isnan(cuda[o][i])) << what << " output " << o << " element " << i;
          } else {
            EXPECT_NEAR(cuda[o][i], cpu[o][i], rtol * (1 + std::abs(cpu[o][i])))
                << what << " output " << o << " element " << i;
          }
        }
      }
    }
  }
};

In Random(const Shape& shape, uint64_t seed) {
  return {shape, RandomValues(shape.NumElements(), seed)};
}

vm::AttrMap ConvAttrs(Ints strides, Ints pads, Ints dilations, int64_t groups) {
  return vm::AttrMap()
      .Set("strides", std::move(strides))
      .Set("pads", std::move(pads))
      .Set("dilations", std::move(dilations))
      .Set("groups", groups);
}

TEST_F(ConvCudaTest, Conv2dAndGrad) {
  struct Case {
    Shape x, w, out;
    vm::AttrMap attrs;
  };
  const std::vector<Case> cases = {
      {{2, 4, 9, 7}, {6, 2, 3, 2}, {2, 6, 5, 6}, ConvAttrs({2, 1}, {1, 0, 2, 1}, {1, 2}, 2)},
      {{3, 3, 6, 6}, {5, 3, 1, 1}, {3, 5, 6, 6}, ConvAttrs({1, 1}, {0, 0, 0, 0}, {1, 1}, 1)},
      {{1, 8, 12, 12}, {8, 1, 3, 3}, {1, 8, 6, 6}, ConvAttrs({2, 2}, {1, 1, 1, 1}, {1, 1}, 8)},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    const In x = Random(c.x, ++seed), w = Random(c.w, ++seed), g = Random(c.out, ++seed);
    ExpectSame("conv2d", {x, w}, c.attrs);
    ExpectSame("conv2d_grad", {x, w, g}, c.attrs);
  }
}

TEST_F(ConvCudaTest, PoolsAndGrads) {
  const Shape xs({2, 3, 10, 8});
  In x = Random(xs, 7);
  for (size_t i = 0; i < x.values.size(); i += 3) x.values[i] = std::round(x.values[i]);  // ties
  x.values[17] = std::nan("");
  for (const bool ceil_mode : {false, true}) {
    for (const bool include_pad : {false, true}) {
      const vm::AttrMap attrs = vm::AttrMap()
                                    .Set("kernel", Ints{3, 2})
                                    .Set("strides", Ints{2, 2})
                                    .Set("pads", Ints{1, 1, 1, 0})
                                    .Set("dilations", Ints{1, 2})
                                    .Set("ceil_mode", int64_t{ceil_mode});
      vm::AttrMap avg = attrs;
      avg.Set("count_include_pad", int64_t{include_pad});
      const std::vector<std::vector<double>> out =
          Run(kCpu, "max_pool2d", DataType::kF64, {x}, attrs);
      ASSERT_EQ(out.size(), 1u);
      const Shape out_shape({2, 3, ceil_mode ? 6 : 5, 4});
      ASSERT_EQ(static_cast<int64_t>(out[0].size()), out_shape.NumElements());
      const In g = Random(out_shape, 8);
      ExpectSame("max_pool2d", {x}, attrs);
      ExpectSame("avg_pool2d", {x}, avg);
      ExpectSame("max_pool2d_grad", {x, g}, attrs);
      ExpectSame("avg_pool2d_grad", {x, g}, avg);
    }
  }
}

}  // namespace
}  // namespace sluice::ops::conv_cuda_test
