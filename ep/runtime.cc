#include "ep/runtime.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "ep/ccl/internal/unavailable_communicator.h"
#include "ep/cuda/cuda_device.h"

namespace sluice::ep {

Runtime::Runtime(RuntimeOptions options)
    : options_(options), stream_ids_(std::make_unique<StreamIdTable>()) {}

Runtime::~Runtime() {
  // Every device drains its streams and drops its allocator first: an allocator may hold a
  // fence event borrowed from another device's pool (memory used by a cross-device copy),
  // so no pool may go away before every allocator has. Then reverse creation order.
  for (const auto& device : devices_) device->Shutdown();
  while (!devices_.empty()) devices_.pop_back();
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(RuntimeOptions options) {
  if (options.num_sim_devices < 0 || options.num_sim_devices > kMaxSimDevices) {
    return absl::InvalidArgumentError(absl::StrCat("num_sim_devices is ", options.num_sim_devices,
                                                   "; expected 0..", kMaxSimDevices));
  }
  if (options.sim.max_jitter_us < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim max_jitter_us is ", options.sim.max_jitter_us, "; expected >= 0"));
  }
  if (options.world == nullptr) options.world = ccl::World::Local();
  std::unique_ptr<Runtime> runtime(new Runtime(options));
  StreamIdTable* ids = runtime->stream_ids_.get();
  runtime->devices_.push_back(CreateCpuDevice(ids, options.cpu));
  for (auto& device : CreateSimDevices(options.num_sim_devices, ids, options.sim)) {
    runtime->devices_.push_back(std::move(device));
  }
  if (options.enable_cuda) {
    const int count = CudaDeviceCount();
    for (int i = 0; i < count; ++i) {
      SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateCudaDevice(i, ids));
      runtime->devices_.push_back(std::move(device));
    }
  }
  // Collective over the world: every rank gets here with the same devices, in this order.
  ccl::World& world = *options.world;
  for (const auto& device : runtime->devices_) {
    absl::StatusOr<std::unique_ptr<ccl::Communicator>> communicator =
        world.NewCommunicator(*device);
    if (communicator.ok()) {
      device->communicator_ = std::move(*communicator);
    } else if (absl::IsUnimplemented(communicator.status())) {
      device->communicator_ = std::make_unique<ccl::internal::UnavailableCommunicator>(
          world.rank(), world.size(), communicator.status());
    } else {
      return communicator.status();
    }
  }
  Runtime* raw = runtime.get();
  for (const auto& device : raw->devices_) {
    device->set_stream_resolver([raw](StreamId id) -> absl::StatusOr<Stream*> {
      return raw->GetStream(raw->stream_ids().key(id));
    });
  }
  return runtime;
}

absl::StatusOr<Device*> Runtime::GetDevice(sluice::Device device) const {
  for (const auto& d : devices_) {
    if (d->id() == device) return d.get();
  }
  std::vector<std::string> names;
  for (const auto& d : devices_) names.push_back(d->id().ToString());
  std::string why;
  if (device.type() == DeviceType::kCuda && CudaDeviceCount() == 0) {
    why = CudaProviderBuilt() ? " (no CUDA device found)" : " (built without CUDA)";
  }
  return absl::NotFoundError(absl::StrCat("device ", device.ToString(), " is not available", why,
                                          "; available: ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<Device*> Runtime::GetDevice(absl::string_view name) const {
  SLUICE_ASSIGN_OR_RETURN(sluice::Device device, sluice::Device::Parse(name));
  return GetDevice(device);
}

absl::StatusOr<Stream*> Runtime::GetStream(const StreamKey& key) const {
  SLUICE_ASSIGN_OR_RETURN(Device * device, GetDevice(key.device));
  return device->GetStream(key.type, key.index);
}

absl::StatusOr<Stream*> Runtime::GetStream(absl::string_view key) const {
  SLUICE_ASSIGN_OR_RETURN(StreamKey parsed, StreamKey::Parse(key));
  return GetStream(parsed);
}

std::vector<Device*> Runtime::devices() const {
  std::vector<Device*> out;
  for (const auto& d : devices_) out.push_back(d.get());
  return out;
}

}  // namespace sluice::ep
