// A Runtime for ep benchmarks: cpu and one sim device, no CUDA, no jitter.
#ifndef SLUICE_BENCH_EP_BENCH_RUNTIME_H_
#define SLUICE_BENCH_EP_BENCH_RUNTIME_H_

#include <memory>

#include "core/status.h"
#include "ep/runtime.h"

namespace sluice::ep {

inline std::unique_ptr<Runtime> MakeBenchRuntime() {
  RuntimeOptions options;
  options.num_sim_devices = 1;
  options.enable_cuda = false;
  auto runtime = Runtime::Create(options);
  SLUICE_CHECK(runtime.ok());
  return *std::move(runtime);
}

}  // namespace sluice::ep

#endif  // SLUICE_BENCH_EP_BENCH_RUNTIME_H_
