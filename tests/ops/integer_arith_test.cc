// Integer add, sub, mul, div, neg, abs and relu (ops/elementwise_ops.cc, ops/cpu/
// integer_arith_kernels.cc) on cpu and sim, i32 and i64: values against a reference computed
// here in 128-bit arithmetic reduced modulo 2^bits (fixed-seed random values, the dtype's
// extremes, broadcasting both ways and against a scalar, in-place use), division truncated
// toward zero with lowest / -1 wrapping, a zero divisor failing the run and naming the
// element; bool refused naming the op; and the float kernels unchanged (bit for bit the C++
// expression).
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::integer_arith_test {
namespace {

using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;

// The value of `wide` modulo 2^bits of T, as T (two's complement).
template <typename T>
T Wrapped(__int128 wide) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<unsigned __int128>(wide)));
}

template <typename T>
T RefBinary(const std::string& op, T x, T y) {
  const __int128 a = x, b = y;
  if (op == "add") return Wrapped<T>(a + b);
  if (op == "sub") return Wrapped<T>(a - b);
  if (op == "mul") return Wrapped<T>(a * b);
  return Wrapped<T>(a / b);  // truncates toward zero; lowest / -1 = 2^(bits-1) wraps
}

template <typename T>
T RefUnary(const std::string& op, T x) {
  const __int128 a = x;
  if (op == "neg") return Wrapped<T>(-a);
  if (op == "abs") return Wrapped<T>(a < 0 ? -a : a);
  return x < 0 ? T{0} : x;  // relu
}

// Row-major multi-index of flat index i in `shape`, and the flat index of that position in
// `in` broadcast to `shape` (dims aligned from the right, size-1 dims repeated).
int64_t BroadcastIndex(int64_t i, const Shape& shape, const Shape& in) {
  int64_t index = 0, stride = 1;
  for (int k = 0; k < shape.rank(); ++k) {
    const int d = shape.rank() - 1 - k;
    const int64_t coord = i % shape.dim(d);
    i /= shape.dim(d);
    if (k < in.rank()) {
      const int64_t size = in.dim(in.rank() - 1 - k);
      index += (size == 1 ? 0 : coord) * stride;
      stride *= size;
    }
  }
  return index;
}

class IntegerArithTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }

  // A tensor on the device holding `values` exactly (no trip through double).
  template <typename T>
  vm::BlobRef Upload(const Shape& shape, const std::vector<T>& values) {
    vm::Stream* stream = h.vm->GetStream(StreamKey{device()}).value();
    vm::BlobRef blob = h.vm->NewBlob(stream, DataTypeOf<T>(), shape).value();
    std::vector<uint8_t> bytes(blob->bytes());
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    const absl::Status written = h.builder->WriteBlob(blob, bytes);
    EXPECT_TRUE(written.ok()) << written;
    return blob;
  }
  template <typename T>
  std::vector<T> Read(const vm::BlobRef& blob) {
    EXPECT_EQ(blob->dtype(), DataTypeOf<T>());
    absl::StatusOr<std::vector<uint8_t>> bytes = h.builder->ReadBlob(blob);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    std::vector<T> values(bytes.ok() ? bytes->size() / sizeof(T) : 0);
    if (!values.empty()) std::memcpy(values.data(), bytes->data(), values.size() * sizeof(T));
    return values;
  }
  vm::BlobRef RunOne(absl::string_view op, const SlotBlobs& inputs) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, {}, device());
    EXPECT_TRUE(out.ok()) << op << ": " << out.status();
    return out.ok() ? (*out)[0][0] : vm::BlobRef();
  }

  // Fixed-seed values over the whole range of T, with the extremes, 0, 1 and -1 mixed in;
  // `nonzero` replaces zeros by 1 (divisors).
  template <typename T>
  static std::vector<T> Values(int64_t n, uint64_t seed, bool nonzero = false) {
    std::mt19937_64 rng(seed);
    const T specials[] = {
        std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), 0, 1, -1, 7, -7, 2, -2};
    std::vector<T> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t r = rng();
      if (r % 3 == 0) {
        v[i] = specials[(r >> 8) % std::size(specials)];
      } else if (r % 3 == 1) {
        v[i] = static_cast<T>(static_cast<int64_t>(r >> 40) % 1000 - 500);  // small
      } else {
        v[i] = static_cast<T>(r);  // anywhere in the range
      }
      if (nonzero && v[i] == 0) v[i] = 1;
    }
    return v;
  }

  template <typename T>
  void CheckBinary(const std::string& op, const Shape& xs, const Shape& ys, uint64_t seed) {
    const std::string what =
        absl::StrCat(op, " ", DataTypeName(DataTypeOf<T>()), xs.ToString(), " ", ys.ToString());
    const std::vector<T> x = Values<T>(xs.NumElements(), seed);
    const std::vector<T> y = Values<T>(ys.NumElements(), seed + 1, /*nonzero=*/op == "div");
    const vm::BlobRef out = RunOne(op, {{Upload(xs, x)}, {Upload(ys, y)}});
    ASSERT_NE(out, nullptr) << what;
    const Shape shape = BroadcastShapes(xs, ys).value();
    ASSERT_EQ(out->shape(), shape) << what;
    const std::vector<T> got = Read<T>(out);
    ASSERT_EQ(static_cast<int64_t>(got.size()), shape.NumElements()) << what;
    for (int64_t i = 0; i < shape.NumElements(); ++i) {
      const T a = x[BroadcastIndex(i, shape, xs)], b = y[BroadcastIndex(i, shape, ys)];
      ASSERT_EQ(got[i], RefBinary<T>(op, a, b))
          << what << " element " << i << ": " << a << ", " << b;
    }
  }

  template <typename T>
  void CheckUnary(const std::string& op, uint64_t seed) {
    const std::vector<T> x = Values<T>(257, seed);
    const vm::BlobRef out = RunOne(op, {{Upload(Shape({257}), x)}});
    ASSERT_NE(out, nullptr) << op;
    const std::vector<T> got = Read<T>(out);
    ASSERT_EQ(got.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(got[i], RefUnary<T>(op, x[i]))
          << op << " " << DataTypeName(DataTypeOf<T>()) << " of " << x[i];
    }
  }

  OpsHarness h;
};

TEST_P(IntegerArithTest, BinaryOpsWrapAndBroadcast) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{64}, {64}},    {{3, 5}, {5}},       {{4, 1}, {1, 6}}, {{2, 3, 4}, {}},
      {{}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}}, {{0, 3}, {3}},
  };
  uint64_t seed = 1;
  for (const char* op : {"add", "sub", "mul", "div"}) {
    for (const auto& [xs, ys] : shapes) {
      CheckBinary<int32_t>(op, xs, ys, seed += 2);
      CheckBinary<int64_t>(op, xs, ys, seed += 2);
    }
  }
}

TEST_P(IntegerArithTest, UnaryOpsWrap) {
  uint64_t seed = 100;
  for (const char* op : {"neg", "abs", "relu"}) {
    CheckUnary<int32_t>(op, ++seed);
    CheckUnary<int64_t>(op, ++seed);
  }
}

TEST_P(IntegerArithTest, DivisionTruncatesTowardZero) {
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  const std::vector<int32_t> x = {7, -7, 7, -7, 1, -1, 0, kMin, kMin, 6};
  const std::vector<int32_t> y = {2, 2, -2, -2, 3, 3, -5, -1, 1, -3};
  const vm::BlobRef out = RunOne("div", {{Upload(Shape({10}), x)}, {Upload(Shape({10}), y)}});
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(Read<int32_t>(out), std::vector<int32_t>({3, -3, -3, 3, 0, 0, 0, kMin, kMin, -2}));
  // i64 the same way, past 2^53.
  constexpr int64_t kBig = (int64_t{1} << 62) + 3;
  const vm::BlobRef big = RunOne(
      "div",
      {{Upload(Shape({3}), std::vector<int64_t>{kBig, -kBig, std::numeric_limits<int64_t>::min()})},
       {Upload(Shape({3}), std::vector<int64_t>{2, 2, -1})}});
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(Read<int64_t>(big),
            std::vector<int64_t>({kBig / 2, -(kBig / 2), std::numeric_limits<int64_t>::min()}));
}

TEST_P(IntegerArithTest, ZeroDivisorFailsTheRunNamingTheElement) {
  const vm::BlobRef x = Upload(Shape({2, 3}), std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  const vm::BlobRef y = Upload(Shape({3}), std::vector<int64_t>{1, 0, 2});
  absl::StatusOr<SlotBlobs> out = h.Run("div", {{x}, {y}}, {}, device());
  ASSERT_TRUE(out.ok()) << "the divisor check is the kernel's, at run time: " << out.status();
  const absl::Status synced = h.vm->Sync();
  EXPECT_EQ(synced.code(), absl::StatusCode::kInvalidArgument) << synced;
  EXPECT_THAT(synced.message(), HasSubstr("op 'div': integer division by zero"));
  EXPECT_THAT(synced.message(), HasSubstr("element 1 of input 1"));
  // An empty output divides nothing: no error.
  const vm::BlobRef empty = RunOne("div", {{Upload(Shape({0, 3}), std::vector<int64_t>{})}, {y}});
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->shape(), Shape({0, 3}));
  EXPECT_TRUE(h.vm->Sync().ok());
  // The harness still works afterwards.
  const vm::BlobRef fine =
      RunOne("div", {{x}, {Upload(Shape({3}), std::vector<int64_t>{1, 2, 3})}});
  ASSERT_NE(fine, nullptr);
  EXPECT_EQ(Read<int64_t>(fine), std::vector<int64_t>({1, 1, 1, 4, 2, 2}));
}

TEST_P(IntegerArithTest, InPlaceUseGivesTheSameValues) {
  const std::vector<int32_t> x = Values<int32_t>(40, 7);
  const std::vector<int32_t> y = Values<int32_t>(40, 8, /*nonzero=*/true);
  for (const char* op : {"add", "sub", "mul", "div"}) {
    const vm::BlobRef xb = Upload(Shape({40}), x);
    const vm::BlobRef yb = Upload(Shape({40}), y);
    const absl::Status into = h.dispatcher->CallInto(op, {{xb}, {yb}}, {{xb}}, {});
    ASSERT_TRUE(into.ok()) << op << ": " << into;
    const std::vector<int32_t> got = Read<int32_t>(xb);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(got[i], RefBinary<int32_t>(op, x[i], y[i])) << op << " element " << i;
    }
  }
  for (const char* op : {"neg", "abs", "relu"}) {
    const vm::BlobRef xb = Upload(Shape({40}), x);
    const absl::Status into = h.dispatcher->CallInto(op, {{xb}}, {{xb}}, {});
    ASSERT_TRUE(into.ok()) << op << ": " << into;
    const std::vector<int32_t> got = Read<int32_t>(xb);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(got[i], RefUnary<int32_t>(op, x[i])) << op << " element " << i;
    }
  }
}

TEST_P(IntegerArithTest, BoolAndMixedOperandsAreRefusedNamingTheOp) {
  const uint8_t bits[] = {1, 0};
  vm::Stream* stream = h.vm->GetStream(StreamKey{device()}).value();
  vm::BlobRef b = h.vm->NewBlob(stream, DataType::kBool, Shape({2})).value();
  ASSERT_TRUE(h.builder->WriteBlob(b, std::vector<uint8_t>(bits, bits + 2)).ok());
  const vm::BlobRef i32 = Upload(Shape({2}), std::vector<int32_t>{1, 2});
  const vm::BlobRef i64 = Upload(Shape({2}), std::vector<int64_t>{1, 2});
  for (const char* op : {"add", "sub", "mul", "div"}) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, {{b}, {b}}, {}, device());
    ASSERT_FALSE(out.ok()) << op;
    EXPECT_THAT(out.status().message(), HasSubstr(absl::StrCat("op '", op, "'")));
    EXPECT_THAT(out.status().message(), HasSubstr("bool[2]; it must be f32, f64, i32 or i64"));
    out = h.Run(op, {{i32}, {i64}}, {}, device());
    ASSERT_FALSE(out.ok()) << op;
    EXPECT_THAT(out.status().message(), HasSubstr("X and Y must have one dtype"));
  }
  for (const char* op : {"neg", "abs", "relu"}) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, {{b}}, {}, device());
    ASSERT_FALSE(out.ok()) << op;
    EXPECT_THAT(out.status().message(), HasSubstr(absl::StrCat("op '", op, "'")));
  }
  // The unary ops that are not exact on integers still refuse them.
  absl::StatusOr<SlotBlobs> out = h.Run("sqrt", {{i32}}, {}, device());
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("it must be f32 or f64"));
}

// The float kernels are not the integer ones: f32 results are the C++ expression, bit for bit.
TEST_P(IntegerArithTest, FloatPathsAreUnchanged) {
  const std::vector<float> x = {1.5f, -2.25f, 3e38f, 1e-30f, -0.0f, 7.0f};
  const std::vector<float> y = {0.1f, 3.0f, 10.0f, 3e-10f, 2.0f, -0.0f};
  for (const char* op : {"add", "sub", "mul", "div"}) {
    const vm::BlobRef out = RunOne(op, {{Upload(Shape({6}), x)}, {Upload(Shape({6}), y)}});
    ASSERT_NE(out, nullptr);
    const std::vector<float> got = Read<float>(out);
    for (size_t i = 0; i < x.size(); ++i) {
      const std::string o = op;
      const float want = o == "add"   ? x[i] + y[i]
                         : o == "sub" ? x[i] - y[i]
                         : o == "mul" ? x[i] * y[i]
                                      : x[i] / y[i];
      uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &want, 4);
      EXPECT_EQ(a, b) << op << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, IntegerArithTest, ::testing::Values(kCpu, kSim0),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

}  // namespace
}  // namespace sluice::ops::integer_arith_test
