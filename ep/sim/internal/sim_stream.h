// SimStream: one emulated device stream — a host thread draining a FIFO of work items
// (host tasks, event records, device-side event waits) asynchronously to the caller.
#ifndef SLUICE_EP_SIM_INTERNAL_SIM_STREAM_H_
#define SLUICE_EP_SIM_INTERNAL_SIM_STREAM_H_

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "ep/sim/internal/sim_event.h"
#include "ep/sim/sim_options.h"
#include "ep/stream.h"

namespace sluice::ep::sim_internal {

class SimMemoryMap;

// Enqueueing methods: any thread (see ep::Stream for ordering). The worker thread runs
// items in FIFO order, in batches: it takes the whole queue under the lock, then runs the
// batch without it, so producers never wait for work to run.
class SimStream final : public Stream {
 public:
  SimStream(Device* device, StreamId id, const StreamKey& key, const SimOptions& options,
            const SimMemoryMap* memory);
  // Drains the queue (pending work runs to completion), then stops the worker.
  ~SimStream() override;

  bool IsAsync() const override { return true; }
  absl::Status Launch(HostTask task) override;
  // Fails the item instead of running it when SimOptions::device_faults fires for it.
  absl::Status LaunchFallible(HostTask task, DeviceErrorHandler on_error) override;
  absl::Status RecordEvent(Event* event) override;
  absl::Status WaitEvent(Event* event) override;
  absl::Status Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) override;
  absl::Status Sync() override;

 private:
  struct Item {
    enum class Kind : uint8_t { kTask, kRecord, kWait };
    Kind kind = Kind::kTask;
    HostTask task;
    DeviceErrorHandler on_error;  // set for LaunchFallible's items only
    SimEvent* event = nullptr;
    uint64_t generation = 0;
  };

  void Enqueue(Item item);
  void WorkerLoop();
  void Run(Item& item);
  void Jitter();

  const SimOptions options_;
  const SimMemoryMap* const memory_;
  std::mt19937_64 rng_;          // worker thread only
  uint64_t fallible_items_ = 0;  // worker thread only: numbers the fault-injection keys

  absl::Mutex mu_;
  std::vector<Item> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t completed_locked_ ABSL_GUARDED_BY(mu_) = 0;  // items finished, for Await
  absl::Status error_ ABSL_GUARDED_BY(mu_);             // first task error since Sync
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  // Mirrors for lock-free spinning before parking. `enqueued_` is written under mu_
  // (release) and read by the spinning worker (acquire); `completed_` is written by the
  // worker (release) and read by spinning Sync callers (acquire), which then read results
  // the work produced. Separate cache lines: producer and worker write them concurrently.
  alignas(64) std::atomic<uint64_t> enqueued_{0};
  alignas(64) std::atomic<uint64_t> completed_{0};

  std::thread worker_;  // started last, after every field it reads
};

}  // namespace sluice::ep::sim_internal

#endif  // SLUICE_EP_SIM_INTERNAL_SIM_STREAM_H_
