// eager::Tensor: a handle to a tensor on a device (dtype, shape), created from host data or
// by ops. Copies of a handle share the tensor. When the last handle goes away the storage
// is freed by a Release instruction on the tensor's last used stream: no host blocking.
#ifndef SLUICE_FRAMEWORK_EAGER_TENSOR_H_
#define SLUICE_FRAMEWORK_EAGER_TENSOR_H_

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "vm/blob.h"

namespace sluice::eager {

class Context;
namespace internal {
struct ContextState;
struct OpCalls;
struct TensorAccess;
class TensorState;
}  // namespace internal

// Value type (a shared handle: copies count references to one internal::TensorState).
// Thread-compatible per handle; several threads may hold handles to one tensor and read it
// concurrently.
class Tensor {
 public:
  Tensor() = default;  // an empty handle; every accessor but valid() requires a tensor
  ~Tensor() {
    if (state_ != nullptr) Drop(state_);
  }
  Tensor(const Tensor& other) : state_(other.state_) {
    if (state_ != nullptr) Hold(state_);
  }
  Tensor(Tensor&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  Tensor& operator=(const Tensor& other) {
    if (other.state_ != nullptr) Hold(other.state_);
    internal::TensorState* old = std::exchange(state_, other.state_);
    if (old != nullptr) Drop(old);
    return *this;
  }
  Tensor& operator=(Tensor&& other) noexcept {
    internal::TensorState* old = std::exchange(state_, std::exchange(other.state_, nullptr));
    if (old != nullptr) Drop(old);  // after the exchange: `other` may have been a copy of us
    return *this;
  }

  bool valid() const { return state_ != nullptr; }
  Device device() const;
  DataType dtype() const;
  const Shape& shape() const;
  int64_t num_elements() const { return shape().NumElements(); }

  // A copy on `device` (memcpy_h2d / memcpy_d2h on the copy streams; device to device goes
  // through the host). The same tensor when it is already there.
  absl::StatusOr<Tensor> To(Device device) const;

  // Reads the contents back. Waits only for the work that produces this tensor; returns
  // that work's error if it failed.
  absl::StatusOr<std::vector<uint8_t>> ToBytes() const;
  // Blocks until the work that produces this tensor is done, waking every `poll` to call
  // `interrupt`: when it returns an error, the wait is abandoned and that error returned
  // (the work goes on; a later read waits for it again). Returns the work's error if it
  // failed. For a host language that must handle signals during a long wait; an access
  // instruction per call, so read with ToBytes alone when nothing needs to interrupt. No
  // bytes move, on any device.
  absl::Status WaitUntilReady(absl::FunctionRef<absl::Status()> interrupt,
                              absl::Duration poll = absl::Milliseconds(20)) const;
  template <typename T>
  absl::StatusOr<std::vector<T>> ToVector() const;

  // The context the tensor lives in (a new handle to it).
  Context context() const;
  // The tensor's blob. The reference keeps the tensor — its storage, and its context
  // with the VM — alive: the Release is submitted once the last handle and the last such
  // reference are gone.
  vm::BlobRef blob() const;

 private:
  friend class Context;
  friend struct internal::OpCalls;
  friend struct internal::TensorAccess;
  // Adopts one reference of `state`.
  explicit Tensor(internal::TensorState* state) : state_(state) {}
  static void Hold(internal::TensorState* state);
  static void Drop(internal::TensorState* state);  // may end the tensor (a Release)
  internal::TensorState* state_ = nullptr;
};

template <typename T>
absl::StatusOr<std::vector<T>> Tensor::ToVector() const {
  if (valid() && dtype() != DataTypeOf<T>()) {
    return absl::InvalidArgumentError(absl::StrCat("ToVector<", DataTypeName(DataTypeOf<T>()),
                                                   ">: the tensor is ", DataTypeName(dtype())));
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = ToBytes();
  if (!bytes.ok()) return bytes.status();
  std::vector<T> values(bytes->size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes->data(), bytes->size());
  return values;
}

}  // namespace sluice::eager

#endif  // SLUICE_FRAMEWORK_EAGER_TENSOR_H_
