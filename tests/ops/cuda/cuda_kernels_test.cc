// The CUDA kernels of the op families (ops/cuda/) against the host kernels. Each case runs an op
// on cpu and on cuda:0 with the same random inputs through the OpDispatcher (inputs uploaded to
// cpu and moved with memcpy_h2d, outputs brought back with memcpy_d2h) and compares the results:
// exactly where the math allows (copies, casts, integer dtypes, the uniform random op), within
// a tolerance where CUDA's exp/log/tanh or a different summation order change the last bits.
// These tests need a GPU and skip without one. The registration test runs everywhere: with the
// CUDA provider built, every (op, dtype) that has a cpu kernel has a cuda kernel; without it,
// no op has one.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ep/cuda/cuda_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/op_dispatcher.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/ops/op_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/sync_checker.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::cuda_kernels_test {
namespace {

using ::testing::HasSubstr;
using testing::OpsHarness;
using testing::RandomValues;
using Ints = std::vector<int64_t>;

const Device kCpu(DeviceType::kCpu, 0);
const Device kCuda(DeviceType::kCuda, 0);
constexpr DataType kAllDtypes[] = {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64,
                                   DataType::kBool};
constexpr DataType kFloatDtypes[] = {DataType::kF32, DataType::kF64};

// A Runtime with cpu and the CUDA devices, a VM with the sync checker on, the standard ops.
struct CudaHarness {
  CudaHarness() {
    ep::RuntimeOptions runtime_options;
    runtime_options.num_sim_devices = 0;
    runtime_options.enable_cuda = true;
    runtime = ep::Runtime::Create(runtime_options).value();
    vm::VmOptions options;
    options.check_sync = true;
    vm = vm::VirtualMachine::Create(runtime.get(), options).value();
    const absl::Status registered = RegisterStandardOps(&registry);
    EXPECT_TRUE(registered.ok()) << registered;
    builder = std::make_unique<vm::InstructionsBuilder>(vm.get());
    dispatcher = std::make_unique<OpDispatcher>(&registry, vm.get(), builder.get());
  }
  ~CudaHarness() {
    const absl::Status synced = vm->Sync();
    EXPECT_TRUE(synced.ok()) << synced;
    EXPECT_EQ(vm->sync_checker()->violation_count(), 0) << vm->sync_checker()->status().message();
    dispatcher.reset();
    builder.reset();
    vm.reset();
  }

  vm::BlobRef Upload(DataType dtype, const Shape& shape, const std::vector<double>& values) {
    EXPECT_EQ(static_cast<int64_t>(values.size()), shape.NumElements());
    vm::Stream* stream = vm->GetStream(StreamKey{kCpu}).value();
    vm::BlobRef blob = vm->NewBlob(stream, dtype, shape).value();
    std::vector<uint8_t> bytes(blob->bytes());
    for (size_t i = 0; i < values.size(); ++i) OpsHarness::Store(dtype, bytes.data(), i, values[i]);
    const absl::Status written = builder->WriteBlob(blob, bytes);
    EXPECT_TRUE(written.ok()) << written;
    return blob;
  }
  // The values of a tensor on either device (a cuda tensor is copied back first).
  std::vector<double> Download(const vm::BlobRef& blob) {
    vm::BlobRef host = blob;
    if (blob->device().type() == DeviceType::kCuda) {
      absl::StatusOr<SlotBlobs> back = dispatcher->Call("memcpy_d2h", {{blob}}, {});
      EXPECT_TRUE(back.ok()) << back.status();
      if (!back.ok()) return {};
      host = (*back)[0][0];
    }
    absl::StatusOr<std::vector<uint8_t>> bytes = builder->ReadBlob(host);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (!bytes.ok()) return {};
    const size_t n = host->bytes() / SizeOf(host->dtype());
    std::vector<double> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = OpsHarness::Load(host->dtype(), bytes->data(), i);
    return values;
  }
  vm::BlobRef ToCuda(const vm::BlobRef& host) {
    absl::StatusOr<SlotBlobs> moved = dispatcher->Call(
        "memcpy_h2d", {{host}}, vm::AttrMap().Set("device", std::string("cuda:0")));
    EXPECT_TRUE(moved.ok()) << moved.status();
    return moved.ok() ? (*moved)[0][0] : nullptr;
  }

  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<vm::VirtualMachine> vm;
  OpRegistry registry;
  std::unique_ptr<vm::InstructionsBuilder> builder;
  std::unique_ptr<OpDispatcher> dispatcher;
};

// One input tensor of a case.
struct In {
  DataType dtype;
  Shape shape;
  std::vector<double> values;
};
using Slots = std::vector<std::vector<In>>;

In Random(DataType dtype, const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  std::vector<double> values = RandomValues(shape.NumElements(), seed, lo, hi);
  if (dtype == DataType::kBool) {
    for (double& v : values) v = v > (lo + hi) / 2 ? 1 : 0;
  } else if (dtype == DataType::kI32 || dtype == DataType::kI64) {
    for (double& v : values) v = std::round(v * 10);
  }
  return {dtype, shape, std::move(values)};
}

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};
// f32: a few ulps of CUDA's math functions or of a reordered sum; f64 likewise.
Tolerance DefaultTolerance(DataType dtype) {
  if (dtype == DataType::kF32) return {2e-5, 2e-6};
  if (dtype == DataType::kF64) return {1e-12, 1e-13};
  return {0, 0};
}

// Sums taken in the element type in another order than the host's (the binary ops' gradients
// over broadcast dims, matrix products): f32 results may differ by many ulps where terms cancel.
Tolerance SumTolerance(DataType dtype) {
  return dtype == DataType::kF32 ? Tolerance{1e-4, 2e-5} : Tolerance{1e-11, 1e-12};
}

void ExpectClose(const std::vector<double>& cuda, const std::vector<double>& cpu, Tolerance tol,
                 const std::string& what) {
  ASSERT_EQ(cuda.size(), cpu.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cpu.size() && reported < 10; ++i) {
    if (std::isnan(cpu[i]) && std::isnan(cuda[i])) continue;
    const double limit = tol.atol + tol.rtol * std::abs(cpu[i]);
    if (!(std::abs(cuda[i] - cpu[i]) <= limit) && !(cuda[i] == cpu[i])) {
      ADD_FAILURE() << what << " element " << i << ": cuda " << cuda[i] << ", cpu " << cpu[i];
      ++reported;
    }
  }
}

// Runs an op on cpu and on cuda:0 with the same inputs (ExpectSame) and compares every output.
class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ep::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    h_ = std::make_unique<CudaHarness>();
  }
  void TearDown() override { h_.reset(); }

  // The blobs of `inputs` on `device`.
  SlotBlobs Place(const Slots& inputs, Device device) {
    SlotBlobs slots(inputs.size());
    for (size_t s = 0; s < inputs.size(); ++s) {
      for (const In& in : inputs[s]) {
        vm::BlobRef blob = h_->Upload(in.dtype, in.shape, in.values);
        slots[s].push_back(device == kCuda ? h_->ToCuda(blob) : blob);
      }
    }
    return slots;
  }

  std::vector<std::vector<double>> RunOn(Device device, absl::string_view op, const Slots& inputs,
                                         const vm::AttrMap& attrs,
                                         const std::vector<std::pair<int, int>>& in_place) {
    SlotBlobs in = Place(inputs, device);
    DispatchOptions options;
    options.default_device = device;
    SlotBlobs out;
    if (in_place.empty()) {
      absl::StatusOr<SlotBlobs> called = h_->dispatcher->Call(op, in, attrs, options);
      EXPECT_TRUE(called.ok()) << op << " on " << device.ToString() << ": " << called.status();
      if (!called.ok()) return {};
      out = *std::move(called);
    } else {
      for (const auto& [slot, index] : in_place) out.push_back({in[slot][index]});
      const absl::Status called = h_->dispatcher->CallInto(op, in, out, attrs, options);
      EXPECT_TRUE(called.ok()) << op << " on " << device.ToString() << ": " << called;
    }
    std::vector<std::vector<double>> values;
    for (const vm::BlobList& slot : out) {
      for (const vm::BlobRef& blob : slot) values.push_back(h_->Download(blob));
    }
    return values;
  }

  // With `in_place` given, the op writes into its inputs through CallInto: output slot i is
  // input in_place[i] = (slot, index) on each side.
  void ExpectSame(absl::string_view op, const Slots& inputs, const vm::AttrMap& attrs = {},
                  std::optional<Tolerance> tolerance = std::nullopt,
                  const std::vector<std::pair<int, int>>& in_place = {}) {
    DataType key = DataType::kF32;
    if (!inputs.empty() && !inputs[0].empty()) key = inputs[0][0].dtype;
    if (inputs.empty()) key = ParseDataType(attrs.GetString("dtype").value_or("f32")).value();
    const Tolerance tol = tolerance.value_or(DefaultTolerance(key));
    const std::string what = absl::StrCat(op, " (", DataTypeName(key), ")");
    const std::vector<std::vector<double>> cpu = RunOn(kCpu, op, inputs, attrs, in_place);
    const std::vector<std::vector<double>> cuda = RunOn(kCuda, op, inputs, attrs, in_place);
    ASSERT_EQ(cuda.size(), cpu.size()) << what;
    for (size_t i = 0; i < cpu.size(); ++i) {
      ExpectClose(cuda[i], cpu[i], tol, absl::StrCat(what, " output ", i));
    }
    const absl::Status synced = h_->vm->Sync();
    EXPECT_TRUE(synced.ok()) << what << ": " << synced;
  }

  // The shape of output 0 of `op` for these inputs (schema inference).
  Shape OutShape(absl::string_view op, const Slots& inputs, const vm::AttrMap& attrs) {
    const OpSchema* schema = h_->registry.FindSchema(op).value();
    std::vector<std::vector<TensorMeta>> metas;
    for (const std::vector<In>& slot : inputs) {
      metas.emplace_back();
      for (const In& in : slot) metas.back().push_back({in.dtype, in.shape});
    }
    return schema->InferOutputs(metas, schema->NormalizeAttrs(attrs).value()).value()[0][0].shape;
  }

  std::unique_ptr<CudaHarness> h_;
};

// ---- Registration (runs without a GPU) ----

TEST(CudaKernelRegistrationTest, EveryHostKernelHasACudaKernelWhenTheProviderIsBuilt) {
  OpRegistry registry;
  ASSERT_TRUE(RegisterStandardOps(&registry).ok());
  const bool built = ep::CudaProviderBuilt();
  int host_keys = 0;
  int f32_ops = 0;
  for (const std::string& op : registry.op_names()) {
    for (DataType dtype : kAllDtypes) {
      const bool host = registry.HasKernel(op, DeviceType::kCpu, dtype);
      const bool cuda = registry.HasKernel(op, DeviceType::kCuda, dtype);
      if (!host) {
        EXPECT_FALSE(cuda) << op << " has a cuda kernel for " << DataTypeName(dtype)
                           << " but no host kernel";
        continue;
      }
      ++host_keys;
      if (dtype == DataType::kF32) ++f32_ops;
      EXPECT_EQ(cuda, built) << op << " " << DataTypeName(dtype)
                             << (built ? ": no cuda kernel" : ": a cuda kernel without CUDA");
      if (cuda) {
        absl::StatusOr<const vm::OpKernel*> kernel =
            registry.FindKernel(op, DeviceType::kCuda, dtype);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        EXPECT_EQ((*kernel)->name(), op);
      }
    }
  }
  EXPECT_GT(host_keys, f32_ops);
  // The ops of the five families by name, so that a family registering nothing shows.
  const std::vector<std::string> ops = absl::StrSplit(
      "fill_constant fill_zeros_like assign cast cast_grad scale sum memcpy_h2d memcpy_d2h "
      "uniform_random gaussian_random "
      "add sub mul div max min add_grad sub_grad mul_grad div_grad max_grad min_grad "
      "relu sigmoid tanh exp log sqrt square "
      "relu_grad sigmoid_grad tanh_grad exp_grad log_grad sqrt_grad square_grad "
      "abs abs_grad neg pow pow_grad clip clip_grad "
      "matmul matmul_grad reduce_sum reduce_mean reduce_sum_grad reduce_mean_grad "
      "softmax log_softmax softmax_grad log_softmax_grad "
      "softmax_with_cross_entropy softmax_with_cross_entropy_grad "
      "batch_norm_infer batch_norm_infer_grad layer_norm layer_norm_grad "
      "reshape reshape_grad transpose concat concat_grad split sgd adam "
      "less_than less_equal greater_than greater_equal equal not_equal increment "
      "write_row read_row "
      "gather gather_grad slice slice_grad where_grad erf erf_grad "
      "conv2d conv2d_grad max_pool2d max_pool2d_grad avg_pool2d avg_pool2d_grad "
      "sin sin_grad cos cos_grad tan tan_grad asin asin_grad acos acos_grad atan atan_grad "
      "sinh sinh_grad cosh cosh_grad asinh asinh_grad acosh acosh_grad atanh atanh_grad "
      "floor ceil round "
      "all_reduce all_gather reduce_scatter broadcast reduce send recv",
      ' ');
  for (const std::string& op : ops) {
    EXPECT_TRUE(registry.HasKernel(op, DeviceType::kCpu, DataType::kF32)) << op;
    EXPECT_EQ(registry.HasKernel(op, DeviceType::kCuda, DataType::kF32), built) << op;
  }
  EXPECT_EQ(f32_ops, static_cast<int>(ops.size()))
      << "an op with an f32 host kernel is missing from the list above";
  // The logical ops take bool alone; where is keyed by its bool Cond.
  for (const char* op : {"logical_and", "logical_or", "logical_xor", "logical_not", "where"}) {
    EXPECT_TRUE(registry.HasKernel(op, DeviceType::kCpu, DataType::kBool)) << op;
    EXPECT_EQ(registry.HasKernel(op, DeviceType::kCuda, DataType::kBool), built) << op;
  }
}

// ---- Basic family ----

TEST_F(CudaKernelsTest, FillAndCopies) {
  for (DataType dtype : kAllDtypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    ExpectSame("fill_constant", {},
               vm::AttrMap()
                   .Set("shape", Ints{3, 5})
                   .Set("dtype", std::string(DataTypeName(dtype)))
                   .Set("value", 2.5));
    ExpectSame("fill_zeros_like", {{Random(dtype, {4, 3}, 1)}});
    ExpectSame("assign", {{Random(dtype, {7}, 2)}});
    ExpectSame("assign", {{Random(dtype, {0, 3}, 2)}});
    // memcpy_h2d and memcpy_d2h carry every case; here the bytes must survive exactly.
    const In x = Random(dtype, {2, 3, 4}, 3);
    // The reference is the host tensor read back: x.values are doubles, which the upload
    // rounds to the dtype.
    vm::BlobRef here = h_->Upload(x.dtype, x.shape, x.values);
    vm::BlobRef there = h_->ToCuda(here);
    EXPECT_EQ(there->device(), kCuda);
    const std::vector<double> want = h_->Download(here);
    ASSERT_EQ(want.size(), x.values.size());
    EXPECT_EQ(h_->Download(there), want);
  }
}

TEST_F(CudaKernelsTest, CastsBetweenEveryPair) {
  for (DataType from : kAllDtypes) {
    for (DataType to : kAllDtypes) {
      SCOPED_TRACE(absl::StrCat(DataTypeName(from), " -> ", DataTypeName(to)));
      const vm::AttrMap attrs = vm::AttrMap().Set("dtype", std::string(DataTypeName(to)));
      ExpectSame("cast", {{Random(from, {5, 4}, 4, -5, 5)}}, attrs, Tolerance{});
      ExpectSame("cast_grad", {{Random(from, {6}, 5, -5, 5)}, {Random(to, {6}, 6)}}, {},
                 Tolerance{});
    }
  }
}

TEST_F(CudaKernelsTest, ScaleAndSum) {
  for (DataType dtype : kFloatDtypes) {
    ExpectSame("scale", {{Random(dtype, {33}, 7)}},
               vm::AttrMap().Set("scale", 1.5).Set("bias", -0.25), Tolerance{});
  }
  for (DataType dtype : {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    std::vector<In> three, many;
    for (int i = 0; i < 3; ++i) three.push_back(Random(dtype, {2, 5}, 10 + i));
    for (int i = 0; i < 40; ++i) many.push_back(Random(dtype, {9}, 20 + i));
    // Same order of additions as the host: exact.
    ExpectSame("sum", {three}, {}, Tolerance{});
    ExpectSame("sum", {many}, {}, Tolerance{});             // two passes
    ExpectSame("sum", {many}, {}, Tolerance{}, {{0, 0}});   // into an input of the first pass
    ExpectSame("sum", {many}, {}, Tolerance{}, {{0, 35}});  // into one of the second
  }
}

TEST_F(CudaKernelsTest, RandomOpsMatchTheHost) {
  for (DataType dtype : kFloatDtypes) {
    const std::string name(DataTypeName(dtype));
    for (int64_t seed : {0, 7, -3}) {
      // Uniform: the same double arithmetic on both sides, bit for bit.
      ExpectSame("uniform_random", {},
                 vm::AttrMap()
                     .Set("shape", Ints{1000})
                     .Set("dtype", name)
                     .Set("min", -2.0)
                     .Set("max", 3.0)
                     .Set("seed", seed),
                 Tolerance{});
      // Gaussian: CUDA's log and cos are within an ulp or two of the host's.
      ExpectSame("gaussian_random", {},
                 vm::AttrMap()
                     .Set("shape", Ints{999})
                     .Set("dtype", name)
                     .Set("mean", 1.0)
                     .Set("std", 2.0)
                     .Set("seed", seed),
                 Tolerance{dtype == DataType::kF32 ? 1e-6 : 1e-13, 1e-13});
    }
  }
}

// ---- Elementwise family ----

const std::vector<std::pair<Shape, Shape>>& BroadcastCases() {
  static const auto* const cases = new std::vector<std::pair<Shape, Shape>>{
      {{3, 4}, {3, 4}},     {{3, 4}, {4}},    {{4}, {3, 4}},
      {{2, 1, 4}, {3, 1}},  {{}, {5}},        {{2, 3, 1, 5}, {1, 3, 4, 1}},
      {{0, 3}, {3}},        {{1, 0}, {4, 1}}, {{37, 129}, {129}},
      {{300, 2}, {300, 1}}, {{2, 3}, {}},     {{1}, {1}},
  };
  return *cases;
}

Shape Broadcast(const Shape& a, const Shape& b) { return BroadcastShapes(a, b).value(); }

TEST_F(CudaKernelsTest, BinaryOpsAndGradsWithBroadcasting) {
  for (DataType dtype : kFloatDtypes) {
    for (const char* op : {"add", "sub", "mul", "div", "max", "min"}) {
      uint64_t seed = 100;
      for (const auto& [xs, ys] : BroadcastCases()) {
        SCOPED_TRACE(absl::StrCat(op, " ", xs.ToString(), " ", ys.ToString()));
        const bool div = std::string(op) == "div";
        const In x = Random(dtype, xs, seed++);
        const In y = div ? Random(dtype, ys, seed++, 0.5, 2) : Random(dtype, ys, seed++);
        const In g = Random(dtype, Broadcast(xs, ys), seed++);
        ExpectSame(op, {{x}, {y}}, {}, Tolerance{});
        ExpectSame(absl::StrCat(op, "_grad"), {{x}, {y}, {g}}, {}, SumTolerance(dtype));
      }
      // Ties for max and min: small integers.
      const In x = Random(dtype, {4, 6}, seed++, -1.5, 1.5);
      In ix = x, iy = Random(dtype, {6}, seed++, -1.5, 1.5);
      for (double& v : ix.values) v = std::round(v);
      for (double& v : iy.values) v = std::round(v);
      if (std::string(op) != "div") {
        ExpectSame(op, {{ix}, {iy}}, {}, Tolerance{});
        ExpectSame(absl::StrCat(op, "_grad"), {{ix}, {iy}, {Random(dtype, {4, 6}, seed++)}}, {},
                   SumTolerance(dtype));
      }
    }
  }
}

// max and min propagate a NaN in either argument (also broadcast), their gradients go to the
// argument returned (X on a tie and where X is NaN), and i32 and i64 max and min work with
// negative values and broadcasting: against values written here and against the host.
TEST_F(CudaKernelsTest, MaxMinNanRuleAndIntegers) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> x = {nan, 1, nan, 2, 1, 3};
  const std::vector<double> y = {1, nan, nan, 1, 2, 3};
  const std::vector<double> g = {1, 2, 4, 8, 16, 32};
  auto expect_values = [](const std::vector<double>& got, const std::vector<double>& want,
                          const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << ": " << got[i];
      } else {
        EXPECT_EQ(got[i], want[i]) << what << " element " << i;
      }
    }
  };
  for (DataType dtype : kFloatDtypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    const In ix{dtype, {6}, x}, iy{dtype, {6}, y}, ig{dtype, {6}, g};
    const std::vector<double> want = {nan, nan, nan, 2, 2, 3};
    expect_values(RunOn(kCuda, "max", {{ix}, {iy}}, {}, {})[0], want, "max(x, y)");
    expect_values(RunOn(kCuda, "max", {{iy}, {ix}}, {}, {})[0], want, "max(y, x)");
    const std::vector<double> want_min = {nan, nan, nan, 1, 1, 3};
    expect_values(RunOn(kCuda, "min", {{ix}, {iy}}, {}, {})[0], want_min, "min(x, y)");
    expect_values(RunOn(kCuda, "min", {{iy}, {ix}}, {}, {})[0], want_min, "min(y, x)");
    const In nan_scalar{dtype, {}, {nan}};
    expect_values(RunOn(kCuda, "max", {{ix}, {nan_scalar}}, {}, {})[0], std::vector<double>(6, nan),
                  "max(x, NaN)");
    const std::vector<std::vector<double>> max_grad =
        RunOn(kCuda, "max_grad", {{ix}, {iy}, {ig}}, {}, {});
    ASSERT_EQ(max_grad.size(), 2u);
    EXPECT_EQ(max_grad[0], std::vector<double>({1, 0, 4, 8, 0, 32}));
    EXPECT_EQ(max_grad[1], std::vector<double>({0, 2, 0, 0, 16, 0}));
    const std::vector<std::vector<double>> min_grad =
        RunOn(kCuda, "min_grad", {{ix}, {iy}, {ig}}, {}, {});
    ASSERT_EQ(min_grad.size(), 2u);
    EXPECT_EQ(min_grad[0], std::vector<double>({1, 0, 4, 0, 16, 32}));
    EXPECT_EQ(min_grad[1], std::vector<double>({0, 2, 0, 8, 0, 0}));
    // A broadcast Y with a NaN, summed into YGrad.
    const In by{dtype, {2}, {nan, 2}};
    const In bx{dtype, {3, 2}, {nan, 0, 1, nan, -1, 4}};
    const std::vector<std::vector<double>> summed =
        RunOn(kCuda, "max_grad", {{bx}, {by}, {In{dtype, {3, 2}, g}}}, {}, {});
    ASSERT_EQ(summed.size(), 2u);
    EXPECT_EQ(summed[0], std::vector<double>({1, 0, 0, 8, 0, 32}));
    EXPECT_EQ(summed[1], std::vector<double>({20, 2}));
    ExpectSame("max", {{bx}, {by}}, {}, Tolerance{});
    ExpectSame("min_grad", {{bx}, {by}, {In{dtype, {3, 2}, g}}}, {}, Tolerance{});
  }
  for (DataType dtype : {DataType::kI32, DataType::kI64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double lo = dtype == DataType::kI32 ? -2147483648.0 : -0x1p62;
    const In a{dtype, {2, 4}, {-5, 3, -1, lo, 0, -7, 9, -2}};
    const In c{dtype, {4}, {-2, -2, 4, -1}};
    EXPECT_EQ(RunOn(kCuda, "max", {{a}, {c}}, {}, {})[0],
              std::vector<double>({-2, 3, 4, -1, 0, -2, 9, -1}));
    EXPECT_EQ(RunOn(kCuda, "min", {{c}, {a}}, {}, {})[0],
              std::vector<double>({-5, -2, -1, lo, -2, -7, 4, -2}));
    ExpectSame("max", {{c}, {a}}, {}, Tolerance{});
    ExpectSame("min", {{a}, {c}}, {}, Tolerance{});
  }
}

TEST_F(CudaKernelsTest, InPlaceElementwise) {
  for (DataType dtype : kFloatDtypes) {
    const In x = Random(dtype, {5, 7}, 1);
    const In y = Random(dtype, {5, 7}, 2, 0.5, 2);
    const In g = Random(dtype, {5, 7}, 3);
    ExpectSame("mul", {{x}, {y}}, {}, Tolerance{}, {{0, 0}});
    ExpectSame("div", {{x}, {y}}, {}, Tolerance{}, {{1, 0}});
    // XGrad is X and YGrad is OutGrad: the kernel must read copies.
    ExpectSame("mul_grad", {{x}, {y}, {g}}, {}, std::nullopt, {{0, 0}, {2, 0}});
    ExpectSame("div_grad", {{x}, {y}, {g}}, {}, std::nullopt, {{1, 0}, {0, 0}});
    ExpectSame("exp", {{x}}, {}, std::nullopt, {{0, 0}});
    ExpectSame("tanh_grad", {{x}, {g}}, {}, std::nullopt, {{1, 0}});
  }
}

TEST_F(CudaKernelsTest, UnaryOpsAndGrads) {
  const std::pair<const char*, bool> unary[] = {
      {"relu", false}, {"sigmoid", false}, {"tanh", false}, {"exp", false}, {"log", true},
      {"sqrt", true},  {"square", false},  {"abs", false},  {"neg", false},
  };
  for (DataType dtype : kFloatDtypes) {
    uint64_t seed = 200;
    for (const auto& [op, positive] : unary) {
      for (const Shape& shape : {Shape{1000}, Shape{3, 4, 5}, Shape{0}}) {
        SCOPED_TRACE(absl::StrCat(op, " ", shape.ToString()));
        const In x =
            positive ? Random(dtype, shape, seed++, 0.1, 4) : Random(dtype, shape, seed++, -6, 6);
        ExpectSame(op, {{x}});
        if (std::string(op) == "neg") continue;  // its gradient is a neg: no grad op
        // The grad ops read Out (relu, sigmoid, tanh, exp, sqrt) or X (log, square, abs):
        // any positive values serve both.
        ExpectSame(absl::StrCat(op, "_grad"),
                   {{Random(dtype, shape, seed++, 0.1, 2)}, {Random(dtype, shape, seed++)}});
      }
    }
    // relu keeps NaN and maps -0 and 0 to themselves or 0 as the host does; so does abs.
    ExpectSame("relu", {{In{dtype, {4}, {std::nan(""), -0.0, 0.0, -1.0}}}}, {}, Tolerance{});
    ExpectSame("abs", {{In{dtype, {4}, {std::nan(""), -0.0, 0.0, -1.0}}}}, {}, Tolerance{});
    // pow and pow_grad: a whole factor on any base, fractional and negative ones on positive
    // bases.
    for (const double factor : {3.0, 0.5, -1.5}) {
      SCOPED_TRACE(absl::StrCat("pow factor ", factor));
      vm::AttrMap attrs;
      attrs.Set("factor", factor);
      const bool whole = factor == 3.0;
      const In x = whole ? Random(dtype, Shape{1000}, seed++, -3, 3)
                         : Random(dtype, Shape{1000}, seed++, 0.1, 4);
      ExpectSame("pow", {{x}}, attrs);
      ExpectSame("pow_grad", {{x}, {Random(dtype, Shape{1000}, seed++)}}, attrs);
    }
  }
}

// The unary math family on random inputs inside and around each domain, and on edge values
// (signed zeros, +-1, halves, outside the domain, NaN, +-inf): CUDA's math library within a
// few ulps of the host's (NaN where the host gives NaN), floor, ceil and round exactly.
TEST_F(CudaKernelsTest, UnaryMathOpsAndGrads) {
  struct Op {
    const char* op;
    double lo, hi;
    bool grad;
  };
  const Op ops[] = {
      {"sin", -6, 6, true},      {"cos", -6, 6, true},       {"tan", -1.5, 1.5, true},
      {"asin", -1.2, 1.2, true}, {"acos", -1.2, 1.2, true},  {"atan", -6, 6, true},
      {"sinh", -6, 6, true},     {"cosh", -6, 6, true},      {"asinh", -6, 6, true},
      {"acosh", 0.5, 6, true},   {"atanh", -1.2, 1.2, true}, {"floor", -6, 6, false},
      {"ceil", -6, 6, false},    {"round", -6, 6, false},
  };
  const double edges[] = {0.0,
                          -0.0,
                          1.0,
                          -1.0,
                          0.5,
                          -0.5,
                          1.5,
                          2.5,
                          -2.5,
                          100.0,
                          std::nan(""),
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity()};
  for (DataType dtype : kFloatDtypes) {
    uint64_t seed = 900;
    for (const Op& o : ops) {
      SCOPED_TRACE(o.op);
      In x = Random(dtype, Shape{1000}, seed++, o.lo, o.hi);
      for (size_t i = 0; i < std::size(edges); ++i) x.values[i] = edges[i];
      ExpectSame(o.op, {{x}}, {}, o.grad ? std::nullopt : std::optional<Tolerance>(Tolerance{}));
      if (o.grad) {
        ExpectSame(absl::StrCat(o.op, "_grad"), {{x}, {Random(dtype, Shape{1000}, seed++)}});
      }
    }
  }
}

// ---- Nn family ----

TEST_F(CudaKernelsTest, MatmulAndGrad) {
  struct Case {
    Shape x, y;
    int tx, ty;
  };
  const Case cases[] = {
      {{5, 7}, {7, 3}, 0, 0},
      {{7, 5}, {7, 3}, 1, 0},
      {{5, 7}, {3, 7}, 0, 1},
      {{7, 5}, {3, 7}, 1, 1},
      {{37, 45}, {45, 29}, 0, 0},
      {{1, 1}, {1, 1}, 0, 0},
      {{2, 3, 4, 5}, {5, 6}, 0, 0},
      {{1, 4, 5}, {3, 5, 2}, 0, 0},
      {{2, 1, 3, 4}, {1, 5, 4, 2}, 0, 0},
      {{2, 1, 4, 3}, {1, 5, 2, 4}, 1, 1},
      {{3, 0}, {0, 4}, 0, 0},
      {{0, 3}, {3, 4}, 0, 0},
      {{17, 33}, {2, 33, 18}, 0, 0},
  };
  for (DataType dtype : kFloatDtypes) {
    uint64_t seed = 300;
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(c.x.ToString(), (c.tx ? "^T" : ""), " @ ", c.y.ToString(),
                                (c.ty ? "^T" : "")));
      const vm::AttrMap attrs =
          vm::AttrMap().Set("transpose_x", int64_t{c.tx}).Set("transpose_y", int64_t{c.ty});
      const In x = Random(dtype, c.x, seed++);
      const In y = Random(dtype, c.y, seed++);
      const Tolerance tol = SumTolerance(dtype);
      ExpectSame("matmul", {{x}, {y}}, attrs, tol);
      // OutGrad has the product's shape: take it from a cpu run.
      const Shape out = OutShape("matmul", {{x}, {y}}, attrs);
      ExpectSame("matmul_grad", {{x}, {y}, {Random(dtype, out, seed++)}}, attrs, tol);
    }
  }
}

TEST_F(CudaKernelsTest, Reductions) {
  struct Case {
    Shape x;
    Ints axes;
    int64_t keepdim;
  };
  const Case cases[] = {
      {{3, 4, 5}, {}, 0},  {{3, 4, 5}, {1}, 0}, {{3, 4, 5}, {0, 2}, 1}, {{3, 4, 5}, {-1}, 0},
      {{2, 3000}, {1}, 0}, {{3000, 2}, {0}, 1}, {{4, 1, 6}, {1, 2}, 0}, {{}, {}, 0},
      {{0, 3}, {0}, 0},    {{2, 0, 3}, {1}, 1}, {{0, 3}, {1}, 0},       {{5, 6, 7, 8}, {0, 2}, 0},
  };
  for (DataType dtype : kFloatDtypes) {
    uint64_t seed = 400;
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(c.x.ToString(), " axes ", c.axes.size(), " keepdim ", c.keepdim));
      const vm::AttrMap attrs = vm::AttrMap().Set("axes", c.axes).Set("keepdim", c.keepdim);
      const In x = Random(dtype, c.x, seed++);
      for (const char* op : {"reduce_sum", "reduce_mean"}) {
        ExpectSame(op, {{x}}, attrs);
        const In g = Random(dtype, OutShape(op, {{x}}, attrs), seed++);
        ExpectSame(absl::StrCat(op, "_grad"), {{x}, {g}}, attrs, Tolerance{});
      }
    }
  }
}

TEST_F(CudaKernelsTest, SoftmaxAndLogSoftmax) {
  struct Case {
    Shape x;
    int64_t axis;
  };
  const Case cases[] = {{{4, 10}, -1}, {{3, 5, 4}, 1}, {{2, 300}, 1}, {{6, 3}, 0},
                        {{7}, 0},      {{2, 0, 3}, 1}, {{1, 1}, -1},  {{65, 33}, -1}};
  for (DataType dtype : kFloatDtypes) {
    uint64_t seed = 500;
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(c.x.ToString(), " axis ", c.axis));
      const vm::AttrMap attrs = vm::AttrMap().Set("axis", c.axis);
      const In x = Random(dtype, c.x, seed++, -20, 20);
      for (const char* op : {"softmax", "log_softmax"}) {
        ExpectSame(op, {{x}}, attrs);
        const In y = Random(dtype, c.x, seed++, 0, 1);
        const In g = Random(dtype, c.x, seed++);
        ExpectSame(absl::StrCat(op, "_grad"), {{y}, {g}}, attrs);
      }
    }
    // In place.
    ExpectSame("softmax", {{Random(dtype, {3, 9}, seed++)}}, {}, std::nullopt, {{0, 0}});
  }
}

// Class indices in [0, classes).
In Labels(const Shape& shape, int64_t classes, uint64_t seed) {
  std::vector<double> values =
      RandomValues(shape.NumElements(), seed, 0, static_cast<double>(classes));
  for (double& v : values) v = std::floor(v);
  return {DataType::kI64, shape, std::move(values)};
}

TEST_F(CudaKernelsTest, SoftmaxWithCrossEntropyAndGrad) {
  struct Case {
    Shape logits;
  };
  const Case cases[] = {{{6, 7}}, {{2, 3, 40}}, {{5, 1}}, {{0, 4}}, {{3, 100}}};
  for (DataType dtype : kFloatDtypes) {
    uint64_t seed = 600;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.logits.ToString());
      Ints label_dims(c.logits.dims().begin(), c.logits.dims().end());
      label_dims.back() = 1;
      const Shape label_shape{absl::MakeConstSpan(label_dims)};
      const int64_t classes = c.logits.dim(c.logits.rank() - 1);
      const In logits = Random(dtype, c.logits, seed++, -5, 5);
      const In label = Labels(label_shape, classes, seed++);
      ExpectSame("softmax_with_cross_entropy", {{logits}, {label}});
      In softmax = Random(dtype, c.logits, seed++, 0, 1);
      const In loss_grad = Random(dtype, label_shape, seed++);
      const In softmax_grad = Random(dtype, c.logits, seed++);
      ExpectSame("softmax_with_cross_entropy_grad", {{softmax}, {label}, {loss_grad}, {}});
      ExpectSame("softmax_with_cross_entropy_grad",
                 {{softmax}, {label}, {loss_grad}, {softmax_grad}});
    }
  }
}

TEST_F(CudaKernelsTest, LabelOutOfRangeFailsAtSync) {
  vm::BlobRef logits = h_->ToCuda(h_->Upload(DataType::kF32, {3, 5}, RandomValues(15, 1)));
  for (double bad : {5.0, -1.0}) {
    vm::BlobRef label = h_->ToCuda(h_->Upload(DataType::kI64, {3, 1}, {0, bad, 4}));
    absl::StatusOr<SlotBlobs> out =
        h_->dispatcher->Call("softmax_with_cross_entropy", {{logits}, {label}}, {});
    ASSERT_TRUE(out.ok()) << "the range check happens at run time: " << out.status();
    const std::vector<double> loss = h_->Download((*out)[1][0]);
    const absl::Status synced = h_->vm->Sync();
    EXPECT_EQ(synced.code(), absl::StatusCode::kInvalidArgument) << synced;
    EXPECT_THAT(synced.message(), HasSubstr("op 'softmax_with_cross_entropy'"));
    EXPECT_THAT(synced.message(), HasSubstr(absl::StrCat("Label[1] = ", bad)));
    EXPECT_THAT(synced.message(), HasSubstr("out of range [0, 5)"));
    ASSERT_EQ(loss.size(), 3u);
    EXPECT_FALSE(std::isnan(loss[0]));
    EXPECT_TRUE(std::isnan(loss[1]));

    absl::StatusOr<SlotBlobs> grad = h_->dispatcher->Call(
        "softmax_with_cross_entropy_grad",
        {{(*out)[0][0]}, {label}, {h_->ToCuda(h_->Upload(DataType::kF32, {3, 1}, {1, 1, 1}))}, {}},
        {});
    ASSERT_TRUE(grad.ok()) << grad.status();
    const std::vector<double> dx = h_->Download((*grad)[0][0]);
    const absl::Status grad_synced = h_->vm->Sync();
    EXPECT_THAT(grad_synced.message(), HasSubstr("op 'softmax_with_cross_entropy_grad'"));
    ASSERT_EQ(dx.size(), 15u);
    EXPECT_TRUE(std::isnan(dx[5]));
    EXPECT_FALSE(std::isnan(dx[0]));
  }
  // Valid labels afterwards: no error.
  vm::BlobRef label = h_->ToCuda(h_->Upload(DataType::kI64, {3, 1}, {0, 2, 4}));
  ASSERT_TRUE(h_->dispatcher->Call("softmax_with_cross_entropy", {{logits}, {label}}, {}).ok());
  EXPECT_TRUE(h_->vm->Sync().ok());
}

// ---- Norm family ----

TEST_F(CudaKernelsTest, BatchNormAndGrad) {
  const Shape shapes[] = {{2, 3, 4, 5}, {7, 3}, {6}, {0, 3, 2}, {2, 300, 1}};
  for (DataType dtype : kFloatDtypes) {
    uint64_t seed = 1300;
    for (const Shape& xs : shapes) {
      SCOPED_TRACE(xs.ToString());
      const Shape cs({xs.rank() >= 2 ? xs.dim(1) : 1});
      const In x = Random(dtype, xs, seed++, -3, 3);
      const In scale = Random(dtype, cs, seed++), bias = Random(dtype, cs, seed++);
      const In mean = Random(dtype, cs, seed++), var = Random(dtype, cs, seed++, 0.1, 2);
      const vm::AttrMap attrs = vm::AttrMap().Set("epsilon", 1e-3);
      ExpectSame("batch_norm_infer", {{x}, {scale}, {bias}, {mean}, {var}}, attrs);
      ExpectSame("batch_norm_infer_grad",
                 {{x}, {scale}, {mean}, {var}, {Random(dtype, xs, seed++)}}, attrs,
                 SumTolerance(dtype));
    }
  }
}

TEST_F(CudaKernelsTest, LayerNormAndGrad) {
  struct Case {
    Shape x;
    int64_t axis;
  };
  // Rows shorter and longer than a block, one column, no rows, empty rows.
  const Case cases[] = {{{6, 7}, -1}, {{2, 3, 40}, 1}, {{3, 700}, 1}, {{5, 1}, -1},
                        {{0, 4}, 1},  {{3, 0}, 1},     {{2, 3, 4}, 0}};
  for (DataType dtype : kFloatDtypes) {
    uint64_t seed = 1400;
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(c.x.ToString(), " axis ", c.axis));
      const int a = static_cast<int>(c.axis < 0 ? c.axis + c.x.rank() : c.axis);
      const Shape normalized(c.x.dims().subspan(a));
      Ints stats;
      for (int d = 0; d < c.x.rank(); ++d) stats.push_back(d < a ? c.x.dim(d) : 1);
      const Shape stats_shape{absl::MakeConstSpan(stats)};
      const vm::AttrMap attrs = vm::AttrMap().Set("axis", c.axis);
      const In x = Random(dtype, c.x, seed++, -2, 4);
      const In scale = Random(dtype, normalized, seed++);
      const In bias = Random(dtype, normalized, seed++);
      ExpectSame("layer_norm", {{x}, {scale}, {bias}}, attrs, SumTolerance(dtype));
      ExpectSame("layer_norm", {{x}, {scale}, {}}, attrs, SumTolerance(dtype));
      const In mean = Random(dtype, stats_shape, seed++);
      const In inv = Random(dtype, stats_shape, seed++, 0.5, 2);
      ExpectSame("layer_norm_grad", {{x}, {scale}, {mean}, {inv}, {Random(dtype, c.x, seed++)}},
                 attrs, SumTolerance(dtype));
    }
  }
}

// ---- Integer arithmetic ----

TEST_F(CudaKernelsTest, IntegerArithmeticWrapsAndTruncates) {
  for (DataType dtype : {DataType::kI32, DataType::kI64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    uint64_t seed = 1500;
    for (const auto& [xs, ys] : BroadcastCases()) {
      for (const char* op : {"add", "sub", "mul", "div"}) {
        SCOPED_TRACE(absl::StrCat(op, " ", xs.ToString(), " ", ys.ToString()));
        const In x = Random(dtype, xs, seed++, -100, 100);
        In y = Random(dtype, ys, seed++, -100, 100);
        for (double& v : y.values) v = v == 0 ? 3 : v;
        ExpectSame(op, {{x}, {y}}, {}, Tolerance{});
      }
    }
    for (const char* op : {"neg", "abs", "relu"}) {
      ExpectSame(op, {{Random(dtype, {5, 7}, seed++, -100, 100)}}, {}, Tolerance{});
    }
    // The extremes (exact as doubles for i32; i64's lowest is -2^63, exact too).
    const double lo = dtype == DataType::kI32 ? -2147483648.0 : -0x1p63;
    const In a{dtype, {5}, {lo, lo, lo, -7, 7}};
    const In b{dtype, {5}, {-1, 1, 2, 2, -2}};
    EXPECT_EQ(RunOn(kCuda, "div", {{a}, {b}}, {}, {})[0],
              std::vector<double>({lo, lo, lo / 2, -3, -3}));
    EXPECT_EQ(RunOn(kCuda, "neg", {{a}}, {}, {})[0], std::vector<double>({lo, lo, lo, 7, -7}));
    EXPECT_EQ(RunOn(kCuda, "abs", {{a}}, {}, {})[0], std::vector<double>({lo, lo, lo, 7, 7}));
    ExpectSame("sub", {{a}, {b}}, {}, Tolerance{});
    ExpectSame("div", {{a}, {b}}, {}, Tolerance{}, {{1, 0}});  // Out is Y
  }
}

TEST_F(CudaKernelsTest, IntegerDivisionByZeroFailsAtSync) {
  vm::BlobRef x = h_->ToCuda(h_->Upload(DataType::kI64, {2, 3}, {1, 2, 3, 4, 5, 6}));
  vm::BlobRef y = h_->ToCuda(h_->Upload(DataType::kI64, {3}, {1, 0, 2}));
  absl::StatusOr<SlotBlobs> out = h_->dispatcher->Call("div", {{x}, {y}}, {});
  ASSERT_TRUE(out.ok()) << "the divisor check happens at run time: " << out.status();
  const std::vector<double> q = h_->Download((*out)[0][0]);
  const absl::Status synced = h_->vm->Sync();
  EXPECT_EQ(synced.code(), absl::StatusCode::kInvalidArgument) << synced;
  EXPECT_THAT(synced.message(),
              HasSubstr("op 'div': integer division by zero: element 1 of input 1"));
  EXPECT_EQ(q, std::vector<double>({1, 0, 1, 4, 0, 3}));
  vm::BlobRef fine = h_->ToCuda(h_->Upload(DataType::kI64, {3}, {1, 2, 3}));
  ASSERT_TRUE(h_->dispatcher->Call("div", {{x}, {fine}}, {}).ok());
  EXPECT_TRUE(h_->vm->Sync().ok());
}

// ---- Shape and optimizer family ----

TEST_F(CudaKernelsTest, ReshapeAndTranspose) {
  for (DataType dtype : kAllDtypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    const In x = Random(dtype, {2, 3, 4}, 700);
    ExpectSame("reshape", {{x}}, vm::AttrMap().Set("shape", Ints{4, -1}), Tolerance{});
    ExpectSame("reshape_grad", {{Random(dtype, {4, 6}, 701)}, {x}}, {}, Tolerance{});
    const std::pair<Shape, Ints> transposes[] = {
        {{3, 5}, {1, 0}},
        {{2, 3, 4}, {0, 2, 1}},
        {{2, 3, 4}, {2, 0, 1}},
        {{2, 3, 4, 5}, {3, 1, 0, 2}},
        {{1, 6, 1, 7}, {3, 2, 1, 0}},
        {{4, 5}, {0, 1}},
        {{0, 3}, {1, 0}},
        {{33, 65}, {1, 0}},
        {{}, {}},
    };
    uint64_t seed = 710;
    for (const auto& [shape, perm] : transposes) {
      SCOPED_TRACE(shape.ToString());
      ExpectSame("transpose", {{Random(dtype, shape, seed++)}}, vm::AttrMap().Set("perm", perm),
                 Tolerance{});
    }
    // In place: a square matrix transposed into itself.
    ExpectSame("transpose", {{Random(dtype, {6, 6}, seed++)}},
               vm::AttrMap().Set("perm", Ints{1, 0}), Tolerance{}, {{0, 0}});
  }
}

TEST_F(CudaKernelsTest, ConcatSplitAndConcatGrad) {
  for (DataType dtype : kAllDtypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    uint64_t seed = 800;
    for (int64_t axis : {0, 1, -1}) {
      const In a = Random(dtype, {2, 3, 4}, seed++);
      const In b = Random(dtype,
                          axis == 0   ? Shape{1, 3, 4}
                          : axis == 1 ? Shape{2, 5, 4}
                                      : Shape{2, 3, 2},
                          seed++);
      const In empty = Random(dtype,
                              axis == 0   ? Shape{0, 3, 4}
                              : axis == 1 ? Shape{2, 0, 4}
                                          : Shape{2, 3, 0},
                              seed++);
      const vm::AttrMap attrs = vm::AttrMap().Set("axis", axis);
      ExpectSame("concat", {{a, b, empty, a}}, attrs, Tolerance{});
      const Shape whole = OutShape("concat", {{a, b, empty, a}}, attrs);
      ExpectSame("concat_grad", {{Random(dtype, whole, seed++)}, {a, b, empty, a}}, attrs,
                 Tolerance{});
    }
    const In x = Random(dtype, {4, 6}, seed++);
    ExpectSame("split", {{x}}, vm::AttrMap().Set("num", int64_t{3}).Set("axis", int64_t{1}),
               Tolerance{});
    ExpectSame("split", {{x}}, vm::AttrMap().Set("sections", Ints{1, -1, 0}), Tolerance{});
  }
}

TEST_F(CudaKernelsTest, SgdAndAdam) {
  for (DataType dtype : kFloatDtypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    const In param = Random(dtype, {257}, 900);
    const In grad = Random(dtype, {257}, 901);
    const In lr{dtype, {1}, {0.01}};
    ExpectSame("sgd", {{param}, {grad}, {lr}}, {}, Tolerance{});
    ExpectSame("sgd", {{param}, {grad}, {lr}}, {}, Tolerance{}, {{0, 0}});
    const In m1 = Random(dtype, {257}, 902);
    const In m2 = Random(dtype, {257}, 903, 0, 1);
    const In b1p{dtype, {1}, {0.9 * 0.9}};
    const In b2p{dtype, {1}, {0.999 * 0.999}};
    const Slots adam = {{param}, {grad}, {lr}, {m1}, {m2}, {b1p}, {b2p}};
    const vm::AttrMap attrs = vm::AttrMap().Set("beta1", 0.8).Set("epsilon", 1e-6);
    ExpectSame("adam", adam, attrs);
    // In place, as optimizers run: every output is its input.
    ExpectSame("adam", adam, attrs, std::nullopt, {{0, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}});
  }
}

// ---- Compare family ----

// Inputs that often tie: multiples of 0.5 in [-1.5, 1.5], integers in [-3, 3].
In FewValues(DataType dtype, const Shape& shape, uint64_t seed) {
  In in = Random(dtype, shape, seed, -0.34, 0.34);  // integers: round(10 v)
  if (dtype == DataType::kF32 || dtype == DataType::kF64) {
    for (double& v : in.values) v = std::round(v * 8) / 2;
  }
  return in;
}

TEST_F(CudaKernelsTest, ComparisonsAndLogicalOpsWithBroadcasting) {
  const char* const compare[] = {"less_than",     "less_equal", "greater_than",
                                 "greater_equal", "equal",      "not_equal"};
  uint64_t seed = 1000;
  for (const auto& [xs, ys] : BroadcastCases()) {
    SCOPED_TRACE(absl::StrCat(xs.ToString(), " ", ys.ToString()));
    for (DataType dtype : {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64}) {
      const In x = FewValues(dtype, xs, seed++);
      const In y = FewValues(dtype, ys, seed++);
      for (const char* op : compare) ExpectSame(op, {{x}, {y}}, {}, Tolerance{});
    }
    const In p = Random(DataType::kBool, xs, seed++);
    const In q = Random(DataType::kBool, ys, seed++);
    for (const char* op : {"logical_and", "logical_or", "logical_xor"}) {
      ExpectSame(op, {{p}, {q}}, {}, Tolerance{});
    }
    ExpectSame("logical_not", {{p}}, {}, Tolerance{});
  }
  // IEEE special values, every pair.
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {std::nan(""), inf, -inf, 0.0, -0.0, 1.0};
  In x{DataType::kF32, {6, 1}, specials};
  In y{DataType::kF32, {6}, specials};
  for (DataType dtype : kFloatDtypes) {
    x.dtype = y.dtype = dtype;
    for (const char* op : compare) ExpectSame(op, {{x}, {y}}, {}, Tolerance{});
  }
  // In place: Out is X (Y broadcast).
  const In p = Random(DataType::kBool, {5, 7}, seed++);
  const In q = Random(DataType::kBool, {7}, seed++);
  ExpectSame("logical_xor", {{p}, {q}}, {}, Tolerance{}, {{0, 0}});
  ExpectSame("logical_not", {{p}}, {}, Tolerance{}, {{0, 0}});
}

TEST_F(CudaKernelsTest, Increment) {
  for (DataType dtype : {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const bool floating = dtype == DataType::kF32 || dtype == DataType::kF64;
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{1000}, Shape{3, 4, 5}}) {
      const In x = Random(dtype, shape, 1100, -50, 50);
      ExpectSame("increment", {{x}}, {}, Tolerance{});
      ExpectSame("increment", {{x}}, vm::AttrMap().Set("value", floating ? -0.3 : -7.0),
                 Tolerance{});
      ExpectSame("increment", {{x}}, {}, Tolerance{}, {{0, 0}});
    }
  }
  // Integers wrap around as on the host.
  const double i32_max = std::numeric_limits<int32_t>::max();
  ExpectSame("increment", {{In{DataType::kI32, {2}, {i32_max, -i32_max - 1}}}},
             vm::AttrMap().Set("value", 2.0), Tolerance{});
}

}  // namespace
}  // namespace sluice::ops::cuda_kernels_test
