// HostTensor: a tensor's bytes in host memory — what feeds carry in and fetches carry out of
// a run, and what `.npy` files hold. Value type.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_HOST_TENSOR_H_
#define SLUICE_FRAMEWORK_INTERPRETER_HOST_TENSOR_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/data_type.h"
#include "core/shape.h"

namespace sluice::framework {

struct HostTensor {
  DataType dtype = DataType::kF32;
  Shape shape;
  std::vector<uint8_t> bytes;  // NumElements(shape) * SizeOf(dtype), row-major

  template <typename T>
  static HostTensor FromVector(const std::vector<T>& values, Shape shape) {
    HostTensor t{DataTypeOf<T>(), std::move(shape), {}};
    t.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
  }
  // The values as T; T must match dtype (no conversion).
  template <typename T>
  std::vector<T> ToVector() const {
    std::vector<T> values(bytes.size() / sizeof(T));
    if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
    return values;
  }
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_HOST_TENSOR_H_
