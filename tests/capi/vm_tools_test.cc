// Recording and replay, and the stress run, through the C API: a recorded context replays
// with its checksums matching; a bad record is an error naming it; a short stress run is
// clean, one without soft sync reports errors; bad arguments are InvalidArgument.
#include <fstream>
#include <string>
#include <vector>

#include "capi/sluice_c_api.h"
#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"

namespace sluice::capi_testing::vm_tools_test {
namespace {

TEST(VmToolsTest, RecordedOpsReplayWithMatchingChecksums) {
  const std::string path = TempDir("record") + "/ops.rec";
  {
    SluiceContextOptions* raw_options = nullptr;
    ASSERT_TRUE(IsOk(sluice_context_options_create(&raw_options)));
    ContextOptionsPtr options(raw_options);
    ASSERT_TRUE(IsOk(sluice_context_options_set_record_path(options.get(), path.c_str())));
    SluiceContext* raw = nullptr;
    ASSERT_TRUE(IsOk(sluice_context_create(options.get(), &raw)));
    ContextPtr context(raw);
    TensorPtr a = NewF32(context.get(), {1, 2, 3, 4}, {4}, "sim:0");
    TensorPtr b = NewF32(context.get(), {4, 3, 2, 1}, {4}, "sim:1");
    TensorPtr b0 = [&] {
      SluiceTensor* t = nullptr;
      EXPECT_TRUE(IsOk(sluice_tensor_to_device(b.get(), "sim:0", &t)));
      return TensorPtr(t);
    }();
    const SluiceTensor* inputs[2] = {a.get(), b0.get()};
    SluiceTensor* out = nullptr;
    size_t count = 0;
    ASSERT_TRUE(IsOk(sluice_op_call(context.get(), "mul", inputs, nullptr, 2, nullptr, nullptr,
                                    &out, 1, &count)));
    TensorPtr product(out);
    EXPECT_EQ(ReadF32(product.get(), 4), (std::vector<float>{4, 6, 6, 4}));
    ASSERT_TRUE(IsOk(sluice_context_shutdown(context.get())));
  }
  SluiceReplayReport report;
  ASSERT_TRUE(IsOk(sluice_replay(path.c_str(), nullptr, 1, 1, 2, &report)));
  EXPECT_GT(report.instructions, 0);
  EXPECT_GT(report.checksums_compared, 0);
  EXPECT_EQ(report.checksum_mismatches, 0);
  EXPECT_EQ(report.sync_errors, 0);
  EXPECT_EQ(report.op_errors, 0);
  EXPECT_STREQ(report.first_problem, "");
  ASSERT_TRUE(IsOk(sluice_replay(path.c_str(), "sim:1=sim:0", 1, 1, 1, &report)));
  EXPECT_EQ(report.checksum_mismatches, 0);
}

TEST(VmToolsTest, BadRecordsAndArguments) {
  SluiceReplayReport report;
  EXPECT_TRUE(IsError(sluice_replay("/nonexistent/run.rec", nullptr, 0, 0, 1, &report),
                      SLUICE_NOT_FOUND, "/nonexistent/run.rec"));
  const std::string garbage = TempDir("bad_record") + "/garbage.rec";
  std::ofstream(garbage) << "not a record\nat all\n";
  SluiceStatus* status = sluice_replay(garbage.c_str(), nullptr, 0, 0, 1, &report);
  ASSERT_NE(status, nullptr);
  EXPECT_NE(std::string(sluice_status_message(status)), "");
  sluice_status_release(status);
  EXPECT_TRUE(IsError(sluice_replay(nullptr, nullptr, 0, 0, 1, &report), SLUICE_INVALID_ARGUMENT,
                      "path is NULL"));
  EXPECT_TRUE(IsError(sluice_replay(garbage.c_str(), nullptr, 0, 0, 1, nullptr),
                      SLUICE_INVALID_ARGUMENT, "report is NULL"));
  EXPECT_TRUE(IsError(sluice_replay(garbage.c_str(), nullptr, 0, 0, 0, &report),
                      SLUICE_INVALID_ARGUMENT, "repeat 0"));
  EXPECT_TRUE(IsError(sluice_replay(garbage.c_str(), "sim:1", 0, 0, 1, &report),
                      SLUICE_INVALID_ARGUMENT, "device_map"));
}

TEST(VmToolsTest, StressRunIsCleanWithSoftSync) {
  SluiceStressOptions options;
  sluice_stress_options_init(&options);
  EXPECT_EQ(options.soft_sync, 1);
  options.programs = 6;
  options.jitter_us = 20;
  SluiceStressTotals totals;
  ASSERT_TRUE(IsOk(sluice_stress_run(&options, &totals)));
  EXPECT_EQ(totals.programs, 6);
  EXPECT_GT(totals.instructions, 0);
  EXPECT_EQ(totals.mismatches + totals.sync_errors + totals.hangs + totals.op_errors, 0)
      << totals.first_problem;
  EXPECT_EQ(totals.abandoned, 0);
}

TEST(VmToolsTest, StressRunWithoutSoftSyncReportsErrors) {
  SluiceStressOptions options;
  sluice_stress_options_init(&options);
  options.programs = 20;
  options.jitter_us = 20;
  options.soft_sync = 0;
  SluiceStressTotals totals;
  ASSERT_TRUE(IsOk(sluice_stress_run(&options, &totals)));
  EXPECT_GT(totals.sync_errors, 0);
  EXPECT_NE(std::string(totals.first_problem), "");
}

TEST(VmToolsTest, StressRunRejectsBadOptions) {
  SluiceStressOptions options;
  sluice_stress_options_init(&options);
  SluiceStressTotals totals;
  EXPECT_TRUE(IsError(sluice_stress_run(nullptr, &totals), SLUICE_INVALID_ARGUMENT, "options"));
  EXPECT_TRUE(IsError(sluice_stress_run(&options, nullptr), SLUICE_INVALID_ARGUMENT, "totals"));
  options.streams = 0;
  EXPECT_TRUE(IsError(sluice_stress_run(&options, &totals), SLUICE_INVALID_ARGUMENT, "streams"));
  sluice_stress_options_init(&options);
  options.sim_devices = 100;
  EXPECT_TRUE(
      IsError(sluice_stress_run(&options, &totals), SLUICE_INVALID_ARGUMENT, "sim_devices"));
  sluice_stress_options_init(&options);
  options.programs = 1;
  options.record_path = "/nonexistent-directory/stress.rec";
  SluiceStatus* status = sluice_stress_run(&options, &totals);
  EXPECT_NE(status, nullptr);
  EXPECT_NE(std::string(sluice_status_message(status)).find("nonexistent-directory"),
            std::string::npos);
  sluice_status_release(status);
  sluice_stress_options_init(nullptr);
}

}  // namespace
}  // namespace sluice::capi_testing::vm_tools_test
