// The basic op family (ops/basic_ops.cc, ops/cpu/basic_kernels.cc) on cpu and sim against
// plain reference loops, their gradients against finite differences, and the errors the
// dispatcher returns before anything is enqueued.
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::basic_ops_test {
namespace {

using testing::ExpectGradientsMatch;
using testing::GradInput;
using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;
using testing::RandomValues;

class BasicOpsTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  OpsHarness h;
};

TEST_P(BasicOpsTest, FillConstantEveryDtype) {
  for (const char* dtype : {"f32", "f64", "i32", "i64", "bool"}) {
    absl::StatusOr<SlotBlobs> out = h.Run("fill_constant", {},
                                          vm::AttrMap()
                                              .Set("shape", std::vector<int64_t>{2, 3})
                                              .Set("dtype", std::string(dtype))
                                              .Set("value", 3.0),
                                          device());
    ASSERT_TRUE(out.ok()) << out.status();
    const vm::BlobRef& y = (*out)[0][0];
    EXPECT_EQ(DataTypeName(y->dtype()), dtype);
    EXPECT_EQ(y->shape(), Shape({2, 3}));
    EXPECT_EQ(y->device(), device());
    const double expected = std::string(dtype) == "bool" ? 1.0 : 3.0;
    EXPECT_EQ(h.Download(y), std::vector<double>(6, expected)) << dtype;
  }
}

TEST_P(BasicOpsTest, EmptyAndScalarTensors) {
  absl::StatusOr<SlotBlobs> empty =
      h.Run("fill_constant", {}, vm::AttrMap().Set("shape", std::vector<int64_t>{0, 4}), device());
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(h.Download((*empty)[0][0]).empty());
  absl::StatusOr<SlotBlobs> scaled = h.Run("scale", {{(*empty)[0][0]}}, {}, device());
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ((*scaled)[0][0]->shape(), Shape({0, 4}));

  vm::BlobRef scalar = h.Upload(device(), DataType::kF32, Shape(), {2.5});
  absl::StatusOr<SlotBlobs> out =
      h.Run("scale", {{scalar}}, vm::AttrMap().Set("scale", 2.0).Set("bias", 1.0), device());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(h.Download((*out)[0][0]), std::vector<double>({6.0}));
}

TEST_P(BasicOpsTest, AssignFillZerosCastScaleSum) {
  const std::vector<double> xs = RandomValues(24, 1, -4, 4);
  const std::vector<double> ys = RandomValues(24, 2, -4, 4);
  vm::BlobRef x = h.Upload(device(), DataType::kF32, Shape({4, 6}), xs);
  vm::BlobRef y = h.Upload(device(), DataType::kF32, Shape({4, 6}), ys);
  std::vector<double> xf(24), yf(24);
  for (int i = 0; i < 24; ++i) {
    xf[i] = static_cast<float>(xs[i]);
    yf[i] = static_cast<float>(ys[i]);
  }

  absl::StatusOr<SlotBlobs> assigned = h.Run("assign", {{x}}, {}, device());
  ASSERT_TRUE(assigned.ok());
  EXPECT_EQ(h.Download((*assigned)[0][0]), xf);

  absl::StatusOr<SlotBlobs> zeros = h.Run("fill_zeros_like", {{x}}, {}, device());
  ASSERT_TRUE(zeros.ok());
  EXPECT_EQ(h.Download((*zeros)[0][0]), std::vector<double>(24, 0.0));

  absl::StatusOr<SlotBlobs> as_int =
      h.Run("cast", {{x}}, vm::AttrMap().Set("dtype", std::string("i32")), device());
  ASSERT_TRUE(as_int.ok());
  EXPECT_EQ((*as_int)[0][0]->dtype(), DataType::kI32);
  std::vector<double> truncated(24);
  for (int i = 0; i < 24; ++i) truncated[i] = std::trunc(xf[i]);
  EXPECT_EQ(h.Download((*as_int)[0][0]), truncated);

  absl::StatusOr<SlotBlobs> scaled =
      h.Run("scale", {{x}}, vm::AttrMap().Set("scale", -0.5).Set("bias", 2.0), device());
  ASSERT_TRUE(scaled.ok());
  const std::vector<double> got = h.Download((*scaled)[0][0]);
  for (int i = 0; i < 24; ++i) {
    EXPECT_FLOAT_EQ(got[i], static_cast<float>(-0.5f * static_cast<float>(xf[i]) + 2.0f));
  }

  absl::StatusOr<SlotBlobs> summed = h.Run("sum", {{x, y, x}}, {}, device());
  ASSERT_TRUE(summed.ok());
  const std::vector<double> total = h.Download((*summed)[0][0]);
  for (int i = 0; i < 24; ++i) {
    EXPECT_FLOAT_EQ(total[i], static_cast<float>(static_cast<float>(xf[i] + yf[i]) + xf[i]));
  }
}

TEST_P(BasicOpsTest, RandomOpsAreSeededAndReproducible) {
  auto draw = [&](const char* op, int64_t seed, Device where) {
    absl::StatusOr<SlotBlobs> out = h.Run(
        op, {}, vm::AttrMap().Set("shape", std::vector<int64_t>{10000}).Set("seed", seed), where);
    EXPECT_TRUE(out.ok()) << out.status();
    return h.Download((*out)[0][0]);
  };
  for (const char* op : {"uniform_random", "gaussian_random"}) {
    const std::vector<double> a = draw(op, 7, device());
    EXPECT_EQ(a, draw(op, 7, device())) << op;
    EXPECT_EQ(a, draw(op, 7, kCpu)) << op << ": differs between devices";
    EXPECT_NE(a, draw(op, 8, device())) << op;
    double mean = 0, sq = 0;
    for (double v : a) {
      mean += v;
      sq += v * v;
    }
    mean /= a.size();
    const double var = sq / a.size() - mean * mean;
    if (std::string(op) == "uniform_random") {
      for (double v : a) ASSERT_TRUE(v >= -1.0 && v < 1.0) << v;
      EXPECT_NEAR(mean, 0.0, 0.03);
      EXPECT_NEAR(var, 1.0 / 3.0, 0.02);
    } else {
      EXPECT_NEAR(mean, 0.0, 0.03);
      EXPECT_NEAR(var, 1.0, 0.05);
    }
  }
}

TEST_P(BasicOpsTest, Gradients) {
  const Shape shape({2, 3});
  auto input = [&](uint64_t seed) { return GradInput{shape, RandomValues(6, seed)}; };
  ExpectGradientsMatch(h, "assign", {{input(1)}}, {}, device());
  ExpectGradientsMatch(h, "scale", {{input(2)}}, vm::AttrMap().Set("scale", -1.5).Set("bias", 3.0),
                       device());
  ExpectGradientsMatch(h, "sum", {{input(3), input(4), input(5)}}, {}, device());
  ExpectGradientsMatch(h, "cast", {{input(6)}}, vm::AttrMap().Set("dtype", std::string("f64")),
                       device());
}

INSTANTIATE_TEST_SUITE_P(Devices, BasicOpsTest, ::testing::Values(kCpu, kSim0),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

TEST(BasicOpsCopyTest, MemcpyRunsOnCopyStreams) {
  OpsHarness h;
  const std::vector<double> values = RandomValues(16, 3);
  vm::BlobRef host = h.Upload(kCpu, DataType::kF64, Shape({16}), values);
  absl::StatusOr<SlotBlobs> on_device =
      h.Run("memcpy_h2d", {{host}}, vm::AttrMap().Set("device", std::string("sim:1")));
  ASSERT_TRUE(on_device.ok()) << on_device.status();
  const vm::BlobRef& d = (*on_device)[0][0];
  EXPECT_EQ(d->device(), testing::kSim1);
  EXPECT_EQ(h.vm->runtime()->stream_ids().key(d->storage()->last_used_stream()).type,
            StreamType::kHost2Device);
  absl::StatusOr<SlotBlobs> back = h.Run("memcpy_d2h", {{d}});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[0][0]->device(), kCpu);
  EXPECT_EQ(h.Download((*back)[0][0]), values);
}

TEST(BasicOpsErrorTest, BadInputIsRejectedBeforeEnqueue) {
  OpsHarness h;
  const int64_t before = h.vm->stats().instructions;
  vm::BlobRef a = h.Upload(kCpu, DataType::kF32, Shape({2, 3}), RandomValues(6, 1));
  vm::BlobRef b = h.Upload(kCpu, DataType::kF32, Shape({3, 2}), RandomValues(6, 2));
  vm::BlobRef s = h.Upload(kSim0, DataType::kF32, Shape({2, 3}), RandomValues(6, 3));
  vm::BlobRef i = h.Upload(kCpu, DataType::kI32, Shape({2, 3}), {1, 2, 3, 4, 5, 6});
  const int64_t uploads = h.vm->stats().instructions;
  ASSERT_GT(uploads, before);

  struct Case {
    const char* op;
    SlotBlobs inputs;
    vm::AttrMap attrs;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"no_such_op", {}, {}, "unknown op 'no_such_op'"},
      {"fill_constant", {}, {}, "required attribute 'shape'"},
      {"fill_constant", {}, vm::AttrMap().Set("shape", std::string("2x3")), "must be int list"},
      {"fill_constant",
       {},
       vm::AttrMap().Set("shape", std::vector<int64_t>{2}).Set("colour", int64_t{1}),
       "unknown attribute 'colour'"},
      {"fill_constant",
       {},
       vm::AttrMap().Set("shape", std::vector<int64_t>{-2}),
       "attribute 'shape'"},
      {"fill_constant",
       {},
       vm::AttrMap().Set("shape", std::vector<int64_t>{2}).Set("dtype", std::string("f16")),
       "f16"},
      {"sum", {{a, b}}, {}, "X[1] is f32[3, 2] but X[0] is f32[2, 3]"},
      {"sum", {{a, s}}, {}, "is on sim:0 but"},
      {"sum", {{}}, {}, "input 'X' takes one or more tensors, got 0"},
      {"scale", {{i}}, {}, "i32[2, 3]; it must be f32 or f64"},
      {"scale", {{a}, {b}}, {}, "has 1 input slot(s), got 2"},
      {"cast", {{a}}, vm::AttrMap().Set("dtype", std::string("complex")), "complex"},
      {"memcpy_h2d", {{s}}, vm::AttrMap().Set("device", std::string("sim:1")), "must be on cpu"},
      {"memcpy_h2d", {{a}}, vm::AttrMap().Set("device", std::string("tpu:0")), "tpu"},
      {"memcpy_h2d", {{a}}, vm::AttrMap().Set("device", std::string("sim:9")), "sim:9"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SlotBlobs> out = h.Run(c.op, c.inputs, c.attrs);
    ASSERT_FALSE(out.ok()) << c.op << " " << c.message;
    EXPECT_THAT(out.status().message(), HasSubstr(c.message)) << c.op;
  }
  EXPECT_EQ(h.vm->stats().instructions, uploads) << "a rejected call enqueued work";
  // The harness still works afterwards.
  absl::StatusOr<SlotBlobs> ok = h.Run("sum", {{a, a}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(h.Download((*ok)[0][0]).size(), 6u);
}

TEST(BasicOpsCallIntoTest, InPlaceAndMismatchedOutputs) {
  OpsHarness h;
  vm::BlobRef x = h.Upload(kCpu, DataType::kF32, Shape({4}), {1, 2, 3, 4});
  // In place: Out is X.
  ASSERT_TRUE(h.dispatcher->CallInto("scale", {{x}}, {{x}}, vm::AttrMap().Set("scale", 2.0)).ok());
  EXPECT_EQ(h.Download(x), std::vector<double>({2, 4, 6, 8}));
  vm::BlobRef wrong = h.Upload(kCpu, DataType::kF64, Shape({4}), {0, 0, 0, 0});
  const absl::Status status = h.dispatcher->CallInto("scale", {{x}}, {{wrong}}, {});
  EXPECT_THAT(status.message(), HasSubstr("is f64[4] on cpu; the op produces f32[4] on cpu"));
}

}  // namespace
}  // namespace sluice::ops::basic_ops_test
