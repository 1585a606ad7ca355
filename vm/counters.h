// VmCounters / VmStats: what the VM did, for tests (soft sync must emit exactly the syncs
// its rule requires), benchmarks and `sluice stress`.
#ifndef SLUICE_VM_COUNTERS_H_
#define SLUICE_VM_COUNTERS_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "core/intra_op_pool.h"

namespace sluice::vm {

// A snapshot. Value type.
struct VmStats {
  int64_t instructions = 0;  // every instruction submitted, syncs included
  // OpCalls and Releases count the calls and releases submitted, fused ones included
  // (a StepSequence run is one instruction of `instructions`).
  int64_t op_calls = 0;
  int64_t stream_waits = 0;   // StreamWait instructions submitted
  int64_t record_events = 0;  // RecordEvent instructions submitted
  int64_t releases = 0;
  int64_t barriers = 0;
  int64_t access_blobs = 0;
  int64_t fused_steps = 0;        // calls and releases that ran inside StepSequence runs
  int64_t private_blobs = 0;      // blobs born and released inside one run (engine never saw)
  int64_t stepless_releases = 0;  // their Releases that kept the storage: no step to run
  int64_t recycled_blobs = 0;     // new blobs that were parked private blobs, storage included
  int64_t parked_blobs = 0;       // now: dead private blobs parked with their storage for reuse
  int64_t evicted_blobs = 0;      // parked blobs freed to make room for newer ones
  int64_t events_created = 0;     // pooled events borrowed that had to be created
  int64_t events_reused = 0;      // pooled events borrowed from the idle list
  int64_t skipped = 0;        // calls and other instructions skipped (poisoned input, cancellation)
  int64_t errors = 0;         // errors reported (the first is surfaced at the next sync)
  int64_t max_in_flight = 0;  // high-water mark of submitted, unretired instructions
  int64_t submit_waits = 0;   // submissions that waited for room (backpressure)
  // Copies whose bytes cross between host memory and a blob, as the caller sees them:
  // memcpy_h2d / memcpy_d2h kernel launches (any provider), AccessBlob instructions
  // submitted (InstructionsBuilder::WriteBlob and ReadBlob, their Submit halves, and
  // AccessBlob itself: a write counts host to device, a read device to host, whatever the
  // blob's device), and each blob written or read by WriteIdleHostBlobs / ReadIdleHostBlobs.
  // Device-to-device copies (`assign`) count in neither. I/O binding proves "no host copy"
  // with them (docs/design.md, "I/O binding").
  int64_t host_to_device_copies = 0;
  int64_t device_to_host_copies = 0;
  // Kernels' parallel regions (KernelContext::parallel, core/intra_op_pool.h): regions that
  // split across the device's intra-op threads, the chunks they ran, how many of those a
  // helper thread ran, and chunks a cancel skipped.
  int64_t parallel_regions = 0;
  int64_t parallel_chunks = 0;
  int64_t parallel_helped_chunks = 0;
  int64_t parallel_skipped_chunks = 0;
  std::string ToString() const;
};

// Thread-safe. Statistics only: every counter is relaxed, nothing is published through them.
struct VmCounters {
  std::atomic<int64_t> instructions{0};
  std::atomic<int64_t> op_calls{0};
  std::atomic<int64_t> stream_waits{0};
  std::atomic<int64_t> record_events{0};
  std::atomic<int64_t> releases{0};
  std::atomic<int64_t> barriers{0};
  std::atomic<int64_t> access_blobs{0};
  std::atomic<int64_t> fused_steps{0};
  std::atomic<int64_t> private_blobs{0};
  std::atomic<int64_t> stepless_releases{0};
  std::atomic<int64_t> events_created{0};
  std::atomic<int64_t> events_reused{0};
  std::atomic<int64_t> skipped{0};
  std::atomic<int64_t> max_in_flight{0};
  std::atomic<int64_t> submit_waits{0};
  std::atomic<int64_t> host_to_device_copies{0};
  std::atomic<int64_t> device_to_host_copies{0};
  ParallelCounters parallel;

  static void Add(std::atomic<int64_t>& counter, int64_t n = 1) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_COUNTERS_H_
