// Context options, contexts, sync and shutdown.
#include "absl/strings/str_cat.h"
#include "capi/internal/handles.h"
#include "capi/sluice_c_api.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "vm/sync_checker.h"

using sluice::capi::Guard;
using sluice::capi::NotNull;

extern "C" {

SluiceStatus* sluice_context_options_create(SluiceContextOptions** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    auto* options = new SluiceContextOptions;
    options->options.runtime.enable_cuda = false;  // only when a cuda device is asked for
    *out = options;
    return absl::OkStatus();
  });
}

void sluice_context_options_release(SluiceContextOptions* options) { delete options; }

SluiceStatus* sluice_context_options_set_device(SluiceContextOptions* options, const char* device) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    SLUICE_ASSIGN_OR_RETURN(const sluice::Device parsed,
                            sluice::capi::ParseDevice(device, fn, "device"));
    options->options.default_device = parsed;
    if (parsed.type() == sluice::DeviceType::kCuda) options->options.runtime.enable_cuda = true;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_context_options_set_sim_devices(SluiceContextOptions* options, int32_t count) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    if (count < 0 || count > sluice::ep::Runtime::kMaxSimDevices) {
      return absl::InvalidArgumentError(absl::StrCat(fn, ": count ", count, " is outside 0..",
                                                     sluice::ep::Runtime::kMaxSimDevices));
    }
    options->options.runtime.num_sim_devices = count;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_context_options_set_sim_jitter(SluiceContextOptions* options,
                                                    int32_t max_jitter_us, uint64_t seed) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    if (max_jitter_us < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(fn, ": max_jitter_us ", max_jitter_us, " is negative"));
    }
    options->options.runtime.sim.max_jitter_us = max_jitter_us;
    options->options.runtime.sim.seed = seed;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_context_options_set_record_path(SluiceContextOptions* options,
                                                     const char* path) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    options->options.vm.record_path = path == nullptr ? "" : path;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_context_options_set_check_sync(SluiceContextOptions* options, int enabled) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    options->options.vm.check_sync = enabled != 0;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_context_create(const SluiceContextOptions* options, SluiceContext** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    sluice::eager::ContextOptions context_options;
    if (options != nullptr) {
      context_options = options->options;
    } else {
      context_options.runtime.enable_cuda = false;
    }
    const sluice::Device device = context_options.default_device;
    if (device.type() == sluice::DeviceType::kSim &&
        device.index() >= context_options.runtime.num_sim_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat(fn, ": device ", device.ToString(), " needs ", device.index() + 1,
                       " sim devices; the options have ", context_options.runtime.num_sim_devices));
    }
    SLUICE_ASSIGN_OR_RETURN(sluice::eager::Context context,
                            sluice::eager::Context::Create(context_options));
    *out = new SluiceContext{std::move(context)};
    return absl::OkStatus();
  });
}

void sluice_context_release(SluiceContext* context) {
  sluice::capi::Guard(__func__, [&, fn = __func__] {
    delete context;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_context_sync(SluiceContext* context) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(context, fn, "context"));
    return context->context.Sync();
  });
}

SluiceStatus* sluice_context_shutdown(SluiceContext* context) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(context, fn, "context"));
    return context->context.vm()->Shutdown();
  });
}

SluiceStatus* sluice_context_sync_errors(const SluiceContext* context, int64_t* out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(context, fn, "context"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    const sluice::vm::SyncChecker* checker = context->context.vm()->sync_checker();
    *out = checker == nullptr ? 0 : checker->violation_count();
    return absl::OkStatus();
  });
}

}  // extern "C"
