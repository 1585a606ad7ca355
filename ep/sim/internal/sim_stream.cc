#include "ep/sim/internal/sim_stream.h"

#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/spin_wait.h"
#include "core/status_from_call.h"
#include "core/thread_name.h"
#include "ep/device.h"
#include "ep/sim/internal/sim_memory_map.h"

namespace sluice::ep::sim_internal {
namespace {

std::string Where(int owner) {
  return owner == SimMemoryMap::kHost ? std::string("host memory")
                                      : absl::StrCat("sim:", owner, " device memory");
}

const char* KindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return "host-to-device";
    case CopyKind::kDeviceToHost:
      return "device-to-host";
    case CopyKind::kDeviceToDevice:
      return "device-to-device";
    case CopyKind::kHostToHost:
      return "host-to-host";
  }
  return "invalid";
}

}  // namespace

SimStream::SimStream(Device* device, StreamId id, const StreamKey& key, const SimOptions& options,
                     const SimMemoryMap* memory)
    : Stream(device, id, key),
      options_(options),
      memory_(memory),
      rng_(options.seed ^ (0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(id.value()) + 1))),
      worker_([this, name = absl::StrCat("sim", device->id().index(), "-", StreamTypeName(key.type),
                                         key.index)] {
        SetCurrentThreadName(name);
        WorkerLoop();
      }) {}

SimStream::~SimStream() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  worker_.join();
}

void SimStream::Enqueue(Item item) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(item));
  enqueued_.store(enqueued_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

absl::Status SimStream::Launch(HostTask task) {
  Item item;
  item.kind = Item::Kind::kTask;
  item.task = std::move(task);
  Enqueue(std::move(item));
  return absl::OkStatus();
}

absl::Status SimStream::LaunchFallible(HostTask task, DeviceErrorHandler on_error) {
  if (options_.device_faults == nullptr) return Launch(std::move(task));
  Item item;
  item.kind = Item::Kind::kTask;
  item.task = std::move(task);
  item.on_error = std::move(on_error);
  Enqueue(std::move(item));
  return absl::OkStatus();
}

absl::Status SimStream::RecordEvent(Event* event) {
  if (event == nullptr || event->device() != device()->id()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", key().ToString(), " cannot record an event of ",
                     event == nullptr ? std::string("nullptr") : event->device().ToString(),
                     ": events are recorded on streams of their own device"));
  }
  auto* sim_event = static_cast<SimEvent*>(event);
  Item item;
  item.kind = Item::Kind::kRecord;
  item.event = sim_event;
  item.generation = sim_event->BeginRecord();
  Enqueue(std::move(item));
  return absl::OkStatus();
}

absl::Status SimStream::WaitEvent(Event* event) {
  if (event == nullptr) return absl::InvalidArgumentError("WaitEvent: null event");
  switch (event->device().type()) {
    case DeviceType::kCpu:
      return absl::OkStatus();  // cpu events are done when recorded
    case DeviceType::kSim:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "stream ", key().ToString(), " cannot wait on the device side for an event of ",
          event->device().ToString(), "; synchronize on the host instead"));
  }
  auto* sim_event = static_cast<SimEvent*>(event);
  const uint64_t generation = sim_event->latest();
  if (generation == 0) return absl::OkStatus();  // never recorded: done
  Item item;
  item.kind = Item::Kind::kWait;
  item.event = sim_event;
  item.generation = generation;
  Enqueue(std::move(item));
  return absl::OkStatus();
}

absl::Status SimStream::Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return absl::OkStatus();
  const int self = device()->id().index();
  const int dst_owner = memory_->Owner(dst, bytes);
  const int src_owner = memory_->Owner(src, bytes);
  bool ok = false;
  switch (kind) {
    case CopyKind::kHostToDevice:
      ok = dst_owner == self && src_owner == SimMemoryMap::kHost;
      break;
    case CopyKind::kDeviceToHost:
      ok = src_owner == self && dst_owner == SimMemoryMap::kHost;
      break;
    case CopyKind::kDeviceToDevice:
      ok = dst_owner != SimMemoryMap::kHost && src_owner != SimMemoryMap::kHost &&
           (dst_owner == self || src_owner == self);
      break;
    case CopyKind::kHostToHost:
      ok = dst_owner == SimMemoryMap::kHost && src_owner == SimMemoryMap::kHost;
      break;
  }
  if (!ok || dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s copy of %d bytes on %s does not match its pointers: dst %p is %s, src %p is %s",
        key().ToString(), KindName(kind), bytes, device()->id().ToString(), dst, Where(dst_owner),
        src, Where(src_owner)));
  }
  return Launch([dst, src, bytes]() -> absl::Status {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  });
}

absl::Status SimStream::Sync() {
  const uint64_t target = enqueued_.load(std::memory_order_acquire);
  SpinFor([&] { return completed_.load(std::memory_order_acquire) >= target; });
  absl::MutexLock lock(&mu_);
  auto reached = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return completed_locked_ >= target || completed_.load(std::memory_order_acquire) >= target;
  };
  mu_.Await(absl::Condition(&reached));
  absl::Status error = std::move(error_);
  error_ = absl::OkStatus();
  return error;
}

void SimStream::Jitter() {
  if (options_.max_jitter_us <= 0) return;
  std::uniform_int_distribution<int> delay(0, options_.max_jitter_us);
  const int us = delay(rng_);
  if (us > 0) absl::SleepFor(absl::Microseconds(us));
}

void SimStream::Run(Item& item) {
  Jitter();
  switch (item.kind) {
    case Item::Kind::kTask: {
      if (item.on_error != nullptr) {
        // The stream id above the item's number: distinct keys for every stream's items.
        const uint64_t fault_key = (static_cast<uint64_t>(id().value()) << 40) ^ fallible_items_++;
        if (const int64_t fault = options_.device_faults->Fire(fault_key); fault != 0) {
          item.task = nullptr;  // the device dropped it
          std::move(item.on_error)(absl::InternalError(
              absl::StrCat(key().ToString(), ": ", options_.device_faults->Describe(fault))));
          item.on_error = nullptr;
          break;
        }
        item.on_error = nullptr;
      }
      absl::Status status = StatusFromCall("host task", std::move(item.task));
      item.task = nullptr;  // release captures on the worker, before completion is published
      if (!status.ok()) {
        absl::MutexLock lock(&mu_);
        if (error_.ok()) {
          error_ =
              absl::Status(status.code(), absl::StrCat(key().ToString(), ": ", status.message()));
        }
      }
      break;
    }
    case Item::Kind::kRecord: {
      absl::Status error;
      {
        absl::MutexLock lock(&mu_);
        error = error_;
      }
      item.event->Complete(item.generation, std::move(error));
      break;
    }
    case Item::Kind::kWait:
      // Blocks this stream only: the device-side wait. The other stream's error is its own.
      item.event->WaitFor(item.generation).IgnoreError();
      break;
  }
}

void SimStream::WorkerLoop() {
  std::vector<Item> batch;
  uint64_t taken = 0;
  while (true) {
    SpinFor([&] { return enqueued_.load(std::memory_order_acquire) != taken; });
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stop_; };
      mu_.Await(absl::Condition(&has_work));
      if (queue_.empty()) return;  // stopped and drained
      batch.swap(queue_);
    }
    taken += batch.size();
    for (Item& item : batch) {
      Run(item);
      completed_.fetch_add(1, std::memory_order_release);
    }
    batch.clear();
    absl::MutexLock lock(&mu_);
    completed_locked_ = taken;  // wakes parked Sync callers when the lock is released
  }
}

}  // namespace sluice::ep::sim_internal
