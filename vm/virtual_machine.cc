#include "vm/virtual_machine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ep/device.h"
#include "vm/internal/stream_policy.h"
#include "vm/internal/vm_core.h"
#include "vm/recorder.h"

namespace sluice::vm {
namespace {

// The largest VmOptions::max_parked_blobs (the parked set's ring is allocated up front).
constexpr int64_t kMaxParkedBlobsLimit = int64_t{1} << 20;

absl::Status CheckOptions(const VmOptions& options) {
  if (options.max_in_flight < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("VirtualMachine: max_in_flight must be >= 1, got ", options.max_in_flight));
  }
  if (options.spin.count() < 0 || options.idle_spin.count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("VirtualMachine: negative ", options.spin.count() < 0 ? "spin" : "idle_spin"));
  }
  if (options.max_parked_blobs < 0 || options.max_parked_blobs > kMaxParkedBlobsLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("VirtualMachine: max_parked_blobs must be in [0, ", kMaxParkedBlobsLimit,
                     "], got ", options.max_parked_blobs));
  }
  if (options.max_fused_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VirtualMachine: max_fused_steps must be >= 0, got ", options.max_fused_steps));
  }
  return absl::OkStatus();
}

// The checks WriteIdleHostBlobs and ReadIdleHostBlobs make before they copy anything.
absl::Status CheckIdleCopy(absl::string_view what, const Blob& blob, size_t bytes) {
  if (bytes != blob.bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", blob.DebugName(), " holds ", blob.bytes(), " bytes, got ", bytes));
  }
  if (blob.storage() == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", blob.DebugName(), " has no storage"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<VirtualMachine>> VirtualMachine::Create(ep::Runtime* runtime,
                                                                       VmOptions options) {
  if (runtime == nullptr) return absl::InvalidArgumentError("VirtualMachine: null runtime");
  SLUICE_RETURN_IF_ERROR(CheckOptions(options));
  std::unique_ptr<Recorder> recorder;
  if (!options.record_path.empty()) {
    SLUICE_ASSIGN_OR_RETURN(recorder, Recorder::Create(options.record_path));
  }
  return std::unique_ptr<VirtualMachine>(new VirtualMachine(
      internal::VmCore::Create(runtime, std::move(options), std::move(recorder))));
}

VirtualMachine::VirtualMachine(std::unique_ptr<internal::VmCore> core)
    : core_(std::move(core)),
      runtime_(core_->runtime()),
      options_(&core_->options()),
      checker_(core_->sync_checker()),
      recorder_(core_->recorder()),
      errors_(&core_->errors()),
      fusion_(core_->fusion()) {}

VirtualMachine::~VirtualMachine() = default;  // the core shuts down (kFinish) as it goes

absl::StatusOr<Stream*> VirtualMachine::GetStream(const StreamKey& key) {
  return core_->GetStream(key);
}

absl::StatusOr<Stream*> VirtualMachine::GetStream(absl::string_view key) {
  SLUICE_ASSIGN_OR_RETURN(StreamKey parsed, StreamKey::Parse(key));
  return core_->GetStream(parsed);
}

absl::StatusOr<Stream*> VirtualMachine::GetStream(StreamId id) { return core_->GetStream(id); }

absl::StatusOr<BlobRef> VirtualMachine::NewBlob(Stream* stream, DataType dtype, Shape shape,
                                                std::string name, Allocator* allocator) {
  return core_->NewBlob(stream, dtype, std::move(shape), std::move(name), allocator);
}

absl::StatusOr<OwnedBlob> VirtualMachine::NewOwnedBlob(Stream* stream, DataType dtype,
                                                       const Shape& shape) {
  return core_->NewOwnedBlob(stream, dtype, shape);
}

absl::StatusOr<BlobRef> VirtualMachine::NewLazyBlob(Stream* stream, DataType dtype, Shape shape,
                                                    std::string name, Allocator* allocator) {
  return core_->NewLazyBlob(stream, dtype, std::move(shape), std::move(name), allocator);
}

absl::Status VirtualMachine::WriteIdleHostBlobs(absl::Span<const HostBlobWrite> writes) {
  std::vector<internal::VmCore::IdleCopy> copies;
  copies.reserve(writes.size());
  for (const HostBlobWrite& write : writes) {
    Blob& blob = **write.blob;
    SLUICE_RETURN_IF_ERROR(CheckIdleCopy("WriteIdleHostBlobs", blob, write.bytes.size()));
    copies.push_back({&blob, blob.storage()->data(), write.bytes.data(), write.bytes.size()});
  }
  return core_->WriteIdle(copies);
}

absl::Status VirtualMachine::ReadIdleHostBlobs(absl::Span<const HostBlobRead> reads) {
  std::vector<internal::VmCore::IdleCopy> copies;
  copies.reserve(reads.size());
  for (const HostBlobRead& read : reads) {
    Blob& blob = **read.blob;
    SLUICE_RETURN_IF_ERROR(CheckIdleCopy("ReadIdleHostBlobs", blob, read.bytes.size()));
    copies.push_back({&blob, read.bytes.data(), blob.storage()->data(), read.bytes.size()});
  }
  return core_->ReadIdle(copies);
}

bool VirtualMachine::OwnsStorage(const Blob& blob) const {
  const TensorStorage* storage = blob.storage();
  if (storage == nullptr) return false;
  absl::StatusOr<ep::Device*> device = runtime_->GetDevice(blob.device());
  return device.ok() && storage->allocator() == &(*device)->allocator();
}

absl::Status VirtualMachine::Sync() { return core_->Sync(nullptr); }

absl::Status VirtualMachine::Sync(std::vector<absl::Status>* all) { return core_->Sync(all); }

absl::Status VirtualMachine::Shutdown(ShutdownMode mode) { return core_->Shutdown(mode); }

absl::Status VirtualMachine::FreeParkedBlobs() { return core_->FreeParkedBlobs(); }

VmStats VirtualMachine::stats() { return core_->stats(); }

void VirtualMachine::SetTracer(Tracer* tracer) { core_->SetTracer(tracer); }

std::vector<Stream*> VirtualMachine::streams() const { return core_->streams(); }

bool VirtualMachine::HasOwnWorkers(absl::Span<Stream* const> streams) const {
  for (size_t i = 0; i < streams.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (streams[i]->thread_ctx() == streams[j]->thread_ctx()) return false;
    }
  }
  return true;
}

bool VirtualMachine::RunsOnHost(const Stream& stream) { return stream.policy()->synchronous(); }

bool VirtualMachine::HostAccessible(const Stream& stream) {
  return stream.policy()->host_accessible();
}

bool VirtualMachine::CanRunLanes(absl::Span<Stream* const> streams) const {
  for (const Stream* stream : streams) {
    if (!RunsOnHost(*stream)) return false;
  }
  return HasOwnWorkers(streams);
}

}  // namespace sluice::vm
