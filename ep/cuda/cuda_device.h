// The cuda provider: ep::Device/Stream/Event over the CUDA runtime (streams, pooled
// events, device and pinned memory, async copies, device-side waits). Built when the CUDA
// toolkit is found; otherwise these functions report that no CUDA device exists.
#ifndef SLUICE_EP_CUDA_CUDA_DEVICE_H_
#define SLUICE_EP_CUDA_CUDA_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/stream_id.h"
#include "ep/device.h"

namespace sluice::ep {

// True when this build contains the CUDA provider.
bool CudaProviderBuilt();
// Number of usable CUDA devices: 0 without the provider, a driver or a GPU.
int CudaDeviceCount();
// Creates "cuda:INDEX". NotFound when the device does not exist (the message says how many
// do and why), Internal for a CUDA runtime failure.
absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int index, StreamIdTable* stream_ids);

}  // namespace sluice::ep

#endif  // SLUICE_EP_CUDA_CUDA_DEVICE_H_
