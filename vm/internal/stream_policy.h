// StreamPolicy: how instructions run on one kind of stream and how the VM learns they are
// done. Two policies cover the providers:
//  - HostStreamPolicy (cpu): the ep stream runs work on the calling worker thread, so an
//    instruction is complete when its launch returns.
//  - AsyncStreamPolicy (sim, cuda): work is enqueued; completion is not tracked per
//    instruction. After each batch the worker enqueues one completion point (host code run
//    by the stream in order); when the stream reaches it, every instruction launched before
//    it is complete. RecordEvent and StreamWait still record their pooled events — those
//    order other streams on the device; the completion point tells the host.
#ifndef SLUICE_VM_INTERNAL_STREAM_POLICY_H_
#define SLUICE_VM_INTERNAL_STREAM_POLICY_H_

#include <memory>

#include "absl/status/status.h"
#include "core/intrusive_queue.h"
#include "ep/stream.h"
#include "vm/instruction.h"
#include "vm/internal/completion_sink.h"
#include "vm/stream.h"

namespace sluice::vm {

// Stateless and immutable after construction: one instance may serve many streams; every
// method is called by the worker of the stream's ThreadCtx.
class StreamPolicy {
 public:
  virtual ~StreamPolicy() = default;

  // True when an instruction is complete once its launch returns.
  virtual bool synchronous() const = 0;
  // True when host code may address the stream's device memory (AccessBlob, host reads and
  // writes of its blobs): cpu only. sim, like cuda, is not: its memory is reached through
  // stream-ordered copies, so a host read that would fail on a GPU fails on sim too.
  virtual bool host_accessible() const = 0;
  // True when a failed instruction's outputs are poisoned in stream order (a host task on
  // the stream) rather than at once: sim, whose streams run host tasks cheaply.
  virtual bool poison_in_stream_order() const { return false; }

  // `instruction` was just launched on `stream`: append it to `done` if it is complete,
  // or track it until it is.
  virtual void OnLaunched(Stream& stream, Instruction* instruction, Chain<Instruction>& done) = 0;
  // After a batch: arrange for everything launched on `stream` to be reported complete
  // eventually (`watcher`, the stream's worker, is poked when that may have happened).
  virtual void Flush(Stream& stream, CompletionWatcher& watcher, Chain<Instruction>& done) = 0;
  // Appends instructions of `stream` known complete since the last call.
  virtual void Collect(Stream& stream, Chain<Instruction>& done) = 0;
  // True when `stream` has launched instructions not yet reported complete.
  virtual bool HasUnretired(const Stream& stream) const = 0;
};

// The policy for an ep stream of the given device type (cpu: host; sim and cuda: async,
// memory not host-addressable; sim poisons in stream order).
std::unique_ptr<StreamPolicy> CreateStreamPolicy(const ep::Stream& stream);

}  // namespace sluice::vm

#endif  // SLUICE_VM_INTERNAL_STREAM_POLICY_H_
