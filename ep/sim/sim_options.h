// SimOptions: how the sim provider's devices (ep/sim/sim_device.h) behave — delays, memory,
// injected faults. A header of its own so that the device and its streams
// (ep/sim/internal/sim_stream.h) share it without including each other.
#ifndef SLUICE_EP_SIM_SIM_OPTIONS_H_
#define SLUICE_EP_SIM_SIM_OPTIONS_H_

#include <cstddef>
#include <cstdint>

#include "core/fault_injector.h"

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

}  // namespace sluice::ep

#endif  // SLUICE_EP_SIM_SIM_OPTIONS_H_
