// The index family's cuda kernels (ops/cuda/index_op_kernels.cc) against its host kernels on
// the same fixed-seed inputs: gather, slice and where bit for bit for every dtype (they only
// move elements), gather_grad and slice_grad bit for bit (one thread per place, the host's
// order), where_grad and erf within a few ulps (a block tree sum, CUDA's erff/erf), and
// gather's out-of-range index as an error at sync naming it. Needs a GPU: every case skips
// without one. That the kernels are registered for the host's dtypes is checked by the
// registration test (cuda_kernels_test.cc), which runs everywhere.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ep/cuda/cuda_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/ops/cuda/cuda_op_fixture.h"
#include "tests/ops/op_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::index_cuda_test {
namespace {

using ::testing::HasSubstr;
using testing::OpsHarness;
using testing::RandomValues;
using Ints = std::vector<int64_t>;

const Device kCpu(DeviceType::kCpu, 0);
const Device kCuda(DeviceType::kCuda, 0);
constexpr DataType kAllDtypes[] = {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64,
                                   DataType::kBool};

// One input of a case.
struct In {
  DataType dtype;
  Shape shape;
  std::vector<double> values;
};

In Random(DataType dtype, Shape shape, uint64_t seed) {
  std::vector<double> v = RandomValues(shape.NumElements(), seed, -3, 3);
  for (double& x : v) {
    if (dtype == DataType::kI32 || dtype == DataType::kI64) x = std::round(x * 10);
    if (dtype == DataType::kBool) x = x > 0 ? 1 : 0;
  }
  return {dtype, std::move(shape), std::move(v)};
}

class IndexCudaTest : public testing::CudaOpFixture {
 protected:
  vm::BlobRef Upload(const In& in, Device device) {
    return CudaOpFixture::Upload(in.dtype, in.shape, in.values, device);
  }
  // Every output of `op` on `device`, downloaded.
  std::vector<std::vector<double>> Run(Device device, const char* op, const std::vector<In>& inputs,
                                       const vm::AttrMap& attrs = {}) {
    SlotBlobs in;
    for (const In& input : inputs) in.push_back({Upload(input, device)});
    DispatchOptions options;
    options.default_device = device;
    absl::StatusOr<SlotBlobs> out = dispatcher_->Call(op, in, attrs, options);
    EXPECT_TRUE(out.ok()) << op << " on " << device.ToString() << ": " << out.status();
    std::vector<std::vector<double>> values;
    if (!out.ok()) return values;
    for (const vm::BlobList& slot : *out) values.push_back(Download(slot[0]));
    return values;
  }
  // The op on cuda and on cpu: equal outputs, or within `rtol` (relative, NaN matching NaN).
  void ExpectSame(const char* op, const std::vector<In>& inputs, const vm::AttrMap& attrs = {},
                  double rtol = 0) {
    const std::vector<std::vector<double>> cuda = Run(kCuda, op, inputs, attrs);
    const std::vector<std::vector<double>> cpu = Run(kCpu, op, inputs, attrs);
    ASSERT_EQ(cuda.size(), cpu.size()) << op;
    for (size_t o = 0; o < cpu.size(); ++o) {
      ASSERT_EQ(cuda[o].size(), cpu[o].size()) << op;
      for (size_t i = 0; i < cpu[o].size(); ++i) {
        if (std::isnan(cpu[o][i]) && std::isnan(cuda[o][i])) continue;
        if (rtol == 0) {
          ASSERT_EQ(cuda[o][i], cpu[o][i]) << op << " output " << o << " element " << i;
        } else {
          ASSERT_NEAR(cuda[o][i], cpu[o][i], rtol * (1 + std::abs(cpu[o][i])))
              << op << " output " << o << " element " << i;
        }
      }
    }
  }
};

TEST_F(IndexCudaTest, GatherAndItsGradMatchTheHostBitForBit) {
  const In index32{DataType::kI32, {2, 3}, {0, -1, 3, 3, -4, 1}};
  const In index64{DataType::kI64, {}, {-2}};
  for (DataType dtype : kAllDtypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    const In x = Random(dtype, {3, 4, 5}, 1);
    ExpectSame("gather", {x, index32}, vm::AttrMap().Set("axis", int64_t{1}));
    ExpectSame("gather", {x, index64}, vm::AttrMap().Set("axis", int64_t{-1}));
  }
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    ExpectSame("gather_grad",
               {Random(dtype, {3, 4, 5}, 1), index32, Random(dtype, {3, 2, 3, 5}, 2)},
               vm::AttrMap().Set("axis", int64_t{1}));
    // An embedding table's gradient: many repeats of few rows.
    In ids{DataType::kI64, {300}, {}};
    for (int i = 0; i < 300; ++i) ids.values.push_back(i % 7 - 3);
    ExpectSame("gather_grad", {Random(dtype, {10, 64}, 3), ids, Random(dtype, {300, 64}, 4)});
  }
}

TEST_F(IndexCudaTest, GatherIndexOutOfRangeFailsAtSync) {
  const In x = Random(DataType::kF32, {5, 2}, 1);
  const In index{DataType::kI64, {3}, {0, 7, -9}};
  SlotBlobs in = {{Upload(x, kCuda)}, {Upload(index, kCuda)}};
  DispatchOptions options;
  options.default_device = kCuda;
  absl::StatusOr<SlotBlobs> out = dispatcher_->Call("gather", in, {}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  const absl::Status synced = vm_->Sync();
  EXPECT_EQ(synced.code(), absl::StatusCode::kInvalidArgument) << synced;
  EXPECT_THAT(synced.message(), HasSubstr("Index[1] = 7 is out of range [-5, 5) for axis 0"));
}

TEST_F(IndexCudaTest, SliceAndItsGradMatchTheHostBitForBit) {
  const vm::AttrMap attrs = vm::AttrMap()
                                .Set("starts", Ints{-1, 1, 0, 100})
                                .Set("ends", Ints{-100, 4, 3, -100})
                                .Set("axes", Ints{0, 2, -1, 3})
                                .Set("steps", Ints{-2, 1, 2, -1});
  for (DataType dtype : kAllDtypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    ExpectSame("slice", {Random(dtype, {5, 3, 6, 4, 3}, 5)}, attrs);
  }
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    ExpectSame("slice_grad", {Random(dtype, {5, 3, 6, 4, 3}, 5), Random(dtype, {3, 3, 3, 4, 2}, 6)},
               attrs);
  }
}

TEST_F(IndexCudaTest, WhereAndItsGradMatchTheHost) {
  const In cond = Random(DataType::kBool, {4, 1, 6}, 7);
  for (DataType dtype : kAllDtypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    ExpectSame("where", {cond, Random(dtype, {3, 6}, 8), Random(dtype, {1}, 9)});
  }
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    const double rtol = dtype == DataType::kF32 ? 1e-5 : 1e-12;
    ExpectSame(
        "where_grad",
        {Random(dtype, {4, 3, 6}, 10), cond, Random(dtype, {3, 6}, 8), Random(dtype, {1}, 9)}, {},
        rtol);
    // Long sums into few outputs (the one-block-per-output kernel).
    ExpectSame("where_grad",
               {Random(dtype, {512, 2}, 11), Random(DataType::kBool, {512, 1}, 12),
                Random(dtype, {2}, 13), Random(dtype, {512, 2}, 14)},
               {}, rtol);
  }
}

TEST_F(IndexCudaTest, ErfAndItsGradMatchTheHostWithinUlps) {
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    const double rtol = dtype == DataType::kF32 ? 4e-7 : 1e-15;
    In x = Random(dtype, {1000}, 15);
    x.values[0] = std::nan("");
    x.values[1] = -0.0;
    x.values[2] = 40;
    ExpectSame("erf", {x}, {}, rtol);
    ExpectSame("erf_grad", {x, Random(dtype, {1000}, 16)}, {}, 4 * rtol);
  }
}

}  // namespace
}  // namespace sluice::ops::index_cuda_test
