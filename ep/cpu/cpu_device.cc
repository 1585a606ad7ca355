#include "ep/cpu/cpu_device.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "ep/internal/host_memory.h"

namespace sluice::ep {
namespace {

// Work runs before RecordEvent returns, so a cpu event is always done.
class CpuEvent final : public Event {
 public:
  CpuEvent() : Event(sluice::Device::Cpu()) {}
  bool Query() override { return true; }
  absl::Status Sync() override { return absl::OkStatus(); }
};

// Runs everything on the calling thread. Errors are returned by the call that ran the work,
// so Sync has nothing left to report.
class CpuStream final : public Stream {
 public:
  CpuStream(Device* device, StreamId id, const StreamKey& key) : Stream(device, id, key) {}

  bool IsAsync() const override { return false; }
  absl::Status Launch(HostTask task) override { return std::move(task)(); }

  absl::Status RecordEvent(Event* event) override {
    if (event == nullptr || event->device() != sluice::Device::Cpu()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu stream ", key().ToString(), " cannot record an event of ",
                       event == nullptr ? std::string("nullptr") : event->device().ToString()));
    }
    return absl::OkStatus();
  }

  // The host is this stream's device: waiting on the device side means blocking here.
  absl::Status WaitEvent(Event* event) override {
    if (event == nullptr) return absl::InvalidArgumentError("WaitEvent: null event");
    return event->Sync();
  }

  absl::Status Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    if (bytes == 0) return absl::OkStatus();
    if (dst == nullptr || src == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu Memcpy of ", bytes, " bytes with a null pointer"));
    }
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }

  absl::Status Sync() override { return absl::OkStatus(); }
};

class CpuDevice final : public Device {
 public:
  CpuDevice(StreamIdTable* stream_ids, CpuOptions options)
      : Device(sluice::Device::Cpu(), stream_ids),
        memory_("cpu memory", options.memory_limit_bytes),
        pinned_("cpu pinned memory", options.memory_limit_bytes),
        intra_op_pool_(options.intra_op_threads) {
    InitAllocator();
  }
  ~CpuDevice() override { Shutdown(); }

  bool IsAsync() const override { return false; }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    return std::make_unique<CpuEvent>();
  }
  RawAllocator& device_memory() override { return memory_; }
  RawAllocator& pinned_memory() override { return pinned_; }
  IntraOpPool* intra_op_pool() override { return &intra_op_pool_; }

 protected:
  absl::StatusOr<std::unique_ptr<Stream>> NewStream(StreamId id, const StreamKey& key) override {
    return std::make_unique<CpuStream>(this, id, key);
  }

 private:
  internal::HostMemory memory_;
  internal::HostMemory pinned_;
  IntraOpPool intra_op_pool_;  // after the streams' Shutdown: no kernel runs when it goes
};

}  // namespace

std::unique_ptr<Device> CreateCpuDevice(StreamIdTable* stream_ids, CpuOptions options) {
  return std::make_unique<CpuDevice>(stream_ids, options);
}

}  // namespace sluice::ep
