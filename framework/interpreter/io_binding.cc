#include "framework/interpreter/io_binding.h"

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/status.h"

namespace sluice::framework {
namespace {

// A fetch blob after the run: its error when the run poisoned it, FailedPrecondition when the
// run did not produce it.
absl::Status CheckFetched(const vm::Blob& blob, absl::string_view name) {
  if (blob.poisoned()) return blob.poison();
  if (blob.storage() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("fetch '", name, "' has no value (the run did not produce it)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFeed(absl::string_view name, const HostTensor& value, DataType dtype,
                       const Shape& shape) {
  if (value.dtype != dtype || value.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feed '", name, "' is ", DataTypeName(value.dtype), " ", value.shape.ToString(),
        "; the program declares ", DataTypeName(dtype), " ", shape.ToString()));
  }
  const size_t expected = static_cast<size_t>(shape.NumElements()) * SizeOf(dtype);
  if (value.bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' holds ", value.bytes.size(),
                                                   " bytes; ", shape.ToString(), " ",
                                                   DataTypeName(dtype), " needs ", expected));
  }
  return absl::OkStatus();
}

absl::Status CheckDeviceFeed(absl::string_view name, const vm::BlobRef& blob,
                             const vm::VirtualMachine& vm, const Device& device, DataType dtype,
                             const Shape& shape) {
  if (blob == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' is a null blob"));
  }
  if (blob->lazy()) {
    return absl::InvalidArgumentError(
        absl::StrCat("feed '", name, "' is ", blob->DebugName(),
                     ", a precomputed graph's lazy blob; give an eager tensor's or a NewBlob's"));
  }
  if (blob->storage() == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("feed '", name, "' is ", blob->DebugName(), ", which was released"));
  }
  if (!vm.OwnsStorage(*blob)) {
    return absl::InvalidArgumentError(
        absl::StrCat("feed '", name, "' is ", blob->DebugName(), ", a blob of another VM"));
  }
  if (blob->device() != device) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feed '", name, "' is a blob on ", blob->device().ToString(),
        "; a device-resident feed must be on the program's device, ", device.ToString()));
  }
  if (blob->dtype() != dtype || blob->shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feed '", name, "' is ", DataTypeName(blob->dtype()), " ", blob->shape().ToString(),
        "; the program declares ", DataTypeName(dtype), " ", shape.ToString()));
  }
  return absl::OkStatus();
}

absl::Status CheckFeedsAgainstProgram(const ir::ProgramDesc& program, const Feeds& feeds,
                                      const BlobFeeds& device_feeds, const vm::VirtualMachine& vm,
                                      const Device& device) {
  for (const auto& [name, value] : feeds) {
    const ir::VarDesc* var = program.global_block().FindVar(name);
    if (var == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("feed '", name, "' is not a variable of the program"));
    }
    SLUICE_RETURN_IF_ERROR(CheckFeed(name, value, var->dtype, var->shape));
  }
  for (const auto& [name, blob] : device_feeds) {
    const ir::VarDesc* var = program.global_block().FindVar(name);
    if (var == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", name, "' is not a variable of the program"));
    }
    for (const auto& [host_name, value] : feeds) {
      if (host_name == name) {
        return absl::InvalidArgumentError(
            absl::StrCat("feed '", name, "' is given both as a host tensor and as a blob"));
      }
    }
    SLUICE_RETURN_IF_ERROR(CheckDeviceFeed(name, blob, vm, device, var->dtype, var->shape));
  }
  return absl::OkStatus();
}

BoundIo::BoundIo(vm::VirtualMachine* vm, std::vector<Port> feeds, std::vector<Port> fetches)
    : vm_(vm), feeds_(std::move(feeds)), fetches_(std::move(fetches)) {
  const auto on_device = [](const Port& port) { return port.copy.assign != nullptr; };
  device_fetches_ = std::any_of(fetches_.begin(), fetches_.end(), on_device);
  if (device_fetches_ || std::any_of(feeds_.begin(), feeds_.end(), on_device)) {
    builder_ = std::make_unique<vm::InstructionsBuilder>(vm_);
  }
}

absl::Status BoundIo::StageFeeds(const Feeds& feeds, const BlobFeeds& device_feeds) {
  std::vector<const HostTensor*> by_slot(feeds_.size(), nullptr);
  std::vector<const vm::BlobRef*> blob_by_slot(feeds_.size(), nullptr);
  auto slot_of = [&](const std::string& name, bool on_device) -> absl::StatusOr<size_t> {
    auto it = std::find_if(feeds_.begin(), feeds_.end(),
                           [&](const Port& port) { return port.name == name; });
    if (it == feeds_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", name, "' is not a feed of this run"));
    }
    const size_t slot = static_cast<size_t>(it - feeds_.begin());
    if (by_slot[slot] != nullptr || blob_by_slot[slot] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' is given twice"));
    }
    const bool bound_on_device = it->copy.assign != nullptr;
    if (on_device != bound_on_device) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feed '", name, "' is given ", on_device ? "as a blob" : "as a host tensor",
          " but this run binds it ",
          bound_on_device ? "device-resident (give a blob)" : "on the host (give a HostTensor)"));
    }
    return slot;
  };
  for (const auto& [name, value] : feeds) {
    SLUICE_ASSIGN_OR_RETURN(const size_t slot, slot_of(name, /*on_device=*/false));
    const vm::Blob& blob = *feeds_[slot].blob;
    SLUICE_RETURN_IF_ERROR(CheckFeed(name, value, blob.dtype(), blob.shape()));
    by_slot[slot] = &value;
  }
  for (const auto& [name, value] : device_feeds) {
    SLUICE_ASSIGN_OR_RETURN(const size_t slot, slot_of(name, /*on_device=*/true));
    const vm::Blob& blob = *feeds_[slot].blob;
    SLUICE_RETURN_IF_ERROR(
        CheckDeviceFeed(name, value, *vm_, blob.device(), blob.dtype(), blob.shape()));
    blob_by_slot[slot] = &value;
  }
  for (size_t i = 0; i < feeds_.size(); ++i) {
    if (by_slot[i] == nullptr && blob_by_slot[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("feed '", feeds_[i].name, "' is missing"));
    }
  }
  // No run of this graph is in flight (the caller's contract), so the feed blobs are idle.
  absl::InlinedVector<vm::VirtualMachine::HostBlobWrite, 8> writes;
  for (size_t i = 0; i < feeds_.size(); ++i) {
    if (by_slot[i] != nullptr) writes.push_back({&feeds_[i].blob, by_slot[i]->bytes});
  }
  if (!writes.empty()) SLUICE_RETURN_IF_ERROR(vm_->WriteIdleHostBlobs(writes));
  if (device_feeds.empty()) return absl::OkStatus();
  // The callers' producers may be held back by other builders: hand them to the engine
  // first, so that it orders each copy after its blob's producer.
  builder_->Flush();
  for (size_t i = 0; i < feeds_.size(); ++i) {
    if (blob_by_slot[i] == nullptr) continue;
    const DeviceCopy& copy = feeds_[i].copy;
    const absl::Status submitted =
        builder_->Call(*copy.assign, {*blob_by_slot[i]}, {feeds_[i].blob}, nullptr, copy.stream);
    // Later feeds' copies are not submitted; those already are fill feed blobs only.
    if (!submitted.ok()) {
      return absl::Status(submitted.code(),
                          absl::StrCat("feed '", feeds_[i].name, "': ", submitted.message()));
    }
    copies_pending_ = true;
  }
  return absl::OkStatus();
}

absl::Status BoundIo::WaitForPendingCopies() {
  if (!copies_pending_) return absl::OkStatus();
  // Shared with the callback, which may still be returning from Notify when Wait returns.
  auto done = std::make_shared<absl::Notification>();
  SLUICE_RETURN_IF_ERROR(builder_->Barrier([done] { done->Notify(); }));
  done->WaitForNotification();
  copies_pending_ = false;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HostTensor>> BoundIo::ReadFetches() const {
  std::vector<HostTensor> values;
  values.reserve(fetches_.size());
  absl::InlinedVector<vm::VirtualMachine::HostBlobRead, 4> reads;
  for (const Port& fetch : fetches_) {
    const vm::Blob& blob = *fetch.blob;
    values.push_back(HostTensor{blob.dtype(), blob.shape(), {}});
    if (fetch.copy.assign != nullptr) continue;  // device-resident: no bytes here
    SLUICE_RETURN_IF_ERROR(CheckFetched(blob, fetch.name));
    values.back().bytes.resize(blob.bytes());
    reads.push_back({&fetch.blob, absl::MakeSpan(values.back().bytes)});
  }
  // The run is complete (the caller's contract): nothing writes the fetch blobs now.
  if (!reads.empty()) SLUICE_RETURN_IF_ERROR(vm_->ReadIdleHostBlobs(reads));
  return values;
}

absl::StatusOr<std::vector<vm::BlobRef>> BoundIo::CopyOutDeviceFetches() {
  std::vector<vm::BlobRef> out;
  if (!device_fetches_) return out;
  for (const Port& fetch : fetches_) {
    if (fetch.copy.assign == nullptr) continue;
    SLUICE_RETURN_IF_ERROR(CheckFetched(*fetch.blob, fetch.name));
  }
  out.resize(fetches_.size());
  for (size_t i = 0; i < fetches_.size(); ++i) {
    const DeviceCopy& copy = fetches_[i].copy;
    if (copy.assign == nullptr) continue;
    const vm::Blob& source = *fetches_[i].blob;
    SLUICE_ASSIGN_OR_RETURN(out[i], vm_->NewBlob(copy.stream, source.dtype(), source.shape()));
    // The run is complete and certified by its barrier: the copy needs no order against it.
    // The next run waits for it before its graph writes the fetch blob (WaitForPendingCopies).
    copies_pending_ = true;
    SLUICE_RETURN_IF_ERROR(
        builder_->Call(*copy.assign, {fetches_[i].blob}, {out[i]}, nullptr, copy.stream));
  }
  // To the engine now: the caller's next use of a copy, through any builder, comes after it.
  builder_->Flush();
  return out;
}

}  // namespace sluice::framework
