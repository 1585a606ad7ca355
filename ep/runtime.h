// Runtime: owns the devices of every execution provider, their event pools and allocators,
// and the StreamIdTable. There is no global Runtime: an embedder, a test or the CLI creates
// its own, and everything it hands out lives until it is destroyed.
#ifndef SLUICE_EP_RUNTIME_H_
#define SLUICE_EP_RUNTIME_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/device.h"
#include "core/stream_id.h"
#include "ep/ccl/world.h"
#include "ep/cpu/cpu_device.h"
#include "ep/device.h"
#include "ep/sim/sim_device.h"
#include "ep/stream.h"

namespace sluice::ep {

struct RuntimeOptions {
  CpuOptions cpu;
  // Sim devices sim:0 .. sim:(num_sim_devices - 1), each with `sim` options.
  int num_sim_devices = 2;
  SimOptions sim;
  // Create every CUDA device found (when the provider is built).
  bool enable_cuda = true;
  // The ranks this runtime's devices talk to (ep/ccl/world.h): each device gets a
  // communicator to the same device on every rank. Creating a Runtime with a world of
  // several ranks is collective: every rank creates one, with the same devices, in the same
  // order. Null: this process alone (ccl::World::Local()).
  std::shared_ptr<ccl::World> world;
};

// Thread-safe. Devices are created in Create and destroyed (streams drained first) with the
// Runtime.
class Runtime {
 public:
  static constexpr int kMaxSimDevices = 16;

  // InvalidArgument for bad options (e.g. num_sim_devices outside 0..kMaxSimDevices).
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // NotFound naming the device and listing the available ones.
  absl::StatusOr<Device*> GetDevice(sluice::Device device) const;
  // Parses `name` ("cpu", "sim:1", "cuda:0") first: InvalidArgument for a bad string.
  absl::StatusOr<Device*> GetDevice(absl::string_view name) const;
  // The stream named by `key`, created on first use.
  absl::StatusOr<Stream*> GetStream(const StreamKey& key) const;
  // Parses "sim:0/h2d", "cuda:0/compute:1", "cpu" (see StreamKey::Parse) first.
  absl::StatusOr<Stream*> GetStream(absl::string_view key) const;

  // Every device, cpu first, then sim, then cuda, each by index.
  std::vector<Device*> devices() const;
  StreamIdTable& stream_ids() { return *stream_ids_; }
  // The world the devices' communicators reach: never null.
  const ccl::World& world() const { return *options_.world; }
  std::shared_ptr<ccl::World> shared_world() const { return options_.world; }
  const RuntimeOptions& options() const { return options_; }

 private:
  explicit Runtime(RuntimeOptions options);

  const RuntimeOptions options_;
  // Declared before the devices: streams keep pointers into it.
  std::unique_ptr<StreamIdTable> stream_ids_;
  std::vector<std::unique_ptr<Device>> devices_;  // immutable after Create
};

}  // namespace sluice::ep

#endif  // SLUICE_EP_RUNTIME_H_
