/* The C API end to end: a context with a simulated device, tensors from host buffers, an
 * op called by name with attributes, then the linear regression program files trained for
 * a few steps through an executor, with the loss printed each step.
 *
 *   c_api_example [DIR]   DIR holds main.program and startup.program (default:
 *                         examples/linear_regression, run from the repository root)
 *
 * Exits 0 when every call succeeded and the loss fell every step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi/sluice_c_api.h"

/* Prints a failed call's status and releases it; 1 when the call succeeded. */
static int Ok(SluiceStatus* status, const char* call) {
  if (status == NULL) return 1;
  fprintf(stderr, "%s failed (code %d): %s\n", call, (int)sluice_status_code(status),
          sluice_status_message(status));
  sluice_status_release(status);
  return 0;
}
#define CHECK(call)                  \
  do {                               \
    if (!Ok((call), #call)) exit(1); \
  } while (0)

/* scale(a + b, 2, 1) on sim:0, read back: an op called by name with attributes. */
static void EagerOps(SluiceContext* context) {
  const float a_values[4] = {1, 2, 3, 4}, b_values[4] = {10, 20, 30, 40};
  const int64_t shape[2] = {2, 2};
  SluiceTensor *a = NULL, *b = NULL, *sum = NULL, *scaled = NULL;
  CHECK(
      sluice_tensor_create(context, SLUICE_F32, shape, 2, a_values, sizeof a_values, "sim:0", &a));
  CHECK(
      sluice_tensor_create(context, SLUICE_F32, shape, 2, b_values, sizeof b_values, "sim:0", &b));
  const SluiceTensor* add_inputs[2] = {a, b};
  size_t outputs = 0;
  CHECK(sluice_op_call(context, "add", add_inputs, NULL, 2, NULL, NULL, &sum, 1, &outputs));
  SluiceAttrs* attrs = NULL;
  CHECK(sluice_attrs_create(&attrs));
  CHECK(sluice_attrs_set_float(attrs, "scale", 2.0));
  CHECK(sluice_attrs_set_float(attrs, "bias", 1.0));
  const SluiceTensor* scale_inputs[1] = {sum};
  CHECK(sluice_op_call(context, "scale", scale_inputs, NULL, 1, attrs, NULL, &scaled, 1, &outputs));
  float result[4];
  CHECK(sluice_tensor_read(scaled, result, sizeof result));
  const char* device = NULL;
  CHECK(sluice_tensor_device(scaled, &device));
  printf("scale(a + b, 2, 1) on %s = [%g, %g, %g, %g]\n", device, result[0], result[1], result[2],
         result[3]);
  sluice_attrs_release(attrs);
  sluice_tensor_release(scaled);
  sluice_tensor_release(sum);
  sluice_tensor_release(b);
  sluice_tensor_release(a);
}

/* Trains the linear regression program for `steps` steps on a batch made here; 1 when the
 * loss fell every step. */
static int Train(SluiceContext* context, const char* dir, int steps) {
  char path[4096];
  SluiceProgram *main_program = NULL, *startup = NULL;
  snprintf(path, sizeof path, "%s/main.program", dir);
  CHECK(sluice_program_load(path, &main_program));
  snprintf(path, sizeof path, "%s/startup.program", dir);
  CHECK(sluice_program_load(path, &startup));

  SluiceExecutorOptions* options = NULL;
  CHECK(sluice_executor_options_create(&options));
  CHECK(sluice_executor_options_set_device(options, "cpu"));
  SluiceExecutor* executor = NULL;
  CHECK(sluice_executor_create(context, options, &executor));
  sluice_executor_options_release(options);
  CHECK(sluice_executor_run(executor, startup, NULL, NULL, 0, NULL, 0, NULL));

  /* x: 16x16 in [-1, 1]; y = x . w + 0.5 with w_i = (i - 8) / 8. */
  float x[16 * 16], y[16];
  for (int r = 0; r < 16; ++r) {
    y[r] = 0.5f;
    for (int c = 0; c < 16; ++c) {
      x[r * 16 + c] = (float)((r * 7 + c * 3) % 17) / 8.0f - 1.0f;
      y[r] += x[r * 16 + c] * (float)(c - 8) / 8.0f;
    }
  }
  const int64_t x_shape[2] = {16, 16}, y_shape[2] = {16, 1};
  const char* feed_names[2] = {"x", "y"};
  const SluiceHostBuffer feeds[2] = {{SLUICE_F32, x_shape, 2, x, sizeof x},
                                     {SLUICE_F32, y_shape, 2, y, sizeof y}};
  const char* fetch_names[1] = {"reduce_mean_0.out"};
  float previous = 0;
  int falling = 1;
  for (int step = 1; step <= steps; ++step) {
    SluiceRunResult* result = NULL;
    CHECK(
        sluice_executor_run(executor, main_program, feed_names, feeds, 2, fetch_names, 1, &result));
    const void* data = NULL;
    size_t bytes = 0;
    CHECK(sluice_run_result_fetch(result, 0, NULL, NULL, NULL, &data, &bytes));
    float loss = 0;
    if (bytes == sizeof loss) memcpy(&loss, data, sizeof loss);
    sluice_run_result_release(result);
    printf("step %d  loss %.6f\n", step, loss);
    if (step > 1 && !(loss < previous)) falling = 0;
    previous = loss;
  }
  sluice_executor_release(executor);
  sluice_program_release(startup);
  sluice_program_release(main_program);
  return falling;
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "examples/linear_regression";
  if (sluice_api_version() < SLUICE_C_API_VERSION) {
    fprintf(stderr, "libsluice_c has API version %d, older than %d\n", sluice_api_version(),
            SLUICE_C_API_VERSION);
    return 1;
  }
  SluiceContextOptions* options = NULL;
  CHECK(sluice_context_options_create(&options));
  CHECK(sluice_context_options_set_sim_devices(options, 1));
  CHECK(sluice_context_options_set_check_sync(options, 1));
  SluiceContext* context = NULL;
  CHECK(sluice_context_create(options, &context));
  sluice_context_options_release(options);

  EagerOps(context);
  const int falling = Train(context, dir, 5);
  int64_t sync_errors = 0;
  CHECK(sluice_context_sync_errors(context, &sync_errors));
  sluice_context_release(context);
  printf("loss %s every step; %lld sync errors\n", falling ? "fell" : "did NOT fall",
         (long long)sync_errors);
  return falling && sync_errors == 0 ? 0 : 1;
}
