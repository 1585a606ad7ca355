#include "ep/sim/sim_device.h"

#include "absl/strings/str_cat.h"
#include "ep/internal/host_memory.h"
#include "ep/sim/internal/sim_event.h"
#include "ep/sim/internal/sim_memory_map.h"
#include "ep/sim/internal/sim_stream.h"

namespace sluice::ep {
namespace {

using sim_internal::SimEvent;
using sim_internal::SimMemoryMap;
using sim_internal::SimStream;

class SimDevice final : public Device {
 public:
  SimDevice(int index, StreamIdTable* stream_ids, const SimOptions& options,
            std::shared_ptr<SimMemoryMap> memory_map)
      : Device(sluice::Device(DeviceType::kSim, index), stream_ids),
        options_(options),
        memory_(absl::StrCat("sim:", index, " device memory"), options.memory_bytes),
        pinned_(absl::StrCat("sim:", index, " pinned memory"), 0),
        memory_map_(std::move(memory_map)) {
    memory_map_->Add(index, &memory_);
    InitAllocator();
  }
  ~SimDevice() override {
    Shutdown();
    memory_map_->Remove(id().index());
  }

  bool IsAsync() const override { return true; }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    return std::make_unique<SimEvent>(id());
  }
  RawAllocator& device_memory() override { return memory_; }
  RawAllocator& pinned_memory() override { return pinned_; }

 protected:
  absl::StatusOr<std::unique_ptr<Stream>> NewStream(StreamId id, const StreamKey& key) override {
    return std::make_unique<SimStream>(this, id, key, options_, memory_map_.get());
  }

 private:
  const SimOptions options_;
  internal::HostMemory memory_;
  internal::HostMemory pinned_;
  std::shared_ptr<SimMemoryMap> memory_map_;
};

}  // namespace

std::unique_ptr<Device> CreateSimDevice(int index, StreamIdTable* stream_ids, SimOptions options) {
  return std::make_unique<SimDevice>(index, stream_ids, options, std::make_shared<SimMemoryMap>());
}

std::vector<std::unique_ptr<Device>> CreateSimDevices(int count, StreamIdTable* stream_ids,
                                                      SimOptions options) {
  auto memory_map = std::make_shared<SimMemoryMap>();
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < count; ++i) {
    devices.push_back(std::make_unique<SimDevice>(i, stream_ids, options, memory_map));
  }
  return devices;
}

}  // namespace sluice::ep
