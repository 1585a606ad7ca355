// Tensors: from and to host buffers, copies across devices, dtype, shape and device.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "capi/internal/handles.h"
#include "capi/sluice_c_api.h"
#include "core/status.h"

using sluice::capi::Guard;
using sluice::capi::NotNull;

extern "C" {

SluiceStatus* sluice_tensor_create(SluiceContext* context, SluiceDataType dtype,
                                   const int64_t* shape, size_t rank, const void* data,
                                   size_t byte_size, const char* device, SluiceTensor** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(context, fn, "context"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    SLUICE_ASSIGN_OR_RETURN(const sluice::DataType type, sluice::capi::ToDataType(dtype, fn));
    SLUICE_ASSIGN_OR_RETURN(const sluice::Shape dims,
                            sluice::capi::ToShape(shape, rank, fn, "shape"));
    SLUICE_RETURN_IF_ERROR(sluice::capi::CheckByteSize(type, dims, byte_size, fn, "byte_size"));
    if (byte_size > 0) SLUICE_RETURN_IF_ERROR(NotNull(data, fn, "data"));
    sluice::Device where = context->context.default_device();
    if (device != nullptr) {
      SLUICE_ASSIGN_OR_RETURN(where, sluice::capi::ParseDevice(device, fn, "device"));
    }
    SLUICE_ASSIGN_OR_RETURN(
        sluice::eager::Tensor tensor,
        context->context.FromBytes(
            type, dims, absl::MakeConstSpan(static_cast<const uint8_t*>(data), byte_size), where));
    *out = sluice::capi::NewTensor(std::move(tensor));
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_tensor_share(const SluiceTensor* tensor, SluiceTensor** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(tensor, fn, "tensor"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    *out = new SluiceTensor{tensor->tensor, tensor->device};
    return absl::OkStatus();
  });
}

void sluice_tensor_release(SluiceTensor* tensor) {
  Guard(__func__, [&, fn = __func__] {
    delete tensor;
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_tensor_read(const SluiceTensor* tensor, void* data, size_t byte_size) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(tensor, fn, "tensor"));
    const sluice::eager::Tensor& t = tensor->tensor;
    SLUICE_RETURN_IF_ERROR(
        sluice::capi::CheckByteSize(t.dtype(), t.shape(), byte_size, fn, "byte_size"));
    if (byte_size > 0) SLUICE_RETURN_IF_ERROR(NotNull(data, fn, "data"));
    SLUICE_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, t.ToBytes());
    if (bytes.size() != byte_size) {
      return absl::InternalError(
          absl::StrCat(fn, ": read ", bytes.size(), " bytes, expected ", byte_size));
    }
    if (byte_size > 0) std::memcpy(data, bytes.data(), byte_size);
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_tensor_to_device(const SluiceTensor* tensor, const char* device,
                                      SluiceTensor** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(tensor, fn, "tensor"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    SLUICE_ASSIGN_OR_RETURN(const sluice::Device where,
                            sluice::capi::ParseDevice(device, fn, "device"));
    SLUICE_ASSIGN_OR_RETURN(sluice::eager::Tensor copy, tensor->tensor.To(where));
    *out = sluice::capi::NewTensor(std::move(copy));
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_tensor_dtype(const SluiceTensor* tensor, SluiceDataType* out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(tensor, fn, "tensor"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    *out = static_cast<SluiceDataType>(tensor->tensor.dtype());
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_tensor_rank(const SluiceTensor* tensor, size_t* out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(tensor, fn, "tensor"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    *out = static_cast<size_t>(tensor->tensor.shape().rank());
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_tensor_shape(const SluiceTensor* tensor, int64_t* dims, size_t capacity) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(tensor, fn, "tensor"));
    const sluice::Shape& shape = tensor->tensor.shape();
    const size_t rank = static_cast<size_t>(shape.rank());
    if (capacity < rank) {
      return absl::OutOfRangeError(
          absl::StrCat(fn, ": capacity ", capacity, " is less than the rank ", rank));
    }
    if (rank > 0) SLUICE_RETURN_IF_ERROR(NotNull(dims, fn, "dims"));
    for (size_t i = 0; i < rank; ++i) dims[i] = shape.dim(static_cast<int>(i));
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_tensor_byte_size(const SluiceTensor* tensor, size_t* out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(tensor, fn, "tensor"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    *out =
        static_cast<size_t>(tensor->tensor.num_elements()) * sluice::SizeOf(tensor->tensor.dtype());
    return absl::OkStatus();
  });
}

SluiceStatus* sluice_tensor_device(const SluiceTensor* tensor, const char** out) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(tensor, fn, "tensor"));
    SLUICE_RETURN_IF_ERROR(NotNull(out, fn, "out"));
    *out = tensor->device.c_str();
    return absl::OkStatus();
  });
}

}  // extern "C"
