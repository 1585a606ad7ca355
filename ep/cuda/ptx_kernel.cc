// PtxKernel over the CUDA driver API, reached through the runtime's driver entry points (no
// link against libcuda). Compiled only with the CUDA toolkit; ptx_kernel_stub.cc otherwise.
#include "ep/cuda/ptx_kernel.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::ep {
namespace {

// The driver functions a PtxKernel calls, with the prototypes of the cuda.h it was built with.
struct DriverApi {
  decltype(&cuInit) init = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&cuCtxPushCurrent) ctx_push = nullptr;
  decltype(&cuCtxPopCurrent) ctx_pop = nullptr;
  decltype(&cuModuleLoadData) module_load_data = nullptr;
  decltype(&cuModuleGetFunction) module_get_function = nullptr;
  decltype(&cuModuleUnload) module_unload = nullptr;
  decltype(&cuLaunchKernel) launch_kernel = nullptr;
  decltype(&cuGetErrorString) get_error_string = nullptr;
};

// Looks up `symbol` in the driver at the ABI version of the headers Sluice was built with.
template <typename Fn>
absl::Status Resolve(const char* symbol, Fn* fn) {
  void* address = nullptr;
#if CUDART_VERSION >= 12050
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t error =
      cudaGetDriverEntryPointByVersion(symbol, &address, CUDART_VERSION, cudaEnableDefault, &found);
#else
  const cudaError_t error = cudaGetDriverEntryPoint(symbol, &address, cudaEnableDefault);
#endif
  if (error != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the CUDA driver is not available (no driver or no GPU): ", cudaGetErrorString(error)));
  }
  if (address == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA driver has no ", symbol, " for CUDA ", CUDART_VERSION));
  }
  *fn = reinterpret_cast<Fn>(address);
  return absl::OkStatus();
}

absl::StatusOr<DriverApi> ResolveDriverApi() {
  DriverApi api;
  for (absl::Status status : {
           Resolve("cuInit", &api.init),
           Resolve("cuDeviceGet", &api.device_get),
           Resolve("cuDevicePrimaryCtxRetain", &api.primary_ctx_retain),
           Resolve("cuDevicePrimaryCtxRelease", &api.primary_ctx_release),
           Resolve("cuCtxPushCurrent", &api.ctx_push),
           Resolve("cuCtxPopCurrent", &api.ctx_pop),
           Resolve("cuModuleLoadData", &api.module_load_data),
           Resolve("cuModuleGetFunction", &api.module_get_function),
           Resolve("cuModuleUnload", &api.module_unload),
           Resolve("cuLaunchKernel", &api.launch_kernel),
           Resolve("cuGetErrorString", &api.get_error_string),
       }) {
    SLUICE_RETURN_IF_ERROR(status);
  }
  return api;
}

std::string ErrorText(const DriverApi& api, CUresult result) {
  const char* text = nullptr;
  if (api.get_error_string(result, &text) != CUDA_SUCCESS || text == nullptr) {
    return absl::StrCat("CUDA driver error ", static_cast<int>(result));
  }
  return text;
}

absl::Status DriverError(const DriverApi& api, CUresult result, absl::string_view call,
                         absl::StatusCode code = absl::StatusCode::kInternal) {
  return absl::Status(code, absl::StrCat(call, " failed: ", ErrorText(api, result)));
}

// Makes a context current on this thread for its lifetime (push / pop).
class ScopedContext {
 public:
  ScopedContext(const DriverApi& api, CUcontext context)
      : api_(api), result_(api.ctx_push(context)) {}
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  ~ScopedContext() {
    CUcontext popped = nullptr;
    if (result_ == CUDA_SUCCESS) api_.ctx_pop(&popped);
  }
  CUresult result() const { return result_; }

 private:
  const DriverApi& api_;
  const CUresult result_;
};

class DriverPtxKernel final : public PtxKernel {
 public:
  // Takes over one reference to `device`'s primary context.
  DriverPtxKernel(const DriverApi& api, CUdevice device, CUcontext context, std::string entry)
      : api_(api), device_(device), context_(context), entry_(std::move(entry)) {}
  ~DriverPtxKernel() override {
    if (module_ != nullptr) {
      ScopedContext scope(api_, context_);
      if (scope.result() == CUDA_SUCCESS) api_.module_unload(module_);
    }
    api_.primary_ctx_release(device_);
  }

  // Loads the module and finds the entry point; called once, before the kernel is shared.
  absl::Status Load(const std::string& ptx) {
    ScopedContext scope(api_, context_);
    if (scope.result() != CUDA_SUCCESS)
      return DriverError(api_, scope.result(), "cuCtxPushCurrent");
    CUresult result = api_.module_load_data(&module_, ptx.c_str());
    if (result != CUDA_SUCCESS) {
      module_ = nullptr;
      const bool bad_ptx = result == CUDA_ERROR_INVALID_PTX || result == CUDA_ERROR_INVALID_IMAGE ||
                           result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
                           result == CUDA_ERROR_INVALID_VALUE;
      return DriverError(
          api_, result, "cuModuleLoadData",
          bad_ptx ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kInternal);
    }
    result = api_.module_get_function(&function_, module_, entry_.c_str());
    if (result == CUDA_ERROR_NOT_FOUND) {
      return absl::NotFoundError(absl::StrCat("the PTX module has no entry point '", entry_, "'"));
    }
    if (result != CUDA_SUCCESS) return DriverError(api_, result, "cuModuleGetFunction");
    return absl::OkStatus();
  }

  const std::string& entry() const override { return entry_; }

  absl::Status Launch(void* stream, unsigned grid_size, unsigned block_size,
                      absl::Span<void* const> args) const override {
    if (grid_size == 0 || block_size == 0) {
      return absl::InvalidArgumentError(absl::StrCat("launch of ", entry_, " with ", grid_size,
                                                     " blocks of ", block_size, " threads"));
    }
    ScopedContext scope(api_, context_);
    if (scope.result() != CUDA_SUCCESS)
      return DriverError(api_, scope.result(), "cuCtxPushCurrent");
    // cuLaunchKernel reads the argument values through these pointers and does not write them.
    void** params = const_cast<void**>(args.data());
    const CUresult result =
        api_.launch_kernel(function_, grid_size, 1, 1, block_size, 1, 1, /*sharedMemBytes=*/0,
                           static_cast<CUstream>(stream), params, /*extra=*/nullptr);
    if (result != CUDA_SUCCESS) {
      return DriverError(api_, result, absl::StrCat("cuLaunchKernel of ", entry_));
    }
    return absl::OkStatus();
  }

 private:
  const DriverApi api_;
  const CUdevice device_;
  const CUcontext context_;
  const std::string entry_;
  CUmodule module_ = nullptr;      // set by Load, then constant
  CUfunction function_ = nullptr;  // set by Load, then constant
};

}  // namespace

absl::StatusOr<std::unique_ptr<PtxKernel>> LoadPtxKernel(int device_index, const std::string& ptx,
                                                         const std::string& entry) {
  SLUICE_ASSIGN_OR_RETURN(const DriverApi api, ResolveDriverApi());
  CUresult result = api.init(0);
  if (result != CUDA_SUCCESS) {
    return DriverError(api, result, "cuInit", absl::StatusCode::kFailedPrecondition);
  }
  CUdevice device = 0;
  result = api.device_get(&device, device_index);
  if (result != CUDA_SUCCESS) {
    return DriverError(api, result, absl::StrCat("cuDeviceGet of cuda:", device_index),
                       absl::StatusCode::kFailedPrecondition);
  }
  CUcontext context = nullptr;
  result = api.primary_ctx_retain(&context, device);
  if (result != CUDA_SUCCESS) {
    return DriverError(api, result, "cuDevicePrimaryCtxRetain",
                       absl::StatusCode::kFailedPrecondition);
  }
  auto kernel = std::make_unique<DriverPtxKernel>(api, device, context, entry);
  SLUICE_RETURN_IF_ERROR(kernel->Load(ptx));
  return std::unique_ptr<PtxKernel>(std::move(kernel));
}

}  // namespace sluice::ep
