#include "vm/counters.h"

#include "absl/strings/str_cat.h"

namespace sluice::vm {

std::string VmStats::ToString() const {
  return absl::StrCat(
      "instructions=", instructions, " op_calls=", op_calls, " stream_waits=", stream_waits,
      " record_events=", record_events, " releases=", releases, " barriers=", barriers,
      " access_blobs=", access_blobs, " fused_steps=", fused_steps,
      " private_blobs=", private_blobs, " stepless_releases=", stepless_releases,
      " recycled_blobs=", recycled_blobs, " parked_blobs=", parked_blobs,
      " evicted_blobs=", evicted_blobs, " events_created=", events_created,
      " events_reused=", events_reused, " skipped=", skipped, " errors=", errors,
      " max_in_flight=", max_in_flight, " submit_waits=", submit_waits,
      " host_to_device_copies=", host_to_device_copies,
      " device_to_host_copies=", device_to_host_copies, " parallel_regions=", parallel_regions,
      " parallel_chunks=", parallel_chunks, " parallel_helped_chunks=", parallel_helped_chunks,
      " parallel_skipped_chunks=", parallel_skipped_chunks);
}

}  // namespace sluice::vm
