// vm::Stream: binds a StreamId to its ep::Stream, the StreamPolicy that runs instructions
// on it and the ThreadCtx whose worker does so. The VirtualMachine creates
// one per stream on first use and owns it.
#ifndef SLUICE_VM_STREAM_H_
#define SLUICE_VM_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>

#include "core/stream_id.h"
#include "core/waker.h"
#include "ep/stream.h"

namespace sluice::vm {

class Instruction;
class StreamPolicy;
class ThreadCtx;

// Identity fields are immutable and readable from any thread. The completion-tracking
// fields belong to the ThreadCtx worker, except `points_reached`, which the ep stream's own
// thread bumps when it reaches a completion point.
class Stream {
 public:
  // Defined in stream_policy.cc (it asks the policy).
  Stream(ep::Stream* ep_stream, StreamPolicy* policy, ThreadCtx* thread_ctx, int dense_index);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  StreamId id() const { return ep_stream_->id(); }
  const StreamKey& key() const { return ep_stream_->key(); }
  const std::string& name() const { return key_string_; }
  ep::Stream* ep_stream() const { return ep_stream_; }
  StreamPolicy* policy() const { return policy_; }
  // True for asynchronous streams the host can run work on (sim): kernels settle poison in
  // stream order there (see InstructionExecutor). Cached: asked for every op.
  bool poison_in_stream_order() const { return poison_in_stream_order_; }
  ThreadCtx* thread_ctx() const { return thread_ctx_; }
  // True for streams whose instructions launch in the order they were submitted, even when
  // independent: ccl streams, where every rank must issue its collectives in one order.
  bool in_order() const { return in_order_; }
  // 0, 1, 2, ... in creation order within one VM: an index into per-stream arrays (the sync
  // checker's vector clocks).
  int dense_index() const { return dense_index_; }

  // --- Completion tracking for asynchronous streams (see AsyncStreamPolicy). ---
  // Launched instructions not yet known complete, oldest first. Worker only.
  std::deque<Instruction*> unretired;
  // For each completion point enqueued and not yet collected: how many of `unretired` it
  // covers. Worker only.
  std::deque<size_t> point_sizes;
  // Instructions launched since the last completion point. Worker only.
  size_t since_point = 0;
  // Completion points collected by the worker. Worker only.
  uint64_t points_seen = 0;
  // Completion points the ep stream has passed: written by the ep stream's thread (release),
  // read by the worker (acquire) before it retires what the points cover.
  std::atomic<uint64_t> points_reached{0};

  // The last instruction submitted to an in_order() stream that has not retired: the
  // engine makes the next one depend on it. Scheduler only.
  Instruction* last_in_order = nullptr;

  // --- Host waits between synchronous streams of different ThreadCtxs (see Engine). ---
  // Instructions dispatched to this stream so far; each gets the next number as its
  // `stream_seq`. Scheduler only.
  uint64_t dispatched_seq = 0;
  // The `stream_seq` of the last instruction the worker ran on this stream (synchronous
  // streams only): written by the worker (seq_cst, then `progress.Notify()`), read by
  // workers of other ThreadCtxs waiting for it.
  alignas(64) std::atomic<uint64_t> ran_seq{0};
  Waker progress;

 private:
  ep::Stream* const ep_stream_;
  StreamPolicy* const policy_;
  ThreadCtx* const thread_ctx_;
  const std::string key_string_;
  const int dense_index_;
  const bool poison_in_stream_order_;
  const bool in_order_;
};

// Whether a StreamWait from `from` to `to` means something: two different streams of one
// device that is asynchronous (a device-side wait), or cpu streams run by two different
// ThreadCtxs (the consumer's worker waits on the host). The rule of vm/stream_wait_rule.h
// on the streams' facts; defined in stream_policy.cc.
bool CanStreamWait(const Stream& from, const Stream& to);
// Synchronous streams of two different ThreadCtxs: a StreamWait between them is honoured on
// the host, by the consumer's worker (Instruction::HostWait), not by a device.
bool WaitsOnHost(const Stream& from, const Stream& to);
// The rule above in words, for errors: "two different streams of one asynchronous device,
// or cpu streams of two workers".
extern const char kStreamWaitRule[];

}  // namespace sluice::vm

#endif  // SLUICE_VM_STREAM_H_
