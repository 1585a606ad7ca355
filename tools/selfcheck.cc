#include "tools/selfcheck.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "ep/cuda/cuda_device.h"
#include "ep/runtime.h"
#include "tools/options.h"

namespace sluice::tools {
namespace {

struct SelfcheckOptions {
  int sim_devices = 2;
  int jitter_us = 0;
  uint64_t seed = 1;
  int iterations = 200;
  int64_t elements = 4096;
};

struct DeviceReport {
  std::string device;
  int iterations = 0;
  double median_us = 0;
  int64_t events_created = 0;
  int64_t events_reused = 0;
  AllocatorStats allocator;
  absl::Status status;
};

void DeclareOptions(OptionParser& parser, SelfcheckOptions* o) {
  parser.AddInteger("--sim-devices", "N", "number of sim devices", 0, ep::Runtime::kMaxSimDevices,
                    &o->sim_devices);
  parser.AddInteger("--jitter-us", "J", "random delay of up to J us before each sim work item", 0,
                    INT_MAX, &o->jitter_us);
  parser.AddInteger<uint64_t>("--seed", "S", "seed of the sim delays", 0, UINT64_MAX, &o->seed);
  parser.AddInteger("--iterations", "K", "round trips per device", 0, INT_MAX, &o->iterations);
  parser.AddInteger<int64_t>("--elements", "E", "floats per round trip", 1, INT64_MAX,
                             &o->elements);
}

// One device's round trips. Buffers are released before returning, whatever happens.
absl::Status CheckDevice(ep::Device* device, const SelfcheckOptions& options,
                         DeviceReport* report) {
  SLUICE_ASSIGN_OR_RETURN(ep::Stream * h2d, device->GetStream(StreamType::kHost2Device));
  SLUICE_ASSIGN_OR_RETURN(ep::Stream * compute, device->GetStream(StreamType::kCompute));
  SLUICE_ASSIGN_OR_RETURN(ep::Stream * d2h, device->GetStream(StreamType::kDevice2Host));
  const size_t bytes = static_cast<size_t>(options.elements) * sizeof(float);

  RawAllocator& pinned = device->pinned_memory();
  SLUICE_ASSIGN_OR_RETURN(void* host_in, pinned.Allocate(bytes));
  auto free_in = [&] { pinned.Free(host_in, bytes); };
  absl::StatusOr<void*> host_out = pinned.Allocate(bytes);
  if (!host_out.ok()) {
    free_in();
    return host_out.status();
  }
  Allocator& allocator = device->allocator();
  absl::StatusOr<void*> a = allocator.Allocate(bytes, h2d->id());
  absl::StatusOr<void*> b = allocator.Allocate(bytes, compute->id());

  absl::Status status = a.status();
  status.Update(b.status());
  std::atomic<int> tasks_run{0};
  std::vector<double> micros;
  float* in = static_cast<float*>(host_in);
  float* out = static_cast<float*>(*host_out);
  for (int k = 0; status.ok() && k < options.iterations; ++k) {
    for (int64_t i = 0; i < options.elements; ++i) in[i] = static_cast<float>(k * 7 + i);
    std::memset(out, 0, bytes);
    const auto start = std::chrono::steady_clock::now();
    auto round_trip = [&]() -> absl::Status {
      SLUICE_ASSIGN_OR_RETURN(ep::PooledEvent copied, device->event_pool().Borrow());
      SLUICE_ASSIGN_OR_RETURN(ep::PooledEvent computed, device->event_pool().Borrow());
      SLUICE_RETURN_IF_ERROR(h2d->Memcpy(*a, in, bytes, ep::CopyKind::kHostToDevice));
      SLUICE_RETURN_IF_ERROR(h2d->RecordEvent(copied.get()));
      SLUICE_RETURN_IF_ERROR(compute->WaitEvent(copied.get()));
      SLUICE_RETURN_IF_ERROR(compute->Memcpy(*b, *a, bytes, ep::CopyKind::kDeviceToDevice));
      SLUICE_RETURN_IF_ERROR(compute->Launch([&tasks_run]() -> absl::Status {
        tasks_run.fetch_add(1, std::memory_order_relaxed);
        return absl::OkStatus();
      }));
      SLUICE_RETURN_IF_ERROR(compute->RecordEvent(computed.get()));
      SLUICE_RETURN_IF_ERROR(d2h->WaitEvent(computed.get()));
      SLUICE_RETURN_IF_ERROR(d2h->Memcpy(out, *b, bytes, ep::CopyKind::kDeviceToHost));
      // Every wait is enqueued: the events may go back to the pool before the work is done.
      return d2h->Sync();
    };
    status = round_trip();
    micros.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
    if (status.ok() && std::memcmp(in, out, bytes) != 0) {
      status = absl::DataLossError(absl::StrFormat("round trip %d on %s returned different numbers",
                                                   k, device->id().ToString()));
    }
  }
  status.Update(device->Synchronize());
  if (status.ok() && tasks_run.load() != options.iterations) {
    status = absl::InternalError(
        absl::StrFormat("%d of %d host tasks ran", tasks_run.load(), options.iterations));
  }
  if (a.ok()) allocator.Deallocate(*a);
  if (b.ok()) allocator.Deallocate(*b);
  pinned.Free(*host_out, bytes);
  free_in();

  report->iterations = static_cast<int>(micros.size());
  if (!micros.empty()) {
    std::sort(micros.begin(), micros.end());
    report->median_us = micros[micros.size() / 2];
  }
  report->events_created = device->event_pool().created();
  report->events_reused = device->event_pool().reused();
  report->allocator = device->caching_allocator().stats();
  return status;
}

}  // namespace

int SelfCheckMain(int argc, char** argv) {
  SelfcheckOptions options;
  OptionParser parser(
      "selfcheck",
      "For every device of every provider: K times, copy E floats host-to-device on\n"
      "the h2d stream, copy them device-to-device on the compute stream after a\n"
      "device-side wait, run a host task there, copy back on the d2h stream after a\n"
      "second wait, and check the numbers. Events come from each device's pool.\n",
      "Exit status: 0 when every device passed, 1 otherwise, 2 for bad options.\n");
  DeclareOptions(parser, &options);
  if (std::optional<int> exit = ParseCommandLine(parser, argc, argv)) return *exit;
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = options.sim_devices;
  runtime_options.sim.max_jitter_us = options.jitter_us;
  runtime_options.sim.seed = options.seed;
  absl::StatusOr<std::unique_ptr<ep::Runtime>> runtime = ep::Runtime::Create(runtime_options);
  if (!runtime.ok()) return ReportFailure("selfcheck", runtime.status());

  std::printf("sluice selfcheck: %d round trips of %lld floats per device\n\n", options.iterations,
              static_cast<long long>(options.elements));
  std::printf("%-8s %-6s %11s %14s %16s %14s  %s\n", "device", "async", "round trips",
              "median (us)", "events new/reuse", "cache hits", "result");
  int failures = 0;
  for (ep::Device* device : (*runtime)->devices()) {
    DeviceReport report;
    report.device = device->id().ToString();
    report.status = CheckDevice(device, options, &report);
    if (!report.status.ok()) ++failures;
    std::printf("%-8s %-6s %11d %14.1f %7lld/%-8lld %14lld  %s\n", report.device.c_str(),
                device->IsAsync() ? "yes" : "no", report.iterations, report.median_us,
                static_cast<long long>(report.events_created),
                static_cast<long long>(report.events_reused),
                static_cast<long long>(report.allocator.num_cache_hits),
                report.status.ok() ? "PASS" : std::string(report.status.ToString()).c_str());
  }
  if (ep::CudaDeviceCount() == 0) {
    std::printf("%-8s %s\n", "cuda",
                ep::CudaProviderBuilt() ? "provider built; no CUDA device found (skipped)"
                                        : "provider not built (no CUDA toolkit)");
  }
  std::printf("\n%s: %zu device(s), %d failed\n", failures == 0 ? "PASS" : "FAIL",
              (*runtime)->devices().size(), failures);
  return failures == 0 ? kExitOk : kExitFailure;
}

}  // namespace sluice::tools
