// The sim provider: an emulated accelerator, the way Sluice tests multi-stream behaviour
// without a GPU. Each stream is a host thread draining a FIFO of work asynchronously to the
// caller; events record and query like CUDA events; a stream waits on an event without
// blocking the host; copies are stream work; device memory is a pool of its own, and a copy
// whose pointers are not where its kind says is an error (a missing copy cannot go unseen).
#ifndef SLUICE_EP_SIM_SIM_DEVICE_H_
#define SLUICE_EP_SIM_SIM_DEVICE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/fault_injector.h"
#include "core/stream_id.h"
#include "ep/device.h"

namespace sluice::ep {

struct SimOptions {
  // Seeds the per-stream random delays (each stream mixes in its id).
  uint64_t seed = 0;
  // When > 0, each work item waits a random 0..max_jitter_us microseconds before running,
  // to shake out missing synchronization.
  int max_jitter_us = 0;
  // Capacity of the device's memory pool; allocation beyond it is ResourceExhausted.
  size_t memory_bytes = size_t{1} << 30;
  // Fault injection (null: none, and the streams test nothing else): each work item
  // launched with Stream::LaunchFallible fails when `device_faults` fires for the key
  // (stream id, the item's number among the stream's fallible items), as a device error
  // "<stream>: injected device fault #N" handed to the item's error handler. The stream's
  // worker decides, in stream order, so the failed items are the same on every run where
  // each stream receives the same fallible items in the same order. Shared by every stream
  // of the devices (FaultInjector is thread-safe); must outlive them.
  FaultInjector* device_faults = nullptr;
};

// Creates sim device `index` ("sim:INDEX") on its own: device-to-device copies can only
// involve its own memory. Thread-safe like every ep::Device.
std::unique_ptr<Device> CreateSimDevice(int index, StreamIdTable* stream_ids,
                                        SimOptions options = {});
// Creates sim:0 .. sim:(count - 1) as one group: copies between their memories are
// device-to-device copies, and a copy's pointers are checked against every device's memory.
std::vector<std::unique_ptr<Device>> CreateSimDevices(int count, StreamIdTable* stream_ids,
                                                      SimOptions options = {});

}  // namespace sluice::ep

#endif  // SLUICE_EP_SIM_SIM_DEVICE_H_
