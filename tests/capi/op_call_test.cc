// Ops called by name: inputs per slot, attributes of every kind, outputs returned; and
// every error: NULL handles, an unknown op, a bad attribute, a failing op, too few outputs.
#include <vector>

#include "capi/sluice_c_api.h"
#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"

namespace sluice::capi_testing::op_call_test {
namespace {

class OpCallTest : public ::testing::Test {
 protected:
  // Calls `op` with one tensor per slot; the single output.
  TensorPtr CallOne(const char* op, std::vector<const SluiceTensor*> inputs,
                    const SluiceAttrs* attrs = nullptr, const char* device = nullptr) {
    SluiceTensor* out = nullptr;
    size_t count = 0;
    EXPECT_TRUE(IsOk(sluice_op_call(context_.get(), op, inputs.data(), nullptr, inputs.size(),
                                    attrs, device, &out, 1, &count)));
    EXPECT_EQ(count, 1u);
    return TensorPtr(out);
  }
  AttrsPtr NewAttrs() {
    SluiceAttrs* attrs = nullptr;
    EXPECT_TRUE(IsOk(sluice_attrs_create(&attrs)));
    return AttrsPtr(attrs);
  }
  ContextPtr context_ = NewContext();
};

TEST_F(OpCallTest, RunsOpsByNameWithAttributes) {
  TensorPtr a = NewF32(context_.get(), {1, 2, 3, 4}, {2, 2}, "sim:0");
  TensorPtr b = NewF32(context_.get(), {10, 20, 30, 40}, {2, 2}, "sim:0");
  TensorPtr sum = CallOne("add", {a.get(), b.get()});
  AttrsPtr attrs = NewAttrs();
  EXPECT_TRUE(IsOk(sluice_attrs_set_float(attrs.get(), "scale", 2.0)));
  EXPECT_TRUE(IsOk(sluice_attrs_set_float(attrs.get(), "bias", 1.0)));
  TensorPtr scaled = CallOne("scale", {sum.get()}, attrs.get());
  EXPECT_EQ(ReadF32(scaled.get(), 4), (std::vector<float>{23, 45, 67, 89}));
  const char* device = nullptr;
  EXPECT_TRUE(IsOk(sluice_tensor_device(scaled.get(), &device)));
  EXPECT_STREQ(device, "sim:0");

  // Int-list and bool attributes: reduce_sum over axis 1 without keepdim; string attributes
  // and an op without inputs on a chosen device: fill_constant.
  AttrsPtr reduce = NewAttrs();
  const int64_t axes[1] = {1};
  EXPECT_TRUE(IsOk(sluice_attrs_set_ints(reduce.get(), "axes", axes, 1)));
  EXPECT_TRUE(IsOk(sluice_attrs_set_bool(reduce.get(), "keepdim", 0)));
  TensorPtr rows = CallOne("reduce_sum", {a.get()}, reduce.get());
  EXPECT_EQ(ReadF32(rows.get(), 2), (std::vector<float>{3, 7}));
  AttrsPtr fill = NewAttrs();
  const int64_t shape[2] = {1, 3};
  EXPECT_TRUE(IsOk(sluice_attrs_set_ints(fill.get(), "shape", shape, 2)));
  EXPECT_TRUE(IsOk(sluice_attrs_set_float(fill.get(), "value", 0.5)));
  EXPECT_TRUE(IsOk(sluice_attrs_set_string(fill.get(), "dtype", "f32")));
  TensorPtr filled = CallOne("fill_constant", {}, fill.get(), "sim:1");
  EXPECT_EQ(ReadF32(filled.get(), 3), (std::vector<float>{0.5, 0.5, 0.5}));
  EXPECT_TRUE(IsOk(sluice_tensor_device(filled.get(), &device)));
  EXPECT_STREQ(device, "sim:1");
  EXPECT_TRUE(IsOk(sluice_context_sync(context_.get())));
}

TEST_F(OpCallTest, SlotsTakeSeveralTensors) {
  TensorPtr a = NewF32(context_.get(), {1, 2}, {1, 2});
  TensorPtr b = NewF32(context_.get(), {3, 4}, {1, 2});
  const SluiceTensor* inputs[2] = {a.get(), b.get()};
  const size_t slots[1] = {2};
  AttrsPtr attrs = NewAttrs();
  EXPECT_TRUE(IsOk(sluice_attrs_set_int(attrs.get(), "axis", 0)));
  SluiceTensor* out = nullptr;
  size_t count = 0;
  ASSERT_TRUE(IsOk(sluice_op_call(context_.get(), "concat", inputs, slots, 1, attrs.get(), nullptr,
                                  &out, 1, &count)));
  TensorPtr joined(out);
  EXPECT_EQ(ReadF32(joined.get(), 4), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(OpCallTest, NullHandlesAreInvalidArguments) {
  EXPECT_TRUE(IsError(sluice_attrs_create(nullptr), SLUICE_INVALID_ARGUMENT, "out is NULL"));
  EXPECT_TRUE(IsError(sluice_attrs_set_int(nullptr, "a", 1), SLUICE_INVALID_ARGUMENT, "attrs"));
  EXPECT_TRUE(IsError(sluice_attrs_set_float(nullptr, "a", 1), SLUICE_INVALID_ARGUMENT, "attrs"));
  EXPECT_TRUE(IsError(sluice_attrs_set_bool(nullptr, "a", 1), SLUICE_INVALID_ARGUMENT, "attrs"));
  EXPECT_TRUE(
      IsError(sluice_attrs_set_string(nullptr, "a", "b"), SLUICE_INVALID_ARGUMENT, "attrs"));
  EXPECT_TRUE(
      IsError(sluice_attrs_set_ints(nullptr, "a", nullptr, 0), SLUICE_INVALID_ARGUMENT, "attrs"));
  AttrsPtr attrs = NewAttrs();
  EXPECT_TRUE(
      IsError(sluice_attrs_set_int(attrs.get(), nullptr, 1), SLUICE_INVALID_ARGUMENT, "name"));
  EXPECT_TRUE(IsError(sluice_attrs_set_float(attrs.get(), "", 1), SLUICE_INVALID_ARGUMENT,
                      "name is empty"));
  EXPECT_TRUE(IsError(sluice_attrs_set_string(attrs.get(), "a", nullptr), SLUICE_INVALID_ARGUMENT,
                      "value is NULL"));
  EXPECT_TRUE(IsError(sluice_attrs_set_ints(attrs.get(), "a", nullptr, 2), SLUICE_INVALID_ARGUMENT,
                      "values is NULL"));

  TensorPtr a = NewF32(context_.get(), {1}, {1});
  const SluiceTensor* inputs[2] = {a.get(), nullptr};
  SluiceTensor* out = nullptr;
  size_t count = 0;
  EXPECT_TRUE(IsError(
      sluice_op_call(nullptr, "relu", inputs, nullptr, 1, nullptr, nullptr, &out, 1, &count),
      SLUICE_INVALID_ARGUMENT, "context is NULL"));
  EXPECT_TRUE(IsError(sluice_op_call(context_.get(), nullptr, inputs, nullptr, 1, nullptr, nullptr,
                                     &out, 1, &count),
                      SLUICE_INVALID_ARGUMENT, "op is NULL"));
  EXPECT_TRUE(IsError(sluice_op_call(context_.get(), "relu", nullptr, nullptr, 1, nullptr, nullptr,
                                     &out, 1, &count),
                      SLUICE_INVALID_ARGUMENT, "inputs is NULL"));
  EXPECT_TRUE(IsError(
      sluice_op_call(context_.get(), "add", inputs, nullptr, 2, nullptr, nullptr, &out, 1, &count),
      SLUICE_INVALID_ARGUMENT, "inputs[1] (slot 1) is NULL"));
  EXPECT_TRUE(IsError(sluice_op_call(context_.get(), "relu", inputs, nullptr, 1, nullptr, nullptr,
                                     nullptr, 1, &count),
                      SLUICE_INVALID_ARGUMENT, "outputs is NULL"));
  EXPECT_TRUE(IsError(sluice_op_call(context_.get(), "relu", inputs, nullptr, 1, nullptr, nullptr,
                                     &out, 1, nullptr),
                      SLUICE_INVALID_ARGUMENT, "num_outputs is NULL"));
  sluice_attrs_release(nullptr);
}

TEST_F(OpCallTest, UnknownOpsBadAttributesAndFailingOps) {
  TensorPtr a = NewF32(context_.get(), {1, 2, 3, 4}, {2, 2});
  TensorPtr b = NewF32(context_.get(), {1, 2, 3}, {3});
  const SluiceTensor* inputs[2] = {a.get(), b.get()};
  SluiceTensor* out = nullptr;
  size_t count = 0;
  EXPECT_TRUE(IsError(sluice_op_call(context_.get(), "no_such_op", inputs, nullptr, 1, nullptr,
                                     nullptr, &out, 1, &count),
                      SLUICE_NOT_FOUND, "no_such_op"));
  AttrsPtr attrs = NewAttrs();
  EXPECT_TRUE(IsOk(sluice_attrs_set_string(attrs.get(), "scale", "two")));
  SluiceStatus* bad_attr = sluice_op_call(context_.get(), "scale", inputs, nullptr, 1, attrs.get(),
                                          nullptr, &out, 1, &count);
  EXPECT_NE(bad_attr, nullptr);
  EXPECT_NE(std::string(sluice_status_message(bad_attr)).find("scale"), std::string::npos);
  sluice_status_release(bad_attr);
  EXPECT_TRUE(IsError(
      sluice_op_call(context_.get(), "add", inputs, nullptr, 2, nullptr, nullptr, &out, 1, &count),
      SLUICE_INVALID_ARGUMENT, "add"));
  EXPECT_TRUE(IsError(
      sluice_op_call(context_.get(), "relu", inputs, nullptr, 1, nullptr, "gpu:1", &out, 1, &count),
      SLUICE_INVALID_ARGUMENT, "gpu"));
  EXPECT_TRUE(IsError(
      sluice_op_call(context_.get(), "relu", inputs, nullptr, 1, nullptr, nullptr, &out, 0, &count),
      SLUICE_OUT_OF_RANGE, "capacity is 0"));
  EXPECT_EQ(out, nullptr);
  // The context still works.
  TensorPtr relu = [&] {
    EXPECT_TRUE(IsOk(sluice_op_call(context_.get(), "relu", inputs, nullptr, 1, nullptr, nullptr,
                                    &out, 1, &count)));
    return TensorPtr(out);
  }();
  EXPECT_EQ(ReadF32(relu.get(), 4), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace sluice::capi_testing::op_call_test
