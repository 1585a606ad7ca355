// VmOptions and ShutdownMode: how a VirtualMachine (vm/virtual_machine.h) is set up and
// how it stops. Plain values, with no behaviour of their own: a header of their own so that
// the front door and the machine behind it (vm/internal/vm_core.h) share them without
// including each other.
#ifndef SLUICE_VM_VM_OPTIONS_H_
#define SLUICE_VM_VM_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace sluice::vm {

struct VmOptions {
  enum class Scheduling {
    kDedicatedThread,  // a scheduler thread of its own
    kCallerThread,     // on the threads that submit work or report completions
  };
  Scheduling scheduling = Scheduling::kDedicatedThread;
  // Submitted, unretired instructions at most; Submit waits beyond (backpressure). A fused
  // run (max_fused_steps) counts as one instruction.
  int64_t max_in_flight = 1 << 16;
  // Check every tensor access against happens-before (vm/sync_checker.h).
  bool check_sync = false;
  // When not empty, every submitted instruction is written to this file
  // (docs/instruction_record_format.md) and final blob checksums are added at shutdown.
  std::string record_path;
  // How long idle VM threads spin before parking.
  std::chrono::nanoseconds spin{20000};
  // How long a ThreadCtx worker that ran out of instructions keeps polling for more before
  // it parks (it yields the core between polls). Longer than `spin`: work often comes in
  // runs (a precomputed graph per step), and a parked worker costs the next run a wake-up.
  std::chrono::nanoseconds idle_spin{200000};
  // Eager fusion: consecutive OpCalls and Releases an InstructionsBuilder issues on one
  // stream while its earlier ones are still held back join them as one instruction
  // (StepSequence) of at most this many steps. 0 or 1: off. Off as well while recording
  // (a recording keeps one line per call) and in caller-thread scheduling (nothing is held
  // back there).
  int max_fused_steps = 64;
  // Small eager blobs that died with their storage wait for a NewBlob of the same stream,
  // dtype and shape (parked blobs; see internal::BlobPool): at most this many (each at
  // most Blob::kMaxParkedBytes; the oldest goes first). 0: none waits; at most 2^20.
  static constexpr int64_t kDefaultMaxParkedBlobs = 4096;
  int64_t max_parked_blobs = kDefaultMaxParkedBlobs;
};

enum class ShutdownMode {
  kFinish,  // run everything already submitted
  kCancel,  // skip everything not yet launched (status Cancelled); launched work finishes
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_VM_OPTIONS_H_
