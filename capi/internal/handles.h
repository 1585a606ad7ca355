// What the C API's opaque handles are, and the one wrapper every entry point runs its body
// through (Guard): it turns a returned absl::Status into a SluiceStatus* and any exception
// into one, so none crosses the C boundary.
#ifndef SLUICE_CAPI_INTERNAL_HANDLES_H_
#define SLUICE_CAPI_INTERNAL_HANDLES_H_

#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "capi/sluice_c_api.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "vm/attrs.h"

struct SluiceStatus {
  absl::StatusCode code;
  std::string message;
};

struct SluiceContextOptions {
  sluice::eager::ContextOptions options;
};

struct SluiceContext {
  sluice::eager::Context context;
};

struct SluiceTensor {
  sluice::eager::Tensor tensor;
  std::string device;  // tensor.device() as text, for sluice_tensor_device
};

struct SluiceAttrs {
  sluice::vm::AttrMap attrs;
};

struct SluiceProgram {
  sluice::framework::ir::ProgramDesc program;
  // An imported ONNX model's initializers: written into an executor's scope by the first run
  // that finds them missing there.
  std::vector<std::pair<std::string, sluice::framework::HostTensor>> initial_values;
  // ONNX value name -> variable, for the feeds and fetches that an ONNX model names
  // differently from its variables (characters the program format cannot hold).
  std::vector<std::pair<std::string, std::string>> aliases;
};

struct SluiceExecutorOptions {
  sluice::framework::ExecutorOptions options;
};

// The context comes first: it holds the VM that the executor and the scope's blobs need,
// so it is destroyed last.
struct SluiceExecutor {
  sluice::eager::Context context;
  std::unique_ptr<sluice::framework::Executor> executor;
  sluice::framework::Scope scope;
};

// The fetches in fetch order: host ones as bytes; device-resident ones (entries with only a
// dtype and shape there) as tensors, at the same index of `device_tensors`.
struct SluiceRunResult {
  std::vector<sluice::framework::HostTensor> fetches;
  std::vector<sluice::eager::Tensor> device_tensors;  // empty, or one per fetch
};

namespace sluice::capi {

// The status returned when a status cannot be allocated; static, never freed.
SluiceStatus* OutOfMemoryStatus() noexcept;

// A new status, or nullptr for OK. Never throws: an allocation failure returns a static
// ResourceExhausted status, which sluice_status_release knows not to free.
SluiceStatus* ToC(const absl::Status& status);

// Runs `body` (returning absl::Status); its status as a SluiceStatus*, nullptr for OK. An
// exception becomes Internal naming `function` (ResourceExhausted for std::bad_alloc).
template <typename Body>
SluiceStatus* Guard(const char* function, Body&& body) noexcept {
  try {
    return ToC(body());
  } catch (const std::bad_alloc&) {
    return ToC(absl::ResourceExhaustedError(absl::StrCat(function, ": out of memory")));
  } catch (const std::exception& e) {
    return ToC(absl::InternalError(absl::StrCat(function, ": ", e.what())));
  } catch (...) {
    return ToC(absl::InternalError(absl::StrCat(function, ": unknown exception")));
  }
}

// InvalidArgument "FUNCTION: PARAMETER is NULL" unless `pointer` is set.
absl::Status NotNull(const void* pointer, const char* function, const char* parameter);

// A DataType from the C enum; InvalidArgument naming `function` for a value outside it.
absl::StatusOr<DataType> ToDataType(SluiceDataType dtype, const char* function);

// A Device from "cpu", "sim:N" or "cuda:N"; InvalidArgument naming `function` and
// `parameter` for a NULL or unknown string.
absl::StatusOr<Device> ParseDevice(const char* text, const char* function, const char* parameter);

// A Shape of `rank` dims (NULL only when rank is 0); InvalidArgument for a negative dim.
absl::StatusOr<Shape> ToShape(const int64_t* dims, size_t rank, const char* function,
                              const char* parameter);

// InvalidArgument unless `byte_size` is exactly dtype x shape's size.
absl::Status CheckByteSize(DataType dtype, const Shape& shape, size_t byte_size,
                           const char* function, const char* parameter);

// A new tensor handle over `tensor`.
SluiceTensor* NewTensor(eager::Tensor tensor);

// Copies `text` into `out` (`capacity` bytes), truncated and always terminated.
void CopyText(const std::string& text, char* out, size_t capacity);

}  // namespace sluice::capi

#endif  // SLUICE_CAPI_INTERNAL_HANDLES_H_
