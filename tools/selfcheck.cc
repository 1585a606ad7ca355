#include "tools/selfcheck.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "ep/cuda/cuda_device.h"
#include "ep/runtime.h"

namespace sluice::tools {
namespace {

struct Options {
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

void PrintHelp(FILE* out) {
  std::fprintf(
      out,
      "usage: sluice selfcheck [--sim-devices N] [--jitter-us J] [--seed S]\n"
      "                        [--iterations K] [--elements E]\n"
      "\n"
      "For every device of every provider: K times, copy E floats host-to-device on\n"
      "the h2d stream, copy them device-to-device on the compute stream after a\n"
      "device-side wait, run a host task there, copy back on the d2h stream after a\n"
      "second wait, and check the numbers. Events come from each device's pool.\n"
      "\n"
      "  --sim-devices N  number of sim devices (default 2)\n"
      "  --jitter-us J    random delay of up to J us before each sim work item (default 0)\n"
      "  --seed S         seed of the sim delays (default 1)\n"
      "  --iterations K   round trips per device (default 200)\n"
      "  --elements E     floats per round trip (default 4096)\n");
}

absl::Status ParseOptions(int argc, char** argv, Options* options, bool* help) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return absl::OkStatus();
    }
    auto value = [&](auto* out) -> absl::Status {
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(absl::StrFormat("%s needs a value", arg));
      const char* text = argv[++i];
      if (!absl::SimpleAtoi(text, out) || *out < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: '%s' is not a non-negative integer", arg, text));
      }
      return absl::OkStatus();
    };
    if (arg == "--sim-devices") {
      SLUICE_RETURN_IF_ERROR(value(&options->sim_devices));
    } else if (arg == "--jitter-us") {
      SLUICE_RETURN_IF_ERROR(value(&options->jitter_us));
    } else if (arg == "--seed") {
      SLUICE_RETURN_IF_ERROR(value(&options->seed));
    } else if (arg == "--iterations") {
      SLUICE_RETURN_IF_ERROR(value(&options->iterations));
    } else if (arg == "--elements") {
      SLUICE_RETURN_IF_ERROR(value(&options->elements));
      if (options->elements == 0) return absl::InvalidArgumentError("--elements must be > 0");
    } else {
      return absl::InvalidArgumentError(absl::StrFormat("unknown option '%s'", arg));
    }
  }
  return absl::OkStatus();
}

// One device's round trips. Buffers are released before returning, whatever happens.
absl::Status CheckDevice(ep::Device* device, const Options& options, DeviceReport* report) {
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
  Options options;
  bool help = false;
  if (absl::Status s = ParseOptions(argc, argv, &options, &help); !s.ok()) {
    std::fprintf(stderr, "sluice selfcheck: %s\n\n", std::string(s.message()).c_str());
    PrintHelp(stderr);
    return 2;
  }
  if (help) {
    PrintHelp(stdout);
    return 0;
  }
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = options.sim_devices;
  runtime_options.sim.max_jitter_us = options.jitter_us;
  runtime_options.sim.seed = options.seed;
  absl::StatusOr<std::unique_ptr<ep::Runtime>> runtime = ep::Runtime::Create(runtime_options);
  if (!runtime.ok()) {
    std::fprintf(stderr, "sluice selfcheck: %s\n", std::string(runtime.status().message()).c_str());
    return 2;
  }

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
  return failures == 0 ? 0 : 1;
}

}  // namespace sluice::tools
