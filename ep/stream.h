// ep::Stream: an ordered queue of work on one device (a CUDA stream, a sim stream thread,
// or the calling thread for cpu). Streams are created and owned by their ep::Device.
#ifndef SLUICE_EP_STREAM_H_
#define SLUICE_EP_STREAM_H_

#include <cstddef>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "core/device.h"
#include "core/stream_id.h"
#include "core/stream_type.h"
#include "ep/event.h"

namespace sluice::ep {

class Device;

// Host code run as stream work, in stream order. Its error becomes the stream's pending
// error (see Sync). Small captures (two pointers) are stored inline: no heap allocation.
using HostTask = absl::AnyInvocable<absl::Status() &&>;
// What a device reports instead of running a work item it failed (see LaunchFallible).
using DeviceErrorHandler = absl::AnyInvocable<void(const absl::Status& error) &&>;

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost };

// Thread-safety: enqueueing methods (Launch, RecordEvent, WaitEvent, Memcpy) may be called
// from any thread, but work from different threads is ordered only by the order in which
// the calls happen; the VM enqueues to a stream from one thread at a time. Sync and
// TakeError may be called from any thread.
class Stream {
 public:
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device* device() const { return device_; }
  StreamId id() const { return id_; }
  const StreamKey& key() const { return key_; }
  // True when enqueued work runs asynchronously to the caller (sim, cuda).
  virtual bool IsAsync() const = 0;

  // Enqueues host code. cpu runs it now and returns its status.
  virtual absl::Status Launch(HostTask task) = 0;
  // Launch for work a device may fail as a whole (a kernel's work): when the device fails
  // the item, `task` is destroyed unrun and `on_error` runs in its place, at the item's turn
  // in stream order, with the device's error — which is then not also the stream's pending
  // error (the handler reports it). Providers that never fail a single item launch `task`
  // as Launch does and drop `on_error`; sim fails items only when fault injection is on
  // (SimOptions::device_faults).
  virtual absl::Status LaunchFallible(HostTask task, DeviceErrorHandler on_error) {
    (void)on_error;
    return Launch(std::move(task));
  }
  // Records `event` (of this stream's device) at the current end of the stream.
  virtual absl::Status RecordEvent(Event* event) = 0;
  // Makes later work on this stream wait until `event`'s currently recorded point is done,
  // without blocking the host where the device allows it. Cross-device waits between
  // devices of the same provider are allowed (as with CUDA); a wait on an event of another
  // provider is InvalidArgument, except that a cpu stream waits on any event by blocking.
  virtual absl::Status WaitEvent(Event* event) = 0;
  // Enqueues a copy of `bytes` bytes. The pointers are checked against `kind` where the
  // provider can tell (sim: device pointers must be this device's memory).
  virtual absl::Status Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) = 0;
  // Blocks until all enqueued work is done; returns (and clears) the first error of work
  // that ran since the previous Sync/TakeError.
  virtual absl::Status Sync() = 0;

  // The provider's own stream object, for kernels that launch on it directly: the
  // cudaStream_t of a cuda stream; null for the other providers.
  virtual void* native_handle() const { return nullptr; }

 protected:
  Stream(Device* device, StreamId id, StreamKey key) : device_(device), id_(id), key_(key) {}

 private:
  Device* const device_;
  const StreamId id_;
  const StreamKey key_;
};

}  // namespace sluice::ep

#endif  // SLUICE_EP_STREAM_H_
