#include "ep/device.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::ep {

// Fences for the caching allocator: a pooled event recorded on the stream.
class Device::Fences final : public FenceRecorder {
 public:
  explicit Fences(Device* device) : device_(device) {}

  absl::StatusOr<std::shared_ptr<StreamFence>> Record(StreamId stream_id) override {
    absl::StatusOr<Stream*> found = device_->FindStream(stream_id);
    if (!found.ok() && device_->resolver_) found = device_->resolver_(stream_id);
    SLUICE_ASSIGN_OR_RETURN(Stream * stream, found);
    // The event belongs to the stream's device, which may be another one.
    SLUICE_ASSIGN_OR_RETURN(PooledEvent event, stream->device()->event_pool().Borrow());
    SLUICE_RETURN_IF_ERROR(stream->RecordEvent(event.get()));
    return std::shared_ptr<StreamFence>(std::make_shared<EventFence>(std::move(event)));
  }

 private:
  class EventFence final : public StreamFence {
   public:
    explicit EventFence(PooledEvent event) : event_(std::move(event)) {}
    bool IsDone() override { return event_->Query(); }
    absl::Status Wait() override { return event_->Sync(); }

   private:
    PooledEvent event_;
  };

  Device* const device_;
};

Device::Device(sluice::Device id, StreamIdTable* stream_ids)
    : id_(id), stream_ids_(stream_ids), event_pool_([this] { return CreateEvent(); }) {
  SLUICE_CHECK(stream_ids_ != nullptr);
}

Device::~Device() { Shutdown(); }

absl::StatusOr<ccl::Communicator*> Device::GroupCommunicator(absl::Span<const int> group) {
  const int size = communicator_->size();
  bool whole = static_cast<int>(group.size()) == size;
  for (size_t i = 0; whole && i < group.size(); ++i) whole = group[i] == static_cast<int>(i);
  if (whole) return communicator_.get();
  std::vector<int> key(group.begin(), group.end());
  absl::MutexLock lock(&groups_mu_);
  auto it = groups_.find(key);
  if (it != groups_.end()) return it->second.get();
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ccl::Communicator> split, communicator_->Split(group));
  ccl::Communicator* raw = split.get();
  groups_.emplace(std::move(key), std::move(split));
  return raw;
}

void Device::Shutdown() {
  // Streams go first: their threads may still run work that touches the allocator.
  absl::flat_hash_map<StreamId, std::unique_ptr<Stream>> streams;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(streams_);
  }
  for (auto& [id, stream] : streams) stream->Sync().IgnoreError();
  allocator_.reset();
  streams.clear();
}

void Device::InitAllocator() {
  // Fences on every device, the cpu included: a cpu block read by a sim or cuda stream (a
  // copy) is still in use by that stream after the host frees it, until the stream passes
  // the point of the free. Fences on another cpu stream cost nothing (cpu events are
  // always complete).
  fences_ = std::make_unique<Fences>(this);
  allocator_ = std::make_unique<StreamOrderedCachingAllocator>(&device_memory(), fences_.get());
}

absl::StatusOr<Stream*> Device::GetStream(StreamType type, int index) {
  if (index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream index ", index, " on ", id_.ToString(), " is negative"));
  }
  const StreamKey key{id_, type, index};
  SLUICE_ASSIGN_OR_RETURN(StreamId stream_id, stream_ids_->Intern(key));
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream_id);
  if (it != streams_.end()) return it->second.get();
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, NewStream(stream_id, key));
  Stream* raw = stream.get();
  streams_.emplace(stream_id, std::move(stream));
  return raw;
}

absl::StatusOr<Stream*> Device::FindStream(StreamId id) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    return absl::NotFoundError(
        absl::StrCat("stream id ", id.value(), " is not a live stream of ", id_.ToString()));
  }
  return it->second.get();
}

absl::Status Device::DestroyStream(Stream* stream) {
  std::unique_ptr<Stream> owned;
  {
    absl::MutexLock lock(&mu_);
    // Compare by address: `stream` may be a dangling pointer (API misuse) and must not be
    // dereferenced before it is known to be live.
    auto it = std::find_if(streams_.begin(), streams_.end(),
                           [stream](const auto& entry) { return entry.second.get() == stream; });
    if (it == streams_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("DestroyStream: the stream is not a live stream of ", id_.ToString()));
    }
    owned = std::move(it->second);
    streams_.erase(it);
  }
  // Draining happens in the stream's destructor too; Sync first to report the error.
  absl::Status status = owned->Sync();
  owned.reset();
  return status;
}

absl::Status Device::Synchronize() {
  // Holding mu_ keeps DestroyStream from freeing a stream under us; stream work never
  // takes it.
  absl::MutexLock lock(&mu_);
  absl::Status status;
  for (auto& [id, stream] : streams_) status.Update(stream->Sync());
  return status;
}

}  // namespace sluice::ep
