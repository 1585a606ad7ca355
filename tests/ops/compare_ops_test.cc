// The compare op family (ops/compare_ops.cc, ops/cpu/compare_kernels.cc) on cpu and sim: the
// comparisons for every dtype against the C++ operators applied in the test, with NumPy
// broadcasting, ties and the IEEE special values; the logical ops' truth tables, broadcasting,
// in-place use and bytes other than 0 and 1; increment for every dtype, its integer
// wrap-around and its gradient; and the errors returned before anything is enqueued.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::compare_ops_test {
namespace {

using testing::ExpectGradientsMatch;
using testing::GradInput;
using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;
using testing::RandomValues;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr DataType kNumericDtypes[] = {DataType::kF32, DataType::kF64, DataType::kI32,
                                       DataType::kI64};

struct CompareOp {
  const char* name;
  bool (*fn)(double, double);
};
const CompareOp kCompareOps[] = {
    {"less_than", [](double x, double y) { return x < y; }},
    {"less_equal", [](double x, double y) { return x <= y; }},
    {"greater_than", [](double x, double y) { return x > y; }},
    {"greater_equal", [](double x, double y) { return x >= y; }},
    {"equal", [](double x, double y) { return x == y; }},
    {"not_equal", [](double x, double y) { return x != y; }},
};

struct LogicalOp {
  const char* name;
  bool (*fn)(bool, bool);
};
const LogicalOp kLogicalOps[] = {
    {"logical_and", [](bool x, bool y) { return x && y; }},
    {"logical_or", [](bool x, bool y) { return x || y; }},
    {"logical_xor", [](bool x, bool y) { return x != y; }},
};

struct ShapePair {
  Shape x, y;
};
const std::vector<ShapePair>& BroadcastCases() {
  static const auto* const cases = new std::vector<ShapePair>{
      {Shape({2, 3}), Shape({2, 3})},         // same shape
      {Shape(), Shape({2, 3})},               // scalar with tensor
      {Shape({2, 3}), Shape()},               // tensor with scalar
      {Shape({3, 1}), Shape({1, 4})},         // outer product
      {Shape({2, 3, 4}), Shape({4})},         // row broadcast
      {Shape({4}), Shape({2, 3, 4})},         // the same, X broadcast
      {Shape({2, 1, 4}), Shape({3, 1})},      // both broadcast, ranks differ
      {Shape({0, 3}), Shape({1, 3})},         // size-0 dimension
      {Shape({67}), Shape({67})},             // a longer row
      {Shape({3, 1, 17}), Shape({3, 5, 1})},  //
      {Shape({1}), Shape()},                  // one element
  };
  return *cases;
}

// The shape NumPy broadcasting gives, computed here rather than by core/shape.
Shape RefBroadcast(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    const int64_t da = i - (rank - a.rank()) >= 0 ? a.dim(i - (rank - a.rank())) : 1;
    const int64_t db = i - (rank - b.rank()) >= 0 ? b.dim(i - (rank - b.rank())) : 1;
    dims[i] = da == 1 ? db : da;
  }
  return Shape(dims);
}

// The element of input shape `in` that element `linear` of the broadcast `out` reads.
int64_t RefIndex(const Shape& in, const Shape& out, int64_t linear) {
  std::vector<int64_t> coords(out.rank());
  for (int d = out.rank() - 1; d >= 0; --d) {
    coords[d] = linear % out.dim(d);
    linear /= out.dim(d);
  }
  int64_t index = 0;
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t c = coords[d + out.rank() - in.rank()];
    index = index * in.dim(d) + (in.dim(d) == 1 ? 0 : c);
  }
  return index;
}

// f(x, y) over the broadcast, as 0/1.
template <typename Fn>
std::vector<double> RefBinary(const ShapePair& s, const std::vector<double>& x,
                              const std::vector<double>& y, Fn fn) {
  const Shape out = RefBroadcast(s.x, s.y);
  std::vector<double> want(out.NumElements());
  for (int64_t i = 0; i < out.NumElements(); ++i) {
    want[i] = fn(x[RefIndex(s.x, out, i)], y[RefIndex(s.y, out, i)]) ? 1.0 : 0.0;
  }
  return want;
}

// Multiples of 0.5 in [-2, 2] (integers in [-4, 4] for integer dtypes): exact in every dtype,
// and few enough that X and Y often tie.
std::vector<double> SmallValues(int64_t n, uint64_t seed, DataType dtype) {
  std::vector<double> values = RandomValues(n, seed, -4.49, 4.49);
  for (double& v : values) v = std::round(v);
  if (dtype == DataType::kF32 || dtype == DataType::kF64) {
    for (double& v : values) v /= 2;
  }
  return values;
}

std::vector<double> RandomBools(int64_t n, uint64_t seed) {
  std::vector<double> values = RandomValues(n, seed);
  for (double& v : values) v = v > 0 ? 1.0 : 0.0;
  return values;
}

std::string Describe(absl::string_view op, DataType dtype, const ShapePair& s) {
  return absl::StrCat(op, " ", DataTypeName(dtype), " ", s.x.ToString(), " with ", s.y.ToString());
}

class CompareFamilyTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  vm::BlobRef Upload(DataType dtype, const Shape& shape, const std::vector<double>& values) {
    return h.Upload(device(), dtype, shape, values);
  }
  // Runs `op` and checks Out's dtype, shape and device; returns its values.
  std::vector<double> RunOne(absl::string_view op, const SlotBlobs& inputs,
                             const vm::AttrMap& attrs, DataType dtype, const Shape& shape) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, attrs, device());
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    const vm::BlobRef& result = (*out)[0][0];
    EXPECT_EQ(result->dtype(), dtype);
    EXPECT_EQ(result->shape(), shape);
    EXPECT_EQ(result->device(), device());
    return h.Download(result);
  }
  OpsHarness h;
};

class CompareOpsTest : public CompareFamilyTest {};
class LogicalOpsTest : public CompareFamilyTest {};
class IncrementOpTest : public CompareFamilyTest {};

TEST_P(CompareOpsTest, EveryDtypeMatchesReferenceWithBroadcasting) {
  uint64_t seed = 1;
  for (const CompareOp& op : kCompareOps) {
    for (DataType dtype : kNumericDtypes) {
      for (const ShapePair& s : BroadcastCases()) {
        SCOPED_TRACE(Describe(op.name, dtype, s));
        const std::vector<double> x = SmallValues(s.x.NumElements(), seed++, dtype);
        const std::vector<double> y = SmallValues(s.y.NumElements(), seed++, dtype);
        const std::vector<double> got =
            RunOne(op.name, {{Upload(dtype, s.x, x)}, {Upload(dtype, s.y, y)}}, {}, DataType::kBool,
                   RefBroadcast(s.x, s.y));
        EXPECT_EQ(got, RefBinary(s, x, y, op.fn));
      }
    }
  }
}

// Values that one dtype tells apart and a coarser one would not: the comparison is made in
// the inputs' own dtype.
TEST_P(CompareOpsTest, ComparesInTheInputDtype) {
  const Shape shape({3});
  // 1 + 2^-30 is 1 in f32 but not in f64; 2^40 + 1 is 2^40 in f32 but not in f64 or i64.
  const std::vector<double> x = {1.0 + 0x1p-30, 0x1p40 + 1, -7};
  const std::vector<double> y = {1.0, 0x1p40, -7};
  EXPECT_EQ(
      RunOne("equal", {{Upload(DataType::kF32, shape, x)}, {Upload(DataType::kF32, shape, y)}}, {},
             DataType::kBool, shape),
      std::vector<double>({1, 1, 1}));
  EXPECT_EQ(
      RunOne("equal", {{Upload(DataType::kF64, shape, x)}, {Upload(DataType::kF64, shape, y)}}, {},
             DataType::kBool, shape),
      std::vector<double>({0, 0, 1}));
  EXPECT_EQ(RunOne("greater_than",
                   {{Upload(DataType::kI64, shape, x)}, {Upload(DataType::kI64, shape, y)}}, {},
                   DataType::kBool, shape),
            std::vector<double>({0, 1, 0}));
}

// IEEE: every comparison with a NaN is false except not_equal, which is true; -0 equals 0;
// the infinities order as numbers.
TEST_P(CompareOpsTest, NanAndSpecialValues) {
  const std::vector<double> specials = {kNan, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 1e-300};
  std::vector<double> x, y;
  for (double a : specials) {
    for (double b : specials) {
      x.push_back(a);
      y.push_back(b);
    }
  }
  const Shape shape({static_cast<int64_t>(x.size())});
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    for (const CompareOp& op : kCompareOps) {
      SCOPED_TRACE(absl::StrCat(op.name, " ", DataTypeName(dtype)));
      const std::vector<double> got =
          RunOne(op.name, {{Upload(dtype, shape, x)}, {Upload(dtype, shape, y)}}, {},
                 DataType::kBool, shape);
      ASSERT_EQ(got.size(), x.size());
      const bool not_equal = std::string(op.name) == "not_equal";
      for (size_t i = 0; i < x.size(); ++i) {
        // As stored: 1e-300 is 0 in f32.
        const double a = dtype == DataType::kF32 ? static_cast<float>(x[i]) : x[i];
        const double b = dtype == DataType::kF32 ? static_cast<float>(y[i]) : y[i];
        const double want = op.fn(a, b) ? 1.0 : 0.0;
        if (std::isnan(a) || std::isnan(b)) {
          EXPECT_EQ(got[i], not_equal ? 1.0 : 0.0) << x[i] << " vs " << y[i];
        }
        if (a == 0 && b == 0) {  // -0 and 0 among them
          EXPECT_EQ(got[i], op.fn(0.0, 0.0) ? 1.0 : 0.0) << x[i] << " vs " << y[i];
        }
        EXPECT_EQ(got[i], want) << x[i] << " vs " << y[i];
      }
    }
  }
}

TEST_P(LogicalOpsTest, TruthTables) {
  const Shape shape({4});
  const std::vector<double> x = {0, 0, 1, 1};
  const std::vector<double> y = {0, 1, 0, 1};
  const std::pair<const char*, std::vector<double>> tables[] = {
      {"logical_and", {0, 0, 0, 1}}, {"logical_or", {0, 1, 1, 1}}, {"logical_xor", {0, 1, 1, 0}}};
  for (const auto& [op, want] : tables) {
    EXPECT_EQ(RunOne(op, {{Upload(DataType::kBool, shape, x)}, {Upload(DataType::kBool, shape, y)}},
                     {}, DataType::kBool, shape),
              want)
        << op;
  }
  EXPECT_EQ(
      RunOne("logical_not", {{Upload(DataType::kBool, shape, x)}}, {}, DataType::kBool, shape),
      std::vector<double>({1, 1, 0, 0}));
}

TEST_P(LogicalOpsTest, BroadcastingMatchesReference) {
  uint64_t seed = 100;
  for (const LogicalOp& op : kLogicalOps) {
    for (const ShapePair& s : BroadcastCases()) {
      SCOPED_TRACE(Describe(op.name, DataType::kBool, s));
      const std::vector<double> x = RandomBools(s.x.NumElements(), seed++);
      const std::vector<double> y = RandomBools(s.y.NumElements(), seed++);
      const std::vector<double> got =
          RunOne(op.name, {{Upload(DataType::kBool, s.x, x)}, {Upload(DataType::kBool, s.y, y)}},
                 {}, DataType::kBool, RefBroadcast(s.x, s.y));
      EXPECT_EQ(got, RefBinary(s, x, y, [&](double a, double b) { return op.fn(a != 0, b != 0); }));
    }
  }
  for (const Shape& shape : {Shape(), Shape({0}), Shape({2, 0, 3}), Shape({5, 13})}) {
    const std::vector<double> x = RandomBools(shape.NumElements(), seed++);
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] == 0 ? 1 : 0;
    EXPECT_EQ(
        RunOne("logical_not", {{Upload(DataType::kBool, shape, x)}}, {}, DataType::kBool, shape),
        want)
        << shape.ToString();
  }
}

TEST_P(LogicalOpsTest, InPlace) {
  for (const LogicalOp& op : kLogicalOps) {
    SCOPED_TRACE(op.name);
    // Out is X with Y broadcast, then Out is Y with X broadcast.
    for (const ShapePair& s :
         {ShapePair{Shape({3, 33}), Shape({33})}, ShapePair{Shape({33}), Shape({3, 33})},
          ShapePair{Shape({40}), Shape({40})}}) {
      const std::vector<double> x = RandomBools(s.x.NumElements(), 200);
      const std::vector<double> y = RandomBools(s.y.NumElements(), 201);
      vm::BlobRef bx = Upload(DataType::kBool, s.x, x);
      vm::BlobRef by = Upload(DataType::kBool, s.y, y);
      vm::BlobRef target = s.x.NumElements() >= s.y.NumElements() ? bx : by;
      DispatchOptions options;
      options.default_device = device();
      ASSERT_TRUE(h.dispatcher->CallInto(op.name, {{bx}, {by}}, {{target}}, {}, options).ok());
      EXPECT_EQ(h.Download(target),
                RefBinary(s, x, y, [&](double a, double b) { return op.fn(a != 0, b != 0); }))
          << Describe(op.name, DataType::kBool, s);
    }
  }
  const std::vector<double> x = RandomBools(50, 202);
  vm::BlobRef bx = Upload(DataType::kBool, Shape({50}), x);
  DispatchOptions options;
  options.default_device = device();
  ASSERT_TRUE(h.dispatcher->CallInto("logical_not", {{bx}}, {{bx}}, {}, options).ok());
  std::vector<double> want(50);
  for (int i = 0; i < 50; ++i) want[i] = x[i] == 0 ? 1 : 0;
  EXPECT_EQ(h.Download(bx), want);
}

// A bool tensor whose bytes are not 0 or 1 (written raw): every nonzero byte is true, and the
// results are 0 or 1.
TEST_P(LogicalOpsTest, NonzeroBytesAreTrue) {
  const Shape shape({4});
  vm::Stream* stream = h.vm->GetStream(StreamKey{device()}).value();
  vm::BlobRef x = h.vm->NewBlob(stream, DataType::kBool, shape).value();
  ASSERT_TRUE(h.builder->WriteBlob(x, std::vector<uint8_t>{0, 2, 128, 255}).ok());
  vm::BlobRef ones = Upload(DataType::kBool, shape, {1, 1, 1, 1});
  vm::BlobRef twos = h.vm->NewBlob(stream, DataType::kBool, shape).value();
  ASSERT_TRUE(h.builder->WriteBlob(twos, std::vector<uint8_t>{2, 2, 2, 2}).ok());
  auto bytes = [&](const char* op, const SlotBlobs& inputs) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, {}, device());
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? h.builder->ReadBlob((*out)[0][0]).value() : std::vector<uint8_t>{};
  };
  EXPECT_EQ(bytes("logical_and", {{x}, {ones}}), std::vector<uint8_t>({0, 1, 1, 1}));
  EXPECT_EQ(bytes("logical_or", {{x}, {ones}}), std::vector<uint8_t>({1, 1, 1, 1}));
  EXPECT_EQ(bytes("logical_xor", {{x}, {twos}}), std::vector<uint8_t>({1, 0, 0, 0}));
  EXPECT_EQ(bytes("logical_not", {{x}}), std::vector<uint8_t>({1, 0, 0, 0}));
}

TEST_P(IncrementOpTest, EveryDtypeAndShape) {
  uint64_t seed = 300;
  for (DataType dtype : kNumericDtypes) {
    const bool floating = dtype == DataType::kF32 || dtype == DataType::kF64;
    for (const double value : {1.0, -3.0, 0.0, floating ? 2.5 : 7.0}) {
      for (const Shape& shape : {Shape(), Shape({0}), Shape({67}), Shape({2, 3, 5})}) {
        SCOPED_TRACE(absl::StrCat(DataTypeName(dtype), shape.ToString(), " + ", value));
        std::vector<double> x = RandomValues(shape.NumElements(), seed++, -100, 100);
        for (double& v : x)
          v = floating ? std::ldexp(std::round(std::ldexp(v, 8)), -8) : std::round(v);
        const vm::AttrMap attrs = value == 1.0 ? vm::AttrMap() : vm::AttrMap().Set("value", value);
        std::vector<double> want(x.size());
        for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] + value;  // exact in every dtype
        EXPECT_EQ(RunOne("increment", {{Upload(dtype, shape, x)}}, attrs, dtype, shape), want);
      }
    }
  }
}

TEST_P(IncrementOpTest, InPlaceAndRounding) {
  // In place: a loop counter stepping itself.
  for (DataType dtype : kNumericDtypes) {
    vm::BlobRef counter = Upload(dtype, Shape(), {0});
    DispatchOptions options;
    options.default_device = device();
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(h.dispatcher
                      ->CallInto("increment", {{counter}}, {{counter}},
                                 vm::AttrMap().Set("value", 2.0), options)
                      .ok());
    }
    EXPECT_EQ(h.Download(counter), std::vector<double>({10})) << DataTypeName(dtype);
  }
  // f32 adds the value rounded to f32, in f32.
  const std::vector<double> got =
      RunOne("increment", {{Upload(DataType::kF32, Shape({2}), {1.0, 0x1p24})}},
             vm::AttrMap().Set("value", 0.1), DataType::kF32, Shape({2}));
  EXPECT_EQ(got, std::vector<double>({static_cast<float>(1.0f + 0.1f), 0x1p24}));
  // f64 keeps what f32 loses.
  EXPECT_EQ(RunOne("increment", {{Upload(DataType::kF64, Shape({1}), {0x1p24})}},
                   vm::AttrMap().Set("value", 1.0), DataType::kF64, Shape({1})),
            std::vector<double>({0x1p24 + 1}));
}

// Integer sums wrap around (two's complement), in both directions.
TEST_P(IncrementOpTest, IntegerOverflowWrapsAround) {
  const double i32_max = std::numeric_limits<int32_t>::max();
  const double i32_min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(RunOne("increment", {{Upload(DataType::kI32, Shape({2}), {i32_max, i32_min})}},
                   vm::AttrMap(), DataType::kI32, Shape({2})),
            std::vector<double>({i32_min, i32_min + 1}));
  EXPECT_EQ(RunOne("increment", {{Upload(DataType::kI32, Shape({2}), {i32_min, 5})}},
                   vm::AttrMap().Set("value", -1.0), DataType::kI32, Shape({2})),
            std::vector<double>({i32_max, 4}));
  // i64 through doubles: values that doubles hold exactly.
  EXPECT_EQ(RunOne("increment", {{Upload(DataType::kI64, Shape({2}), {-0x1p63, 0x1p53})}},
                   vm::AttrMap().Set("value", 0x1p62), DataType::kI64, Shape({2})),
            std::vector<double>({-0x1p62, 0x1p53 + 0x1p62}));
  EXPECT_EQ(RunOne("increment", {{Upload(DataType::kI64, Shape({1}), {0x1p62})}},
                   vm::AttrMap().Set("value", 0x1p62), DataType::kI64, Shape({1})),
            std::vector<double>({-0x1p63}));
}

TEST_P(IncrementOpTest, GradientPassesThrough) {
  for (const double value : {1.0, -2.5}) {
    ExpectGradientsMatch(h, "increment", {{GradInput{Shape({2, 3}), RandomValues(6, 400)}}},
                         vm::AttrMap().Set("value", value), device());
  }
  ExpectGradientsMatch(h, "increment", {{GradInput{Shape(), {3.0}}}}, {}, device());
}

const auto kDeviceName = [](const auto& info) {
  return std::string(DeviceTypeName(info.param.type()));
};
INSTANTIATE_TEST_SUITE_P(Devices, CompareOpsTest, ::testing::Values(kCpu, kSim0), kDeviceName);
INSTANTIATE_TEST_SUITE_P(Devices, LogicalOpsTest, ::testing::Values(kCpu, kSim0), kDeviceName);
INSTANTIATE_TEST_SUITE_P(Devices, IncrementOpTest, ::testing::Values(kCpu, kSim0), kDeviceName);

TEST(CompareOpsSchemaTest, FlagsGradsAndKernels) {
  OpsHarness h;
  for (const char* op : {"less_than", "less_equal", "greater_than", "greater_equal", "equal",
                         "not_equal", "logical_and", "logical_or", "logical_xor", "logical_not"}) {
    const OpSchema* schema = h.registry.FindSchema(op).value();
    EXPECT_TRUE(schema->has_flag(kOpElementwise)) << op;
    EXPECT_FALSE(schema->has_grad()) << op << ": its output is bool, it has no gradient";
  }
  for (const char* op : {"less_than", "equal", "increment"}) {
    for (DataType dtype : kNumericDtypes) {
      EXPECT_TRUE(h.registry.HasKernel(op, DeviceType::kCpu, dtype)) << op;
      EXPECT_TRUE(h.registry.HasKernel(op, DeviceType::kSim, dtype)) << op;
    }
    EXPECT_FALSE(h.registry.HasKernel(op, DeviceType::kCpu, DataType::kBool)) << op;
  }
  for (const char* op : {"logical_and", "logical_not"}) {
    EXPECT_TRUE(h.registry.HasKernel(op, DeviceType::kCpu, DataType::kBool)) << op;
    EXPECT_FALSE(h.registry.HasKernel(op, DeviceType::kCpu, DataType::kF32)) << op;
  }
  // increment: Out@GRAD goes to X unchanged, through assign.
  const OpSchema* increment = h.registry.FindSchema("increment").value();
  ASSERT_TRUE(increment->has_grad());
  EXPECT_TRUE(increment->has_flag(kOpElementwise));
  const vm::AttrMap attrs = increment->NormalizeAttrs({}).value();
  EXPECT_EQ(attrs.GetFloat("value").value(), 1.0);
  const GradContext ctx({{"X", {"i"}}}, {{"Out", {"i_next"}}}, &attrs);
  const std::vector<GradOpDesc> grads = increment->grad_maker()(ctx);
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0].type, "assign");
  ASSERT_EQ(grads[0].inputs.size(), 1u);
  EXPECT_EQ(grads[0].inputs[0].second, std::vector<std::string>({"i_next@GRAD"}));
  ASSERT_EQ(grads[0].outputs.size(), 1u);
  EXPECT_EQ(grads[0].outputs[0].second, std::vector<std::string>({"i@GRAD"}));
}

struct ErrorCase {
  const char* op;
  SlotBlobs inputs;
  vm::AttrMap attrs;
  std::vector<const char*> messages;
};

// Each case fails with InvalidArgument naming the op, before anything is enqueued.
void ExpectRejected(OpsHarness& h, const std::vector<ErrorCase>& cases) {
  const int64_t instructions = h.vm->stats().instructions;
  for (const ErrorCase& c : cases) {
    absl::StatusOr<SlotBlobs> out = h.Run(c.op, c.inputs, c.attrs);
    ASSERT_FALSE(out.ok()) << c.op << " " << c.messages[0];
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    for (const char* message : c.messages) {
      EXPECT_THAT(out.status().message(), HasSubstr(message)) << c.op;
    }
  }
  EXPECT_EQ(h.vm->stats().instructions, instructions) << "a rejected call enqueued work";
}

TEST(CompareOpsErrorTest, BadInputsAreRejectedBeforeEnqueue) {
  OpsHarness h;
  vm::BlobRef a = h.Upload(kCpu, DataType::kF32, Shape({2, 3}), RandomValues(6, 1));
  vm::BlobRef b = h.Upload(kCpu, DataType::kF32, Shape({4}), RandomValues(4, 2));
  vm::BlobRef d = h.Upload(kCpu, DataType::kF64, Shape({2, 3}), RandomValues(6, 3));
  vm::BlobRef i = h.Upload(kCpu, DataType::kI32, Shape({2, 3}), {1, 2, 3, 4, 5, 6});
  vm::BlobRef l = h.Upload(kCpu, DataType::kI64, Shape({2}), {1, 2});
  vm::BlobRef p = h.Upload(kCpu, DataType::kBool, Shape({2, 3}), {1, 0, 1, 0, 1, 0});
  vm::BlobRef q = h.Upload(kCpu, DataType::kBool, Shape({4}), {1, 0, 1, 0});
  vm::BlobRef s = h.Upload(kSim0, DataType::kF32, Shape({2, 3}), RandomValues(6, 4));
  ExpectRejected(
      h,
      {
          {"less_than", {{a}, {d}}, {}, {"op 'less_than'", "X is f32[2, 3] but Y is f64[2, 3]"}},
          {"equal", {{i}, {a}}, {}, {"op 'equal'", "X is i32[2, 3] but Y is f32[2, 3]"}},
          {"not_equal", {{l}, {i}}, {}, {"op 'not_equal'", "X is i64[2] but Y is i32[2, 3]"}},
          {"greater_than",
           {{a}, {b}},
           {},
           {"op 'greater_than'", "[2, 3]", "[4]", "cannot broadcast"}},
          {"less_equal",
           {{p}, {p}},
           {},
           {"op 'less_equal'", "input X is bool[2, 3]", "f32, f64, i32 or i64"}},
          {"greater_equal", {{a}, {p}}, {}, {"op 'greater_equal'", "input Y is bool[2, 3]"}},
          {"equal", {{a}, {s}}, {}, {"op 'equal'", "is on sim:0 but"}},
          {"logical_and",
           {{a}, {a}},
           {},
           {"op 'logical_and'", "input X is f32[2, 3]; it must be bool"}},
          {"logical_or",
           {{p}, {i}},
           {},
           {"op 'logical_or'", "input Y is i32[2, 3]; it must be bool"}},
          {"logical_xor",
           {{p}, {q}},
           {},
           {"op 'logical_xor'", "[2, 3]", "[4]", "cannot broadcast"}},
          {"logical_not", {{i}}, {}, {"op 'logical_not'", "input X is i32[2, 3]; it must be bool"}},
          {"logical_not", {{p}, {p}}, {}, {"has 1 input slot(s), got 2"}},
      });
}

TEST(IncrementOpSchemaTest, BadInputsAndValuesAreRejectedBeforeEnqueue) {
  OpsHarness h;
  vm::BlobRef i = h.Upload(kCpu, DataType::kI32, Shape({2, 3}), {1, 2, 3, 4, 5, 6});
  vm::BlobRef l = h.Upload(kCpu, DataType::kI64, Shape({2}), {1, 2});
  vm::BlobRef p = h.Upload(kCpu, DataType::kBool, Shape({2, 3}), {1, 0, 1, 0, 1, 0});
  auto value = [](vm::AttrValue v) { return vm::AttrMap().Set("value", std::move(v)); };
  ExpectRejected(
      h, {
             {"increment",
              {{p}},
              {},
              {"op 'increment'", "input X is bool[2, 3]", "f32, f64, i32 or i64"}},
             {"increment",
              {{i}},
              value(1.5),
              {"op 'increment'", "attribute 'value' is 1.5", "i32 input it must be an integer"}},
             {"increment",
              {{i}},
              value(3e9),
              {"op 'increment'", "attribute 'value'", "in the range of i32"}},
             {"increment",
              {{l}},
              value(0x1p63),
              {"op 'increment'", "attribute 'value'", "in the range of i64"}},
             {"increment", {{l}}, value(kNan), {"op 'increment'", "attribute 'value' is nan"}},
             {"increment",
              {{l}},
              value(std::string("one")),
              {"op 'increment'", "attribute 'value' must be float"}},
             {"increment", {{i}, {i}}, {}, {"has 1 input slot(s), got 2"}},
         });
}

TEST(CompareOpsErrorTest, CallIntoChecksTheBoolOutput) {
  OpsHarness h;
  vm::BlobRef a = h.Upload(kCpu, DataType::kF32, Shape({2, 3}), RandomValues(6, 1));
  vm::BlobRef f = h.Upload(kCpu, DataType::kF32, Shape({2, 3}), RandomValues(6, 2));
  vm::BlobRef p = h.Upload(kCpu, DataType::kBool, Shape({3}), {0, 0, 0});
  const int64_t uploads = h.vm->stats().instructions;
  EXPECT_THAT(h.dispatcher->CallInto("less_than", {{a}, {a}}, {{f}}, {}).message(),
              HasSubstr("the op produces bool[2, 3]"));
  EXPECT_THAT(h.dispatcher->CallInto("equal", {{a}, {a}}, {{p}}, {}).message(),
              HasSubstr("the op produces bool[2, 3]"));
  EXPECT_EQ(h.vm->stats().instructions, uploads) << "a rejected call enqueued work";
}

// The edges of the values an integer increment accepts; any value for a float one.
TEST(IncrementOpSchemaTest, AcceptsIntegersInRangeAndAnyFloat) {
  OpsHarness h;
  vm::BlobRef i = h.Upload(kCpu, DataType::kI32, Shape({2}), {1, 2});
  vm::BlobRef l = h.Upload(kCpu, DataType::kI64, Shape({2}), {1, 2});
  vm::BlobRef a = h.Upload(kCpu, DataType::kF32, Shape({2}), {1, 2});
  vm::BlobRef d = h.Upload(kCpu, DataType::kF64, Shape({2}), {1, 2});
  EXPECT_TRUE(h.Run("increment", {{i}}, vm::AttrMap().Set("value", -2147483648.0)).ok());
  EXPECT_TRUE(h.Run("increment", {{i}}, vm::AttrMap().Set("value", 2147483647.0)).ok());
  EXPECT_FALSE(h.Run("increment", {{i}}, vm::AttrMap().Set("value", 2147483648.0)).ok());
  EXPECT_TRUE(h.Run("increment", {{l}}, vm::AttrMap().Set("value", -0x1p63)).ok());
  EXPECT_TRUE(h.Run("increment", {{l}}, vm::AttrMap().Set("value", int64_t{2})).ok());
  EXPECT_FALSE(h.Run("increment", {{l}}, vm::AttrMap().Set("value", -kInf)).ok());
  EXPECT_TRUE(h.Run("increment", {{a}}, vm::AttrMap().Set("value", 1.5)).ok());
  EXPECT_TRUE(h.Run("increment", {{d}}, vm::AttrMap().Set("value", kInf)).ok());
  EXPECT_TRUE(h.Run("increment", {{d}}, vm::AttrMap().Set("value", kNan)).ok());
}

}  // namespace
}  // namespace sluice::ops::compare_ops_test
