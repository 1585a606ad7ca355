// Test-only: the demo model (framework/models/linear_regression) in a fresh eager context,
// with an executor that places it on a device over some compute streams, a scope for its
// parameters and the feeds of its fixed batch.
#ifndef SLUICE_TESTS_FRAMEWORK_DEMO_TEST_UTIL_H_
#define SLUICE_TESTS_FRAMEWORK_DEMO_TEST_UTIL_H_

#include "core/device.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/models/linear_regression.h"

namespace sluice::framework {

// Members are built in order: the executor uses the context's registry and VM.
struct DemoSetup {
  // `context_options` as given, cuda off.
  DemoSetup(eager::ContextOptions context_options, Device device, int streams)
      : context(eager::Context::Create(WithoutCuda(std::move(context_options))).value()),
        model(BuildLinearRegression(&context.registry()).value()),
        executor(&context.registry(), context.vm(), Options(device, streams)) {}

  Feeds feeds() const {
    return {{model.x, LinearRegressionInput()}, {model.y, LinearRegressionTarget()}};
  }

  eager::Context context;
  LinearRegression model;
  Executor executor;
  Scope scope;

 private:
  static eager::ContextOptions WithoutCuda(eager::ContextOptions options) {
    options.runtime.enable_cuda = false;
    return options;
  }
  static ExecutorOptions Options(Device device, int streams) {
    ExecutorOptions options;
    options.interpreter.device = device;
    options.interpreter.compute_streams = streams;
    return options;
  }
};

}  // namespace sluice::framework

#endif  // SLUICE_TESTS_FRAMEWORK_DEMO_TEST_UTIL_H_
