// The cpu provider: the host as a device. Stream work runs on the calling thread (a cpu
// vm::Stream is one worker thread), so events are done when recorded.
#ifndef SLUICE_EP_CPU_CPU_DEVICE_H_
#define SLUICE_EP_CPU_CPU_DEVICE_H_

#include <memory>

#include "core/stream_id.h"
#include "ep/device.h"

namespace sluice::ep {

// Options for host memory.
struct CpuOptions {
  // Upper bound on bytes of host memory handed out through device_memory(); 0 = unlimited.
  size_t memory_limit_bytes = 0;
  // Threads that may run one kernel's parallel region, the calling worker included
  // (IntraOpPool); 0 = the host's hardware threads, 1 = every kernel on its worker alone.
  int intra_op_threads = 0;
};

// Creates the single host device "cpu". Thread-safe like every ep::Device.
std::unique_ptr<Device> CreateCpuDevice(StreamIdTable* stream_ids, CpuOptions options = {});

}  // namespace sluice::ep

#endif  // SLUICE_EP_CPU_CPU_DEVICE_H_
