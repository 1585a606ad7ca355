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

#include "core/stream_id.h"
#include "ep/device.h"
#include "ep/sim/sim_options.h"

namespace sluice::ep {

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
