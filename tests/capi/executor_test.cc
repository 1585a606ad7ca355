// Program files run through an executor: host feeds and fetches, device-resident ones (I/O
// binding), persistables saved and loaded; and every error: NULL handles, missing and
// garbage program files, unknown feeds and fetches, wrong dtypes and sizes.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "capi/sluice_c_api.h"
#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"

namespace sluice::capi_testing::executor_test {
namespace {

const std::string kExample = std::string(SLUICE_SOURCE_DIR) + "/examples/linear_regression/";

class ExecutorTest : public ::testing::Test {
 protected:
  ExecutorTest() {
    for (int i = 0; i < 16 * 16; ++i) x_[i] = static_cast<float>((i * 7) % 13) / 6.0f - 1.0f;
    for (int r = 0; r < 16; ++r) y_[r] = 0.25f * static_cast<float>(r % 5) - 0.5f;
    main_ = Load("main.program");
    startup_ = Load("startup.program");
  }
  ProgramPtr Load(const std::string& name) {
    SluiceProgram* program = nullptr;
    EXPECT_TRUE(IsOk(sluice_program_load((kExample + name).c_str(), &program)));
    return ProgramPtr(program);
  }
  ExecutorPtr NewExecutor(const char* device = "cpu", int compile = 1, int inplace = 1) {
    SluiceExecutorOptions* raw = nullptr;
    EXPECT_TRUE(IsOk(sluice_executor_options_create(&raw)));
    ExecutorOptionsPtr options(raw);
    EXPECT_TRUE(IsOk(sluice_executor_options_set_device(options.get(), device)));
    EXPECT_TRUE(IsOk(sluice_executor_options_set_compute_streams(options.get(), 2)));
    EXPECT_TRUE(IsOk(sluice_executor_options_set_compile_subgraphs(options.get(), compile)));
    EXPECT_TRUE(IsOk(sluice_executor_options_set_inplace(options.get(), inplace)));
    SluiceExecutor* executor = nullptr;
    EXPECT_TRUE(IsOk(sluice_executor_create(context_.get(), options.get(), &executor)));
    return ExecutorPtr(executor);
  }
  // One training step with host feeds; the loss.
  float Step(SluiceExecutor* executor) {
    const char* names[2] = {"x", "y"};
    const SluiceHostBuffer feeds[2] = {{SLUICE_F32, x_shape_, 2, x_, sizeof x_},
                                       {SLUICE_F32, y_shape_, 2, y_, sizeof y_}};
    const char* fetches[1] = {"reduce_mean_0.out"};
    SluiceRunResult* raw = nullptr;
    EXPECT_TRUE(
        IsOk(sluice_executor_run(executor, main_.get(), names, feeds, 2, fetches, 1, &raw)));
    RunResultPtr result(raw);
    size_t count = 0;
    EXPECT_TRUE(IsOk(sluice_run_result_num_fetches(result.get(), &count)));
    EXPECT_EQ(count, 1u);
    SluiceDataType dtype = SLUICE_I64;
    const int64_t* shape = nullptr;
    size_t rank = 9, bytes = 0;
    const void* data = nullptr;
    EXPECT_TRUE(
        IsOk(sluice_run_result_fetch(result.get(), 0, &dtype, &shape, &rank, &data, &bytes)));
    EXPECT_EQ(dtype, SLUICE_F32);
    EXPECT_EQ(rank, 0u);
    EXPECT_EQ(bytes, sizeof(float));
    return bytes == sizeof(float) ? *static_cast<const float*>(data) : -1;
  }
  float x_[16 * 16], y_[16];
  const int64_t x_shape_[2] = {16, 16}, y_shape_[2] = {16, 1};
  ContextPtr context_ = NewContext();
  ProgramPtr main_, startup_;
};

TEST_F(ExecutorTest, TrainsWithHostFeedsAndFetches) {
  ExecutorPtr executor = NewExecutor();
  ASSERT_TRUE(IsOk(sluice_executor_run(executor.get(), startup_.get(), nullptr, nullptr, 0, nullptr,
                                       0, nullptr)));
  float previous = Step(executor.get());
  for (int step = 0; step < 4; ++step) {
    const float loss = Step(executor.get());
    EXPECT_LT(loss, previous);
    previous = loss;
  }
  int64_t sync_errors = -1;
  EXPECT_TRUE(IsOk(sluice_context_sync_errors(context_.get(), &sync_errors)));
  EXPECT_EQ(sync_errors, 0);
}

TEST_F(ExecutorTest, DeviceResidentFeedsAndFetches) {
  ExecutorPtr executor = NewExecutor("sim:0");
  ASSERT_TRUE(IsOk(sluice_executor_run(executor.get(), startup_.get(), nullptr, nullptr, 0, nullptr,
                                       0, nullptr)));
  TensorPtr x = NewF32(context_.get(), std::vector<float>(x_, x_ + 256), {16, 16}, "sim:0");
  const char* host_names[1] = {"y"};
  const SluiceHostBuffer host_feeds[1] = {{SLUICE_F32, y_shape_, 2, y_, sizeof y_}};
  const char* device_names[1] = {"x"};
  const SluiceTensor* device_feeds[1] = {x.get()};
  const char* fetches[2] = {"reduce_mean_0.out", "add_0.out"};
  const int on_device[2] = {0, 1};
  SluiceRunResult* raw = nullptr;
  ASSERT_TRUE(IsOk(sluice_executor_run_with_device_io(executor.get(), main_.get(), host_names,
                                                      host_feeds, 1, device_names, device_feeds, 1,
                                                      fetches, on_device, 2, &raw)));
  RunResultPtr result(raw);
  const void* data = nullptr;
  EXPECT_TRUE(
      IsOk(sluice_run_result_fetch(result.get(), 0, nullptr, nullptr, nullptr, &data, nullptr)));
  SluiceTensor* prediction = nullptr;
  ASSERT_TRUE(IsOk(sluice_run_result_device_fetch(result.get(), 1, &prediction)));
  TensorPtr owned(prediction);
  const char* device = nullptr;
  EXPECT_TRUE(IsOk(sluice_tensor_device(owned.get(), &device)));
  EXPECT_STREQ(device, "sim:0");
  EXPECT_EQ(ReadF32(owned.get(), 16).size(), 16u);
  EXPECT_TRUE(IsError(sluice_run_result_device_fetch(result.get(), 0, &prediction),
                      SLUICE_FAILED_PRECONDITION, "came back to the host"));
  EXPECT_TRUE(
      IsError(sluice_run_result_fetch(result.get(), 1, nullptr, nullptr, nullptr, &data, nullptr),
              SLUICE_FAILED_PRECONDITION, "stays on its device"));
  EXPECT_TRUE(
      IsError(sluice_run_result_fetch(result.get(), 2, nullptr, nullptr, nullptr, &data, nullptr),
              SLUICE_OUT_OF_RANGE, "index 2"));
  EXPECT_TRUE(IsError(sluice_run_result_device_fetch(result.get(), 5, &prediction),
                      SLUICE_OUT_OF_RANGE, "index 5"));
}

TEST_F(ExecutorTest, SavesAndLoadsPersistables) {
  const std::string dir = TempDir("persistables");
  ExecutorPtr trained = NewExecutor();
  ASSERT_TRUE(IsOk(sluice_executor_run(trained.get(), startup_.get(), nullptr, nullptr, 0, nullptr,
                                       0, nullptr)));
  Step(trained.get());
  Step(trained.get());
  ASSERT_TRUE(IsOk(sluice_executor_save_persistables(trained.get(), main_.get(), dir.c_str())));
  ExecutorPtr restored = NewExecutor();
  ASSERT_TRUE(IsOk(sluice_executor_load_persistables(restored.get(), main_.get(), dir.c_str())));
  EXPECT_EQ(Step(restored.get()), Step(trained.get()));
  EXPECT_TRUE(IsError(
      sluice_executor_load_persistables(restored.get(), main_.get(), (dir + "/missing").c_str()),
      SLUICE_NOT_FOUND, "missing"));
  // One file gone: a full load names it, a partial load leaves that variable as it was.
  size_t loaded = 0, skipped = 0;
  ASSERT_TRUE(IsOk(sluice_executor_load_persistables_partial(restored.get(), main_.get(),
                                                             dir.c_str(), &loaded, &skipped)));
  EXPECT_EQ(skipped, 0u);
  const size_t all = loaded;
  std::filesystem::path removed;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) removed = entry.path();
  ASSERT_TRUE(std::filesystem::remove(removed));
  EXPECT_TRUE(IsError(sluice_executor_load_persistables(restored.get(), main_.get(), dir.c_str()),
                      SLUICE_NOT_FOUND, removed.string()));
  ASSERT_TRUE(IsOk(sluice_executor_load_persistables_partial(restored.get(), main_.get(),
                                                             dir.c_str(), &loaded, &skipped)));
  EXPECT_EQ(loaded, all - 1);
  EXPECT_EQ(skipped, 1u);
  EXPECT_TRUE(
      IsError(sluice_executor_load_persistables_partial(
                  restored.get(), main_.get(), (dir + "/missing").c_str(), nullptr, nullptr),
              SLUICE_NOT_FOUND, "missing"));
}

TEST_F(ExecutorTest, BadProgramFiles) {
  SluiceProgram* program = nullptr;
  EXPECT_TRUE(IsError(sluice_program_load("/nonexistent/main.program", &program), SLUICE_NOT_FOUND,
                      "/nonexistent/main.program"));
  const std::string garbage = TempDir("garbage") + "/garbage.program";
  std::ofstream(garbage) << "this is not a program\n";
  SluiceStatus* status = sluice_program_load(garbage.c_str(), &program);
  EXPECT_NE(status, nullptr);
  EXPECT_NE(std::string(sluice_status_message(status)).find("garbage.program"), std::string::npos)
      << sluice_status_message(status);
  sluice_status_release(status);
  EXPECT_EQ(program, nullptr);
}

TEST_F(ExecutorTest, BadFeedsAndFetches) {
  ExecutorPtr executor = NewExecutor();
  ASSERT_TRUE(IsOk(sluice_executor_run(executor.get(), startup_.get(), nullptr, nullptr, 0, nullptr,
                                       0, nullptr)));
  const char* names[2] = {"x", "y"};
  SluiceHostBuffer feeds[2] = {{SLUICE_F32, x_shape_, 2, x_, sizeof x_},
                               {SLUICE_F32, y_shape_, 2, y_, sizeof y_}};
  const char* fetch[1] = {"reduce_mean_0.out"};
  const char* unknown_fetch[1] = {"no_such_var"};
  const char* unknown_feed[2] = {"x", "zz"};
  SluiceRunResult* out = nullptr;
  SluiceExecutor* e = executor.get();
  EXPECT_TRUE(IsError(sluice_executor_run(e, main_.get(), names, feeds, 2, unknown_fetch, 1, &out),
                      SLUICE_NOT_FOUND, "no_such_var"));
  EXPECT_TRUE(IsError(sluice_executor_run(e, main_.get(), unknown_feed, feeds, 2, fetch, 1, &out),
                      SLUICE_NOT_FOUND, "zz"));
  EXPECT_TRUE(IsError(sluice_executor_run(e, main_.get(), names, feeds, 1, fetch, 1, &out),
                      SLUICE_INVALID_ARGUMENT, "y"));
  feeds[1].byte_size = 4;
  EXPECT_TRUE(IsError(sluice_executor_run(e, main_.get(), names, feeds, 2, fetch, 1, &out),
                      SLUICE_INVALID_ARGUMENT, "feed 'y' is 4 bytes"));
  feeds[1].byte_size = sizeof y_;
  feeds[1].dtype = SLUICE_I32;
  EXPECT_TRUE(IsError(sluice_executor_run(e, main_.get(), names, feeds, 2, fetch, 1, &out),
                      SLUICE_INVALID_ARGUMENT, "y"));
  feeds[1].dtype = static_cast<SluiceDataType>(42);
  EXPECT_TRUE(IsError(sluice_executor_run(e, main_.get(), names, feeds, 2, fetch, 1, &out),
                      SLUICE_INVALID_ARGUMENT, "dtype 42"));
  feeds[1].dtype = SLUICE_F32;
  EXPECT_TRUE(IsError(sluice_executor_run(e, main_.get(), nullptr, feeds, 2, fetch, 1, &out),
                      SLUICE_INVALID_ARGUMENT, "feed_names[0] is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_run(e, main_.get(), names, nullptr, 2, fetch, 1, &out),
                      SLUICE_INVALID_ARGUMENT, "feeds is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_run(e, main_.get(), names, feeds, 2, nullptr, 1, &out),
                      SLUICE_INVALID_ARGUMENT, "fetch_names[0] is NULL"));
  const char* device_names[1] = {"x"};
  const SluiceTensor* no_tensor[1] = {nullptr};
  EXPECT_TRUE(IsError(
      sluice_executor_run_with_device_io(e, main_.get(), names + 1, feeds + 1, 1, device_names,
                                         no_tensor, 1, fetch, nullptr, 1, &out),
      SLUICE_INVALID_ARGUMENT, "device_feeds[0] ('x') is NULL"));
  // A device feed of the wrong shape.
  TensorPtr small = NewF32(context_.get(), {1, 2}, {2});
  const SluiceTensor* wrong[1] = {small.get()};
  EXPECT_TRUE(
      IsError(sluice_executor_run_with_device_io(e, main_.get(), names + 1, feeds + 1, 1,
                                                 device_names, wrong, 1, fetch, nullptr, 1, &out),
              SLUICE_INVALID_ARGUMENT, "x"));
  EXPECT_EQ(out, nullptr);
  // The executor still runs.
  EXPECT_GT(Step(e), 0);
}

// The in-place pass changes where outputs live, not what they hold: five training steps give
// the same losses, bit for bit, with it on and off (each executor on a fresh context).
TEST_F(ExecutorTest, InPlaceOnAndOffTrainTheSameLosses) {
  std::vector<float> losses[2];
  for (int inplace = 0; inplace < 2; ++inplace) {
    context_ = NewContext();
    ExecutorPtr executor = NewExecutor("cpu", /*compile=*/0, inplace);
    ASSERT_TRUE(IsOk(sluice_executor_run(executor.get(), startup_.get(), nullptr, nullptr, 0,
                                         nullptr, 0, nullptr)));
    for (int step = 0; step < 5; ++step) losses[inplace].push_back(Step(executor.get()));
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_LT(losses[1].back(), losses[1].front());
}

TEST_F(ExecutorTest, NullHandlesAreInvalidArguments) {
  SluiceProgram* program = nullptr;
  EXPECT_TRUE(IsError(sluice_program_load(nullptr, &program), SLUICE_INVALID_ARGUMENT, "path"));
  EXPECT_TRUE(IsError(sluice_program_load("x", nullptr), SLUICE_INVALID_ARGUMENT, "out is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_options_create(nullptr), SLUICE_INVALID_ARGUMENT, "out"));
  EXPECT_TRUE(IsError(sluice_executor_options_set_device(nullptr, "cpu"), SLUICE_INVALID_ARGUMENT,
                      "options is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_options_set_compute_streams(nullptr, 1),
                      SLUICE_INVALID_ARGUMENT, "options is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_options_set_compile_subgraphs(nullptr, 1),
                      SLUICE_INVALID_ARGUMENT, "options is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_options_set_inplace(nullptr, 1), SLUICE_INVALID_ARGUMENT,
                      "options is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_options_set_addto(nullptr, 1), SLUICE_INVALID_ARGUMENT,
                      "options is NULL"));
  SluiceExecutorOptions* raw = nullptr;
  ASSERT_TRUE(IsOk(sluice_executor_options_create(&raw)));
  ExecutorOptionsPtr options(raw);
  EXPECT_TRUE(IsError(sluice_executor_options_set_device(options.get(), "npu:0"),
                      SLUICE_INVALID_ARGUMENT, "npu"));
  EXPECT_TRUE(IsError(sluice_executor_options_set_compute_streams(options.get(), 0),
                      SLUICE_INVALID_ARGUMENT, "streams 0"));
  SluiceExecutor* executor = nullptr;
  EXPECT_TRUE(IsError(sluice_executor_create(nullptr, nullptr, &executor), SLUICE_INVALID_ARGUMENT,
                      "context is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_create(context_.get(), nullptr, nullptr),
                      SLUICE_INVALID_ARGUMENT, "out is NULL"));
  ASSERT_TRUE(IsOk(sluice_executor_create(context_.get(), nullptr, &executor)));
  ExecutorPtr owned(executor);
  SluiceRunResult* out = nullptr;
  EXPECT_TRUE(
      IsError(sluice_executor_run(nullptr, main_.get(), nullptr, nullptr, 0, nullptr, 0, &out),
              SLUICE_INVALID_ARGUMENT, "executor is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_run(executor, nullptr, nullptr, nullptr, 0, nullptr, 0, &out),
                      SLUICE_INVALID_ARGUMENT, "program is NULL"));
  EXPECT_TRUE(
      IsError(sluice_executor_run_with_device_io(nullptr, main_.get(), nullptr, nullptr, 0, nullptr,
                                                 nullptr, 0, nullptr, nullptr, 0, &out),
              SLUICE_INVALID_ARGUMENT, "executor is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_save_persistables(nullptr, main_.get(), "d"),
                      SLUICE_INVALID_ARGUMENT, "executor is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_save_persistables(executor, nullptr, "d"),
                      SLUICE_INVALID_ARGUMENT, "program is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_save_persistables(executor, main_.get(), nullptr),
                      SLUICE_INVALID_ARGUMENT, "directory is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_load_persistables(nullptr, main_.get(), "d"),
                      SLUICE_INVALID_ARGUMENT, "executor is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_load_persistables(executor, nullptr, "d"),
                      SLUICE_INVALID_ARGUMENT, "program is NULL"));
  EXPECT_TRUE(IsError(sluice_executor_load_persistables(executor, main_.get(), nullptr),
                      SLUICE_INVALID_ARGUMENT, "directory is NULL"));
  size_t count = 0;
  SluiceTensor* tensor = nullptr;
  EXPECT_TRUE(
      IsError(sluice_run_result_num_fetches(nullptr, &count), SLUICE_INVALID_ARGUMENT, "result"));
  EXPECT_TRUE(
      IsError(sluice_run_result_fetch(nullptr, 0, nullptr, nullptr, nullptr, nullptr, nullptr),
              SLUICE_INVALID_ARGUMENT, "result is NULL"));
  EXPECT_TRUE(IsError(sluice_run_result_device_fetch(nullptr, 0, &tensor), SLUICE_INVALID_ARGUMENT,
                      "result is NULL"));
  sluice_program_release(nullptr);
  sluice_executor_release(nullptr);
  sluice_executor_options_release(nullptr);
  sluice_run_result_release(nullptr);
}

// An ONNX model (tests/data/onnx/add_relu.onnx: y/out = relu(x + b), b = [-1, 0.5, 2]):
// its initializer reaches the scope on the first run, feeds and fetches take ONNX names,
// and the symbolic batch dimension is sized at load.
TEST_F(ExecutorTest, RunsAnOnnxModel) {
  const std::string model = std::string(SLUICE_SOURCE_DIR) + "/tests/data/onnx/add_relu.onnx";
  SluiceProgram* raw = nullptr;
  SluiceStatus* status = sluice_program_load_onnx(model.c_str(), "batch=2", &raw);
  if (status != nullptr && sluice_status_code(status) == SLUICE_UNIMPLEMENTED) {
    sluice_status_release(status);
    GTEST_SKIP() << "built without ONNX";
  }
  ASSERT_TRUE(IsOk(status));
  ProgramPtr program(raw);
  ExecutorPtr executor = NewExecutor();
  const float x[6] = {0.5f, -1.0f, -3.0f, 2.0f, 0.25f, 1.0f};
  const int64_t shape[2] = {2, 3};
  const char* feed_names[1] = {"x"};
  const SluiceHostBuffer feeds[1] = {{SLUICE_F32, shape, 2, x, sizeof x}};
  const char* fetch_names[1] = {"y/out"};
  const float b[3] = {-1.0f, 0.5f, 2.0f};
  for (int run = 0; run < 2; ++run) {
    SluiceRunResult* raw_result = nullptr;
    ASSERT_TRUE(IsOk(sluice_executor_run(executor.get(), program.get(), feed_names, feeds, 1,
                                         fetch_names, 1, &raw_result)));
    RunResultPtr result(raw_result);
    const void* data = nullptr;
    size_t bytes = 0;
    ASSERT_TRUE(
        IsOk(sluice_run_result_fetch(result.get(), 0, nullptr, nullptr, nullptr, &data, &bytes)));
    ASSERT_EQ(bytes, sizeof x);
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(static_cast<const float*>(data)[i], std::max(0.0f, x[i] + b[i % 3])) << i;
    }
  }
  SluiceProgram* unsized = nullptr;
  EXPECT_TRUE(IsError(sluice_program_load_onnx(model.c_str(), nullptr, &unsized),
                      SLUICE_INVALID_ARGUMENT, "batch"));
  EXPECT_TRUE(IsError(sluice_program_load_onnx(model.c_str(), "batch", &unsized),
                      SLUICE_INVALID_ARGUMENT, "dim_sizes entry 'batch'"));
  EXPECT_TRUE(IsError(sluice_program_load_onnx("/nonexistent/m.onnx", nullptr, &unsized),
                      SLUICE_NOT_FOUND, "/nonexistent/m.onnx"));
  EXPECT_EQ(unsized, nullptr);
}

// tests/data/onnx/reshape.onnx: y = reshape(x, shape), the shape a graph input that Sluice
// takes as an attribute. Without a value the load names the input and constant_inputs; with
// shape given as a constant it loads, runs without that feed, and reshapes [2, 3] to [3, 2].
TEST_F(ExecutorTest, LoadsAnOnnxModelWithConstantInputs) {
  const std::string model = std::string(SLUICE_SOURCE_DIR) + "/tests/data/onnx/reshape.onnx";
  SluiceProgram* raw = nullptr;
  SluiceStatus* status = sluice_program_load_onnx(model.c_str(), nullptr, &raw);
  if (status != nullptr && sluice_status_code(status) == SLUICE_UNIMPLEMENTED) {
    sluice_status_release(status);
    GTEST_SKIP() << "built without ONNX";
  }
  EXPECT_TRUE(IsError(status, SLUICE_INVALID_ARGUMENT, "constant_inputs"));
  EXPECT_EQ(raw, nullptr);
  const int64_t shape_value[2] = {3, 2};
  const int64_t shape_dims[1] = {2};
  const char* constant_names[1] = {"shape"};
  const SluiceHostBuffer constants[1] = {
      {SLUICE_I64, shape_dims, 1, shape_value, sizeof shape_value}};
  ASSERT_TRUE(IsOk(sluice_program_load_onnx_with_constants(model.c_str(), nullptr, constant_names,
                                                           constants, 1, &raw)));
  ProgramPtr program(raw);
  ExecutorPtr executor = NewExecutor();
  const float x[6] = {1, 2, 3, 4, 5, 6};
  const int64_t x_shape[2] = {2, 3};
  const char* feed_names[1] = {"x"};
  const SluiceHostBuffer feeds[1] = {{SLUICE_F32, x_shape, 2, x, sizeof x}};
  const char* fetch_names[1] = {"y"};
  SluiceRunResult* raw_result = nullptr;
  ASSERT_TRUE(IsOk(sluice_executor_run(executor.get(), program.get(), feed_names, feeds, 1,
                                       fetch_names, 1, &raw_result)));
  RunResultPtr result(raw_result);
  const int64_t* dims = nullptr;
  size_t rank = 0;
  const void* data = nullptr;
  size_t bytes = 0;
  ASSERT_TRUE(IsOk(sluice_run_result_fetch(result.get(), 0, nullptr, &dims, &rank, &data, &bytes)));
  ASSERT_EQ(rank, 2u);
  EXPECT_EQ(dims[0], 3);
  EXPECT_EQ(dims[1], 2);
  ASSERT_EQ(bytes, sizeof x);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<const float*>(data)[i], x[i]) << i;
  // A constant of the wrong dtype is refused naming the input.
  const double wrong[2] = {3, 2};
  const SluiceHostBuffer wrong_constants[1] = {{SLUICE_F64, shape_dims, 1, wrong, sizeof wrong}};
  SluiceProgram* refused = nullptr;
  EXPECT_TRUE(IsError(sluice_program_load_onnx_with_constants(
                          model.c_str(), nullptr, constant_names, wrong_constants, 1, &refused),
                      SLUICE_INVALID_ARGUMENT, "shape"));
  EXPECT_EQ(refused, nullptr);
}

}  // namespace
}  // namespace sluice::capi_testing::executor_test
