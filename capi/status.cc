// The status functions, the API version, and the conversions every other file uses.
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "capi/internal/handles.h"
#include "capi/sluice_c_api.h"

namespace sluice::capi {

SluiceStatus* OutOfMemoryStatus() noexcept {
  // Built on first use, before any allocation can have failed for it: the message fits the
  // string's inline buffer.
  static SluiceStatus status{absl::StatusCode::kResourceExhausted, "out of memory"};
  return &status;
}

SluiceStatus* ToC(const absl::Status& status) {
  if (status.ok()) return nullptr;
  try {
    std::string message(status.message());
    if (message.empty()) message = absl::StatusCodeToString(status.code());
    return new SluiceStatus{status.code(), std::move(message)};
  } catch (...) {
    return OutOfMemoryStatus();
  }
}

absl::Status NotNull(const void* pointer, const char* function, const char* parameter) {
  if (pointer != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(function, ": ", parameter, " is NULL"));
}

absl::StatusOr<DataType> ToDataType(SluiceDataType dtype, const char* function) {
  const int value = static_cast<int>(dtype);
  if (value < 0 || value >= kNumDataTypes) {
    return absl::InvalidArgumentError(absl::StrCat(
        function, ": dtype ", value, " is not a SluiceDataType (0 to ", kNumDataTypes - 1, ")"));
  }
  return static_cast<DataType>(value);
}

absl::StatusOr<Device> ParseDevice(const char* text, const char* function, const char* parameter) {
  if (absl::Status status = NotNull(text, function, parameter); !status.ok()) return status;
  absl::StatusOr<Device> device = Device::Parse(text);
  if (!device.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(function, ": ", parameter, ": ", device.status().message()));
  }
  return device;
}

absl::StatusOr<Shape> ToShape(const int64_t* dims, size_t rank, const char* function,
                              const char* parameter) {
  if (rank > 0 && dims == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(function, ": ", parameter, " is NULL with rank ", rank));
  }
  std::vector<int64_t> values(dims, dims + rank);
  for (size_t i = 0; i < rank; ++i) {
    if (values[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(function, ": ", parameter, "[", i, "] is negative (", values[i], ")"));
    }
  }
  return Shape(std::move(values));
}

absl::Status CheckByteSize(DataType dtype, const Shape& shape, size_t byte_size,
                           const char* function, const char* parameter) {
  const size_t want = static_cast<size_t>(shape.NumElements()) * SizeOf(dtype);
  if (byte_size == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(function, ": ", parameter, " is ", byte_size,
                                                 " bytes; ", DataTypeName(dtype), shape.ToString(),
                                                 " needs ", want));
}

SluiceTensor* NewTensor(eager::Tensor tensor) {
  std::string device = tensor.device().ToString();
  return new SluiceTensor{std::move(tensor), std::move(device)};
}

void CopyText(const std::string& text, char* out, size_t capacity) {
  if (capacity == 0) return;
  const size_t n = text.size() < capacity - 1 ? text.size() : capacity - 1;
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace sluice::capi

extern "C" {

SluiceStatusCode sluice_status_code(const SluiceStatus* status) {
  return status == nullptr ? SLUICE_OK : static_cast<SluiceStatusCode>(status->code);
}

const char* sluice_status_message(const SluiceStatus* status) {
  return status == nullptr ? "" : status->message.c_str();
}

void sluice_status_release(SluiceStatus* status) {
  if (status == nullptr || status == sluice::capi::OutOfMemoryStatus()) return;
  delete status;
}

int sluice_api_version(void) { return SLUICE_C_API_VERSION; }

size_t sluice_dtype_size(SluiceDataType dtype) {
  const int value = static_cast<int>(dtype);
  if (value < 0 || value >= sluice::kNumDataTypes) return 0;
  return sluice::SizeOf(static_cast<sluice::DataType>(value));
}

}  // extern "C"
