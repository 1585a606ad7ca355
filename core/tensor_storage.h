// TensorStorage: the bytes of one tensor on one device, with its dtype, shape and the
// stream that last used it (the input to soft sync).
#ifndef SLUICE_CORE_TENSOR_STORAGE_H_
#define SLUICE_CORE_TENSOR_STORAGE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/allocator.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "core/stream_id.h"

namespace sluice {

// Owns its bytes, which return to the allocator on destruction (stream-ordered: work already
// enqueued may still be using them; the allocator orders reuse after it).
// Thread-compatible: the VM mutates last_used_stream from one builder thread at a time.
class TensorStorage {
 public:
  // Allocates NumElements(shape) * SizeOf(dtype) bytes of `allocator` (which serves
  // `device`) for first use on `stream`.
  static absl::StatusOr<std::unique_ptr<TensorStorage>> Allocate(Allocator* allocator,
                                                                 Device device, DataType dtype,
                                                                 Shape shape, StreamId stream);
  // Like Allocate, but builds the storage in `space` (sizeof(TensorStorage) bytes aligned
  // for it) instead of on the heap; the owner ends it with ~TensorStorage. For owners that
  // embed their storage (vm::Blob): freeing it then costs no heap free, often on another
  // thread than the one that allocated it. On error `space` holds nothing.
  static absl::StatusOr<TensorStorage*> AllocateAt(void* space, Allocator* allocator, Device device,
                                                   DataType dtype, Shape shape, StreamId stream);
  ~TensorStorage();
  TensorStorage(const TensorStorage&) = delete;
  TensorStorage& operator=(const TensorStorage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }

  // The allocator the bytes return to (which also tells whose device memory they are).
  Allocator* allocator() const { return allocator_; }
  // The stream the bytes were allocated for.
  StreamId alloc_stream() const { return alloc_stream_; }
  // The stream that most recently used the bytes (the allocating stream at first).
  StreamId last_used_stream() const { return last_used_stream_; }
  // Moves the storage to `stream`; tells the allocator when it is not the allocating stream.
  void set_last_used_stream(StreamId stream);

 private:
  TensorStorage(Allocator* allocator, void* data, size_t bytes, Device device, DataType dtype,
                Shape shape, StreamId stream);

  Allocator* const allocator_;
  void* const data_;
  const size_t bytes_;
  const Device device_;
  const DataType dtype_;
  const Shape shape_;
  const StreamId alloc_stream_;
  StreamId last_used_stream_;
};

}  // namespace sluice

#endif  // SLUICE_CORE_TENSOR_STORAGE_H_
