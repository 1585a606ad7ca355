// clip and clip_grad (ops/elementwise_ops.cc) on cuda:0: the written-out values of the host
// tests (tests/ops/clip_test.cc) for NaN, infinities, the bounds and integers, and the same
// answers as the host kernels on random inputs. Needs a GPU: every case skips without one.
// That the kernels are registered for exactly the host's dtypes is checked by the
// registration test (cuda_kernels_test.cc), which runs everywhere.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ep/cuda/cuda_device.h"
#include "gtest/gtest.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/ops/cuda/cuda_op_fixture.h"
#include "tests/ops/op_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::clip_cuda_test {
namespace {

using testing::OpsHarness;
using testing::RandomValues;

const Device kCpu(DeviceType::kCpu, 0);
const Device kCuda(DeviceType::kCuda, 0);
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

vm::AttrMap Bounds(double lo, double hi) {
  vm::AttrMap attrs;
  attrs.Set("min", lo).Set("max", hi);
  return attrs;
}

// Element i of `got` equals `want` (NaN where `want` is NaN).
void ExpectSameValues(const std::vector<double>& got, const std::vector<double>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << ": got " << got[i];
    } else {
      EXPECT_EQ(got[i], want[i]) << what << " element " << i;
    }
  }
}

class ClipCudaTest : public testing::CudaOpFixture {
 protected:
  vm::BlobRef Upload(DataType dtype, const std::vector<double>& values, Device device) {
    return CudaOpFixture::Upload(dtype, Shape({static_cast<int64_t>(values.size())}), values,
                                 device);
  }
  // Output 0 of `op` on `device`, downloaded.
  std::vector<double> Run(Device device, const char* op, DataType dtype,
                          const std::vector<std::vector<double>>& inputs, double lo, double hi) {
    SlotBlobs in;
    for (const std::vector<double>& values : inputs) in.push_back({Upload(dtype, values, device)});
    DispatchOptions options;
    options.default_device = device;
    absl::StatusOr<SlotBlobs> out = dispatcher_->Call(op, in, Bounds(lo, hi), options);
    EXPECT_TRUE(out.ok()) << op << " on " << device.ToString() << ": " << out.status();
    if (!out.ok()) return {};
    EXPECT_EQ((*out)[0][0]->device(), device);
    return Download((*out)[0][0]);
  }
};

TEST_F(ClipCudaTest, NanInfinitiesAndBounds) {
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    ExpectSameValues(Run(kCuda, "clip", dtype, {{-5, -1, 0.25, 2, 7, kNan, kInf, -kInf}}, -1, 2),
                     {-1, -1, 0.25, 2, 2, kNan, 2, -1}, "clip(x, -1, 2)");
    ExpectSameValues(Run(kCuda, "clip", dtype, {{-4, 0.5, kNan}}, 0.5, 0.5), {0.5, 0.5, kNan},
                     "clip(x, 0.5, 0.5)");
    ExpectSameValues(
        Run(kCuda, "clip_grad", dtype,
            {{-5, -1, 0, 2, 3, kNan, kInf, -kInf}, {1, 2, 4, 8, 16, 32, 64, 128}}, -1, 2),
        {0, 2, 4, 8, 0, 32, 0, 0}, "clip_grad");
  }
}

TEST_F(ClipCudaTest, IntegersRoundTheBoundsInwards) {
  for (DataType dtype : {DataType::kI32, DataType::kI64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    EXPECT_EQ(Run(kCuda, "clip", dtype, {{-100, -7, -3, -2, 0, 3, 4, 100}}, -3.5, 4.9),
              std::vector<double>({-3, -3, -3, -2, 0, 3, 4, 4}));
    EXPECT_EQ(Run(kCuda, "clip", dtype, {{-100, 5, 100}}, -kInf, kInf),
              std::vector<double>({-100, 5, 100}));
  }
}

TEST_F(ClipCudaTest, SameAsTheHostOnRandomInputs) {
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    std::vector<double> x = RandomValues(1000, 7, -3, 3);
    x[10] = kNan;
    x[20] = -0.5;  // on the lower bound
    const std::vector<double> g = RandomValues(1000, 8);
    ExpectSameValues(Run(kCuda, "clip", dtype, {x}, -0.5, 1.25),
                     Run(kCpu, "clip", dtype, {x}, -0.5, 1.25), "clip");
    ExpectSameValues(Run(kCuda, "clip_grad", dtype, {x, g}, -0.5, 1.25),
                     Run(kCpu, "clip_grad", dtype, {x, g}, -0.5, 1.25), "clip_grad");
  }
}

}  // namespace
}  // namespace sluice::ops::clip_cuda_test
