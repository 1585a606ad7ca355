#include "core/tensor_storage.h"

#include <cstdint>
#include <limits>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice {

namespace {

// The checked shape and byte size of a dtype x shape tensor.
absl::StatusOr<std::pair<Shape, size_t>> CheckedSize(DataType dtype, Shape checked) {
  SLUICE_RETURN_IF_ERROR(Shape::Check(checked.dims()));
  const size_t element_size = SizeOf(dtype);
  if (static_cast<uint64_t>(checked.NumElements()) >
      std::numeric_limits<size_t>::max() / element_size) {
    return absl::InvalidArgumentError(absl::StrCat("a ", DataTypeName(dtype), " tensor of shape ",
                                                   checked.ToString(), " does not fit in memory"));
  }
  const size_t bytes = static_cast<size_t>(checked.NumElements()) * element_size;
  return std::make_pair(std::move(checked), bytes);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorStorage>> TensorStorage::Allocate(Allocator* allocator,
                                                                       Device device,
                                                                       DataType dtype, Shape shape,
                                                                       StreamId stream) {
  SLUICE_ASSIGN_OR_RETURN(auto checked, CheckedSize(dtype, std::move(shape)));
  SLUICE_ASSIGN_OR_RETURN(void* data, allocator->Allocate(checked.second, stream));
  return std::unique_ptr<TensorStorage>(new TensorStorage(allocator, data, checked.second, device,
                                                          dtype, std::move(checked.first), stream));
}

absl::StatusOr<TensorStorage*> TensorStorage::AllocateAt(void* space, Allocator* allocator,
                                                         Device device, DataType dtype, Shape shape,
                                                         StreamId stream) {
  SLUICE_ASSIGN_OR_RETURN(auto checked, CheckedSize(dtype, std::move(shape)));
  SLUICE_ASSIGN_OR_RETURN(void* data, allocator->Allocate(checked.second, stream));
  return new (space) TensorStorage(allocator, data, checked.second, device, dtype,
                                   std::move(checked.first), stream);
}

TensorStorage::TensorStorage(Allocator* allocator, void* data, size_t bytes, Device device,
                             DataType dtype, Shape shape, StreamId stream)
    : allocator_(allocator),
      data_(data),
      bytes_(bytes),
      device_(device),
      dtype_(dtype),
      shape_(std::move(shape)),
      alloc_stream_(stream),
      last_used_stream_(stream) {}

TensorStorage::~TensorStorage() { allocator_->Deallocate(data_); }

void TensorStorage::set_last_used_stream(StreamId stream) {
  // Mostly the same stream again: no store, so the line stays shared with the workers that
  // read data() instead of moving to the producer's core on every op.
  if (stream == last_used_stream_) return;
  if (stream != alloc_stream_) allocator_->RecordStream(data_, stream);
  last_used_stream_ = stream;
}

}  // namespace sluice
