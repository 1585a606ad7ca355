// Tensors from and to host buffers, for every dtype and on cpu and sim; copies across
// devices; and every bad handle, dtype and buffer size.
#include <cstdint>
#include <cstring>
#include <vector>

#include "capi/sluice_c_api.h"
#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"

namespace sluice::capi_testing::tensor_test {
namespace {

class TensorTest : public ::testing::Test {
 protected:
  ContextPtr context_ = NewContext();
};

// Six elements of `dtype` with distinct bytes, round-tripped through `device`.
void RoundTrip(SluiceContext* context, SluiceDataType dtype, const char* device) {
  const size_t size = sluice_dtype_size(dtype);
  std::vector<uint8_t> bytes(6 * size);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 1);
  if (dtype == SLUICE_BOOL) {
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = i % 2;
  }
  if (dtype == SLUICE_F32 || dtype == SLUICE_F64) {  // finite values only
    for (size_t i = 0; i < 6; ++i) {
      if (dtype == SLUICE_F32) {
        const float v = 1.5f * static_cast<float>(i) - 2;
        std::memcpy(&bytes[i * size], &v, size);
      } else {
        const double v = 0.25 * static_cast<double>(i) - 1;
        std::memcpy(&bytes[i * size], &v, size);
      }
    }
  }
  const int64_t shape[2] = {2, 3};
  SluiceTensor* raw = nullptr;
  ASSERT_TRUE(IsOk(
      sluice_tensor_create(context, dtype, shape, 2, bytes.data(), bytes.size(), device, &raw)));
  TensorPtr tensor(raw);
  SluiceDataType got_dtype = SLUICE_F32;
  ASSERT_TRUE(IsOk(sluice_tensor_dtype(tensor.get(), &got_dtype)));
  EXPECT_EQ(got_dtype, dtype);
  size_t rank = 0, byte_size = 0;
  ASSERT_TRUE(IsOk(sluice_tensor_rank(tensor.get(), &rank)));
  EXPECT_EQ(rank, 2u);
  int64_t dims[4] = {0, 0, 0, 0};
  ASSERT_TRUE(IsOk(sluice_tensor_shape(tensor.get(), dims, 4)));
  EXPECT_EQ(dims[0], 2);
  EXPECT_EQ(dims[1], 3);
  ASSERT_TRUE(IsOk(sluice_tensor_byte_size(tensor.get(), &byte_size)));
  EXPECT_EQ(byte_size, bytes.size());
  const char* where = nullptr;
  ASSERT_TRUE(IsOk(sluice_tensor_device(tensor.get(), &where)));
  EXPECT_STREQ(where, device);
  std::vector<uint8_t> back(bytes.size());
  ASSERT_TRUE(IsOk(sluice_tensor_read(tensor.get(), back.data(), back.size())));
  EXPECT_EQ(back, bytes);
}

TEST_F(TensorTest, RoundTripsEveryDtypeOnCpuAndSim) {
  for (SluiceDataType dtype : {SLUICE_F32, SLUICE_F64, SLUICE_I32, SLUICE_I64, SLUICE_BOOL}) {
    for (const char* device : {"cpu", "sim:0", "sim:1"}) {
      SCOPED_TRACE(testing::Message() << "dtype " << dtype << " on " << device);
      RoundTrip(context_.get(), dtype, device);
    }
  }
}

TEST_F(TensorTest, ScalarsCopiesAndShares) {
  const float value = 4.5f;
  SluiceTensor* raw = nullptr;
  ASSERT_TRUE(IsOk(sluice_tensor_create(context_.get(), SLUICE_F32, nullptr, 0, &value,
                                        sizeof value, nullptr, &raw)));
  TensorPtr scalar(raw);
  size_t rank = 9;
  EXPECT_TRUE(IsOk(sluice_tensor_rank(scalar.get(), &rank)));
  EXPECT_EQ(rank, 0u);
  EXPECT_TRUE(IsOk(sluice_tensor_shape(scalar.get(), nullptr, 0)));
  ASSERT_TRUE(IsOk(sluice_tensor_to_device(scalar.get(), "sim:1", &raw)));
  TensorPtr moved(raw);
  const char* where = nullptr;
  EXPECT_TRUE(IsOk(sluice_tensor_device(moved.get(), &where)));
  EXPECT_STREQ(where, "sim:1");
  ASSERT_TRUE(IsOk(sluice_tensor_share(moved.get(), &raw)));
  TensorPtr shared(raw);
  moved.reset();
  EXPECT_EQ(ReadF32(shared.get(), 1), std::vector<float>{4.5f});
}

TEST_F(TensorTest, NullHandlesAreInvalidArguments) {
  const float v[2] = {1, 2};
  const int64_t shape[1] = {2};
  SluiceTensor* out = nullptr;
  EXPECT_TRUE(IsError(sluice_tensor_create(nullptr, SLUICE_F32, shape, 1, v, 8, nullptr, &out),
                      SLUICE_INVALID_ARGUMENT, "context is NULL"));
  EXPECT_TRUE(
      IsError(sluice_tensor_create(context_.get(), SLUICE_F32, shape, 1, v, 8, nullptr, nullptr),
              SLUICE_INVALID_ARGUMENT, "out is NULL"));
  EXPECT_TRUE(
      IsError(sluice_tensor_create(context_.get(), SLUICE_F32, shape, 1, nullptr, 8, nullptr, &out),
              SLUICE_INVALID_ARGUMENT, "data is NULL"));
  EXPECT_TRUE(
      IsError(sluice_tensor_create(context_.get(), SLUICE_F32, nullptr, 1, v, 8, nullptr, &out),
              SLUICE_INVALID_ARGUMENT, "shape is NULL"));
  EXPECT_TRUE(IsError(sluice_tensor_share(nullptr, &out), SLUICE_INVALID_ARGUMENT, "tensor"));
  float back[2];
  EXPECT_TRUE(IsError(sluice_tensor_read(nullptr, back, 8), SLUICE_INVALID_ARGUMENT, "tensor"));
  EXPECT_TRUE(IsError(sluice_tensor_to_device(nullptr, "cpu", &out), SLUICE_INVALID_ARGUMENT,
                      "tensor is NULL"));
  SluiceDataType dtype;
  size_t n;
  int64_t dims[1];
  const char* device;
  EXPECT_TRUE(IsError(sluice_tensor_dtype(nullptr, &dtype), SLUICE_INVALID_ARGUMENT, "tensor"));
  EXPECT_TRUE(IsError(sluice_tensor_rank(nullptr, &n), SLUICE_INVALID_ARGUMENT, "tensor"));
  EXPECT_TRUE(IsError(sluice_tensor_shape(nullptr, dims, 1), SLUICE_INVALID_ARGUMENT, "tensor"));
  EXPECT_TRUE(IsError(sluice_tensor_byte_size(nullptr, &n), SLUICE_INVALID_ARGUMENT, "tensor"));
  EXPECT_TRUE(IsError(sluice_tensor_device(nullptr, &device), SLUICE_INVALID_ARGUMENT, "tensor"));
  TensorPtr t = NewF32(context_.get(), {1, 2}, {2});
  EXPECT_TRUE(IsError(sluice_tensor_share(t.get(), nullptr), SLUICE_INVALID_ARGUMENT, "out"));
  EXPECT_TRUE(IsError(sluice_tensor_read(t.get(), nullptr, 8), SLUICE_INVALID_ARGUMENT, "data"));
  EXPECT_TRUE(IsError(sluice_tensor_to_device(t.get(), "cpu", nullptr), SLUICE_INVALID_ARGUMENT,
                      "out is NULL"));
  EXPECT_TRUE(IsError(sluice_tensor_dtype(t.get(), nullptr), SLUICE_INVALID_ARGUMENT, "out"));
  EXPECT_TRUE(IsError(sluice_tensor_rank(t.get(), nullptr), SLUICE_INVALID_ARGUMENT, "out"));
  EXPECT_TRUE(IsError(sluice_tensor_shape(t.get(), nullptr, 1), SLUICE_INVALID_ARGUMENT, "dims"));
  EXPECT_TRUE(IsError(sluice_tensor_byte_size(t.get(), nullptr), SLUICE_INVALID_ARGUMENT, "out"));
  EXPECT_TRUE(IsError(sluice_tensor_device(t.get(), nullptr), SLUICE_INVALID_ARGUMENT, "out"));
  sluice_tensor_release(nullptr);
}

TEST_F(TensorTest, WrongDtypesSizesShapesAndDevices) {
  const float v[4] = {1, 2, 3, 4};
  const int64_t shape[2] = {2, 2}, negative[2] = {2, -2};
  SluiceTensor* out = nullptr;
  EXPECT_TRUE(IsError(sluice_tensor_create(context_.get(), static_cast<SluiceDataType>(9), shape, 2,
                                           v, 16, nullptr, &out),
                      SLUICE_INVALID_ARGUMENT, "dtype 9"));
  EXPECT_TRUE(
      IsError(sluice_tensor_create(context_.get(), SLUICE_F32, shape, 2, v, 12, nullptr, &out),
              SLUICE_INVALID_ARGUMENT, "byte_size is 12 bytes"));
  EXPECT_TRUE(
      IsError(sluice_tensor_create(context_.get(), SLUICE_F64, shape, 2, v, 16, nullptr, &out),
              SLUICE_INVALID_ARGUMENT, "needs 32"));
  EXPECT_TRUE(
      IsError(sluice_tensor_create(context_.get(), SLUICE_F32, negative, 2, v, 16, nullptr, &out),
              SLUICE_INVALID_ARGUMENT, "shape[1] is negative"));
  EXPECT_TRUE(
      IsError(sluice_tensor_create(context_.get(), SLUICE_F32, shape, 2, v, 16, "tpu:0", &out),
              SLUICE_INVALID_ARGUMENT, "tpu"));
  EXPECT_TRUE(
      IsError(sluice_tensor_create(context_.get(), SLUICE_F32, shape, 2, v, 16, "sim:7", &out),
              SLUICE_NOT_FOUND, "sim:7"));
  EXPECT_EQ(out, nullptr);
  TensorPtr t = NewF32(context_.get(), {1, 2, 3, 4}, {2, 2});
  float small[2];
  EXPECT_TRUE(IsError(sluice_tensor_read(t.get(), small, sizeof small), SLUICE_INVALID_ARGUMENT,
                      "needs 16"));
  int64_t dims[1];
  EXPECT_TRUE(IsError(sluice_tensor_shape(t.get(), dims, 1), SLUICE_OUT_OF_RANGE, "capacity 1"));
  EXPECT_TRUE(
      IsError(sluice_tensor_to_device(t.get(), "cuda:x", &out), SLUICE_INVALID_ARGUMENT, "cuda:x"));
}

}  // namespace
}  // namespace sluice::capi_testing::tensor_test
