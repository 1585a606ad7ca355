// The cuda provider of a build without the CUDA toolkit: no devices.
#include "absl/strings/str_cat.h"
#include "ep/cuda/cuda_device.h"

namespace sluice::ep {

bool CudaProviderBuilt() { return false; }
int CudaDeviceCount() { return 0; }

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int index, StreamIdTable*) {
  return absl::NotFoundError(absl::StrCat(
      "device cuda:", index, " is not available: Sluice was built without the CUDA toolkit"));
}

}  // namespace sluice::ep
