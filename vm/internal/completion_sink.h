// The two narrow interfaces through which completions travel back up the VM, so that the
// worker does not know the engine and a stream policy does not know the worker:
//  - CompletionSink: where a worker (ThreadCtx) hands the instructions it found complete
//    and asks for scheduling. The Engine implements it.
//  - CompletionWatcher: what an asynchronous stream's completion point (host code the
//    stream runs in order, StreamPolicy::Flush) wakes, so that completed work is collected.
//    The ThreadCtx that launched on the stream implements it.
// One virtual call per worker batch and per completion point: not per instruction.
#ifndef SLUICE_VM_INTERNAL_COMPLETION_SINK_H_
#define SLUICE_VM_INTERNAL_COMPLETION_SINK_H_

#include "core/intrusive_queue.h"
#include "vm/instruction.h"

namespace sluice::vm {

class CompletionSink {
 public:
  // Worker threads: instructions that are complete, in any order.
  virtual void Complete(Chain<Instruction> chain) = 0;
  // Any thread: schedule now (wake the scheduler thread, or in caller-thread mode schedule
  // unless another thread already is).
  virtual void Kick() = 0;

 protected:
  ~CompletionSink() = default;
};

class CompletionWatcher {
 public:
  // Any thread (an ep stream reaching a completion point): look for completed work.
  virtual void Poke() = 0;

 protected:
  ~CompletionWatcher() = default;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_INTERNAL_COMPLETION_SINK_H_
