// Helpers for the C API's tests: owning wrappers over the handles (each calls the handle's
// release function) and checks on a returned SluiceStatus*. Only the C API is used.
#ifndef SLUICE_TESTS_CAPI_CAPI_TEST_UTIL_H_
#define SLUICE_TESTS_CAPI_CAPI_TEST_UTIL_H_

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "capi/sluice_c_api.h"
#include "gtest/gtest.h"

namespace sluice::capi_testing {

template <typename T, void (*Release)(T*)>
struct Releaser {
  void operator()(T* handle) const { Release(handle); }
};
using StatusPtr = std::unique_ptr<SluiceStatus, Releaser<SluiceStatus, sluice_status_release>>;
using ContextPtr = std::unique_ptr<SluiceContext, Releaser<SluiceContext, sluice_context_release>>;
using ContextOptionsPtr =
    std::unique_ptr<SluiceContextOptions,
                    Releaser<SluiceContextOptions, sluice_context_options_release>>;
using TensorPtr = std::unique_ptr<SluiceTensor, Releaser<SluiceTensor, sluice_tensor_release>>;
using AttrsPtr = std::unique_ptr<SluiceAttrs, Releaser<SluiceAttrs, sluice_attrs_release>>;
using ProgramPtr = std::unique_ptr<SluiceProgram, Releaser<SluiceProgram, sluice_program_release>>;
using ExecutorPtr =
    std::unique_ptr<SluiceExecutor, Releaser<SluiceExecutor, sluice_executor_release>>;
using ExecutorOptionsPtr =
    std::unique_ptr<SluiceExecutorOptions,
                    Releaser<SluiceExecutorOptions, sluice_executor_options_release>>;
using RunResultPtr =
    std::unique_ptr<SluiceRunResult, Releaser<SluiceRunResult, sluice_run_result_release>>;

// Success when `status` is NULL; otherwise a failure with its code and message. Releases it.
inline ::testing::AssertionResult IsOk(SluiceStatus* status) {
  StatusPtr owned(status);
  if (owned == nullptr) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "code " << sluice_status_code(owned.get()) << ": "
                                       << sluice_status_message(owned.get());
}

// Success when `status` has `code` and a message holding `substring` (and non-empty).
// Releases it.
inline ::testing::AssertionResult IsError(SluiceStatus* status, SluiceStatusCode code,
                                          const std::string& substring) {
  StatusPtr owned(status);
  if (owned == nullptr) return ::testing::AssertionFailure() << "the call succeeded";
  const std::string message = sluice_status_message(owned.get());
  if (sluice_status_code(owned.get()) != code || message.empty() ||
      message.find(substring) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "code " << sluice_status_code(owned.get()) << " (want " << code << "): " << message
           << " (want it to hold '" << substring << "')";
  }
  return ::testing::AssertionSuccess();
}

// A context with `sim_devices` sim devices (and the sync check on).
inline ContextPtr NewContext(int sim_devices = 2) {
  SluiceContextOptions* raw_options = nullptr;
  EXPECT_TRUE(IsOk(sluice_context_options_create(&raw_options)));
  ContextOptionsPtr options(raw_options);
  EXPECT_TRUE(IsOk(sluice_context_options_set_sim_devices(options.get(), sim_devices)));
  EXPECT_TRUE(IsOk(sluice_context_options_set_check_sync(options.get(), 1)));
  SluiceContext* context = nullptr;
  EXPECT_TRUE(IsOk(sluice_context_create(options.get(), &context)));
  return ContextPtr(context);
}

// A f32 tensor of `values` with `shape` on `device` (NULL: the context's).
inline TensorPtr NewF32(SluiceContext* context, const std::vector<float>& values,
                        const std::vector<int64_t>& shape, const char* device = nullptr) {
  SluiceTensor* tensor = nullptr;
  EXPECT_TRUE(
      IsOk(sluice_tensor_create(context, SLUICE_F32, shape.data(), shape.size(), values.data(),
                                values.size() * sizeof(float), device, &tensor)));
  return TensorPtr(tensor);
}

inline std::vector<float> ReadF32(const SluiceTensor* tensor, size_t count) {
  std::vector<float> values(count);
  EXPECT_TRUE(IsOk(sluice_tensor_read(tensor, values.data(), count * sizeof(float))));
  return values;
}

// A fresh, empty directory for files a test writes.
inline std::string TempDir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("sluice_capi_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace sluice::capi_testing

#endif  // SLUICE_TESTS_CAPI_CAPI_TEST_UTIL_H_
