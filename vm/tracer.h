// Tracer: collects a timeline of what ran where — one slice per OpCall (or sequence step),
// with its stream, op name and wall-clock begin/end, and one per loop iteration a control
// step ran — for a Chrome trace of a run (framework/executor writes the JSON). Off unless a Tracer
// is installed on the VM; then every kernel's host work is timed where it runs (the cpu worker or a
// sim stream thread).
#ifndef SLUICE_VM_TRACER_H_
#define SLUICE_VM_TRACER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace sluice::vm {

class Stream;

// Thread-safe: workers and stream threads add slices concurrently.
class Tracer {
 public:
  struct Slice {
    const Stream* stream;    // outlives the tracer's user: streams live as long as the VM
    absl::string_view name;  // the kernel's name (static storage), or one Intern returned
    int64_t begin_ns;        // steady clock
    int64_t end_ns;
    int64_t iteration = -1;  // >= 0: the slice is this iteration of the loop `name`
  };

  static int64_t NowNs();

  void Add(const Slice& slice) {
    absl::MutexLock lock(&mu_);
    slices_.push_back(slice);
  }
  // A copy of `name` that lives as long as the tracer, for slices named by something that
  // may go away before the trace is written (a loop of a graph that is then destroyed).
  absl::string_view Intern(absl::string_view name) {
    absl::MutexLock lock(&mu_);
    return *names_.emplace(name).first;
  }
  // Everything added so far, in arrival order; the tracer is empty afterwards.
  std::vector<Slice> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(slices_);
  }

 private:
  absl::Mutex mu_;
  std::vector<Slice> slices_ ABSL_GUARDED_BY(mu_);
  absl::node_hash_set<std::string> names_ ABSL_GUARDED_BY(mu_);  // stable addresses
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_TRACER_H_
