// The status functions and the version: NULL is OK, codes mirror absl::StatusCode, and an
// error's message names the function and the culprit parameter.
#include <cstring>

#include "capi/sluice_c_api.h"
#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"

namespace sluice::capi_testing::status_test {
namespace {

TEST(StatusTest, NullIsOk) {
  EXPECT_EQ(sluice_status_code(nullptr), SLUICE_OK);
  EXPECT_STREQ(sluice_status_message(nullptr), "");
  sluice_status_release(nullptr);
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  SluiceStatus* status = sluice_context_options_create(nullptr);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(sluice_status_code(status), SLUICE_INVALID_ARGUMENT);
  EXPECT_STREQ(sluice_status_message(status), "sluice_context_options_create: out is NULL");
  sluice_status_release(status);
}

TEST(StatusTest, VersionMatchesTheHeader) { EXPECT_EQ(sluice_api_version(), SLUICE_C_API_VERSION); }

TEST(StatusTest, DtypeSizes) {
  EXPECT_EQ(sluice_dtype_size(SLUICE_F32), 4u);
  EXPECT_EQ(sluice_dtype_size(SLUICE_F64), 8u);
  EXPECT_EQ(sluice_dtype_size(SLUICE_I32), 4u);
  EXPECT_EQ(sluice_dtype_size(SLUICE_I64), 8u);
  EXPECT_EQ(sluice_dtype_size(SLUICE_BOOL), 1u);
  EXPECT_EQ(sluice_dtype_size(static_cast<SluiceDataType>(17)), 0u);
}

}  // namespace
}  // namespace sluice::capi_testing::status_test
