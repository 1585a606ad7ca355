// Contexts and their options: cpu and sim devices, jitter, recording, the sync check;
// every NULL handle and bad option is InvalidArgument naming the parameter.
#include "capi/sluice_c_api.h"
#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"

namespace sluice::capi_testing::context_test {
namespace {

TEST(ContextTest, CreatesWithDefaultsAndOptions) {
  SluiceContext* raw = nullptr;
  ASSERT_TRUE(IsOk(sluice_context_create(nullptr, &raw)));
  ContextPtr defaults(raw);
  EXPECT_TRUE(IsOk(sluice_context_sync(defaults.get())));

  SluiceContextOptions* raw_options = nullptr;
  ASSERT_TRUE(IsOk(sluice_context_options_create(&raw_options)));
  ContextOptionsPtr options(raw_options);
  EXPECT_TRUE(IsOk(sluice_context_options_set_sim_devices(options.get(), 3)));
  EXPECT_TRUE(IsOk(sluice_context_options_set_device(options.get(), "sim:2")));
  EXPECT_TRUE(IsOk(sluice_context_options_set_sim_jitter(options.get(), 20, 7)));
  EXPECT_TRUE(IsOk(sluice_context_options_set_check_sync(options.get(), 1)));
  EXPECT_TRUE(IsOk(sluice_context_options_set_record_path(options.get(), nullptr)));
  ASSERT_TRUE(IsOk(sluice_context_create(options.get(), &raw)));
  ContextPtr context(raw);
  TensorPtr t = NewF32(context.get(), {1, 2}, {2});
  const char* device = nullptr;
  EXPECT_TRUE(IsOk(sluice_tensor_device(t.get(), &device)));
  EXPECT_STREQ(device, "sim:2");
  int64_t errors = -1;
  EXPECT_TRUE(IsOk(sluice_context_sync_errors(context.get(), &errors)));
  EXPECT_EQ(errors, 0);
  EXPECT_TRUE(IsOk(sluice_context_shutdown(context.get())));
}

TEST(ContextTest, NullHandlesAreInvalidArguments) {
  EXPECT_TRUE(IsError(sluice_context_options_create(nullptr), SLUICE_INVALID_ARGUMENT, "out"));
  EXPECT_TRUE(IsError(sluice_context_options_set_device(nullptr, "cpu"), SLUICE_INVALID_ARGUMENT,
                      "options is NULL"));
  EXPECT_TRUE(IsError(sluice_context_options_set_sim_devices(nullptr, 1), SLUICE_INVALID_ARGUMENT,
                      "options is NULL"));
  EXPECT_TRUE(IsError(sluice_context_options_set_sim_jitter(nullptr, 1, 1), SLUICE_INVALID_ARGUMENT,
                      "options is NULL"));
  EXPECT_TRUE(IsError(sluice_context_options_set_record_path(nullptr, "x"), SLUICE_INVALID_ARGUMENT,
                      "options is NULL"));
  EXPECT_TRUE(IsError(sluice_context_options_set_check_sync(nullptr, 1), SLUICE_INVALID_ARGUMENT,
                      "options is NULL"));
  EXPECT_TRUE(
      IsError(sluice_context_create(nullptr, nullptr), SLUICE_INVALID_ARGUMENT, "out is NULL"));
  EXPECT_TRUE(IsError(sluice_context_sync(nullptr), SLUICE_INVALID_ARGUMENT, "context is NULL"));
  EXPECT_TRUE(
      IsError(sluice_context_shutdown(nullptr), SLUICE_INVALID_ARGUMENT, "context is NULL"));
  int64_t errors = 0;
  EXPECT_TRUE(IsError(sluice_context_sync_errors(nullptr, &errors), SLUICE_INVALID_ARGUMENT,
                      "context is NULL"));
  ContextPtr context = NewContext();
  EXPECT_TRUE(IsError(sluice_context_sync_errors(context.get(), nullptr), SLUICE_INVALID_ARGUMENT,
                      "out is NULL"));
  sluice_context_release(nullptr);
  sluice_context_options_release(nullptr);
}

TEST(ContextTest, BadOptionsAreInvalidArguments) {
  SluiceContextOptions* raw_options = nullptr;
  ASSERT_TRUE(IsOk(sluice_context_options_create(&raw_options)));
  ContextOptionsPtr options(raw_options);
  EXPECT_TRUE(IsError(sluice_context_options_set_device(options.get(), "gpu:0"),
                      SLUICE_INVALID_ARGUMENT, "gpu"));
  EXPECT_TRUE(IsError(sluice_context_options_set_device(options.get(), nullptr),
                      SLUICE_INVALID_ARGUMENT, "device is NULL"));
  EXPECT_TRUE(IsError(sluice_context_options_set_sim_devices(options.get(), 99),
                      SLUICE_INVALID_ARGUMENT, "count 99"));
  EXPECT_TRUE(IsError(sluice_context_options_set_sim_jitter(options.get(), -1, 0),
                      SLUICE_INVALID_ARGUMENT, "max_jitter_us"));
  // sim:5 with the default two sim devices.
  EXPECT_TRUE(IsOk(sluice_context_options_set_device(options.get(), "sim:5")));
  SluiceContext* context = nullptr;
  EXPECT_TRUE(
      IsError(sluice_context_create(options.get(), &context), SLUICE_INVALID_ARGUMENT, "sim:5"));
  EXPECT_EQ(context, nullptr);
}

TEST(ContextTest, UnwritableRecordPathFailsCreation) {
  SluiceContextOptions* raw_options = nullptr;
  ASSERT_TRUE(IsOk(sluice_context_options_create(&raw_options)));
  ContextOptionsPtr options(raw_options);
  EXPECT_TRUE(IsOk(
      sluice_context_options_set_record_path(options.get(), "/nonexistent-directory/run.rec")));
  SluiceContext* context = nullptr;
  SluiceStatus* status = sluice_context_create(options.get(), &context);
  EXPECT_NE(status, nullptr);
  EXPECT_NE(std::string(sluice_status_message(status)), "");
  sluice_status_release(status);
  EXPECT_EQ(context, nullptr);
}

}  // namespace
}  // namespace sluice::capi_testing::context_test
