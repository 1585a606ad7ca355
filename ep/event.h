// ep::Event: a marker recorded into a stream, done when the stream reaches it (CUDA event
// semantics). Events are expensive to create on real devices; take them from the device's
// EventPool (event_pool.h) rather than creating them on a hot path.
#ifndef SLUICE_EP_EVENT_H_
#define SLUICE_EP_EVENT_H_

#include "absl/status/status.h"
#include "core/device.h"

namespace sluice::ep {

// Semantics shared by every provider, as with cudaEvent_t:
//  - An event never recorded is done.
//  - Stream::RecordEvent captures "all work enqueued on that stream so far"; the event is
//    done once that work has finished. Recording again replaces the captured point.
//  - Stream::WaitEvent captures the point recorded at the time of the call: re-recording
//    the event afterwards does not change what an earlier wait waits for. This is what makes
//    returning an event to its pool safe as soon as every wait on it has been enqueued.
// Thread-safe.
class Event {
 public:
  virtual ~Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  sluice::Device device() const { return device_; }
  // True when the last recorded point has been reached (or nothing was recorded).
  virtual bool Query() = 0;
  // Blocks the calling thread until Query() would be true. Returns the recording stream's
  // error if its work failed before the recorded point.
  virtual absl::Status Sync() = 0;

 protected:
  explicit Event(sluice::Device device) : device_(device) {}

 private:
  const sluice::Device device_;
};

}  // namespace sluice::ep

#endif  // SLUICE_EP_EVENT_H_
