// A built graph's feeds and fetches, staged and read in one place: the checks of every
// feed against its blob (a host feed's dtype, shape and bytes; a device-resident feed's
// blob: CheckDeviceFeed), the copies into the feed blobs, the reads of the fetch blobs and
// the copies out of device-resident fetches (I/O binding: IoBinding, interpreter_options.h).
// The Interpreter owns one BoundIo and forwards its runs' feeds and fetches to it; nothing
// else in the interpreter touches a feed or a fetch after the build.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_IO_BINDING_H_
#define SLUICE_FRAMEWORK_INTERPRETER_IO_BINDING_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/ir/program_desc.h"
#include "vm/blob.h"
#include "vm/instructions_builder.h"
#include "vm/kernel.h"
#include "vm/stream.h"
#include "vm/virtual_machine.h"

namespace sluice::framework {

// Feeds given as host tensors, and as blobs (I/O binding): (name, value) pairs.
using Feeds = std::vector<std::pair<std::string, HostTensor>>;
using BlobFeeds = std::vector<std::pair<std::string, vm::BlobRef>>;

// The caller's feeds against `program`'s declarations, before anything is built: each host
// feed (CheckFeed) and each device-resident one on `device` of `vm` (CheckDeviceFeed) names
// a variable of the global block; a name given both ways is refused. NotFound for an
// unknown host feed, InvalidArgument otherwise, naming the feed.
absl::Status CheckFeedsAgainstProgram(const ir::ProgramDesc& program, const Feeds& feeds,
                                      const BlobFeeds& device_feeds, const vm::VirtualMachine& vm,
                                      const Device& device);

// Checks a feed value against its declaration: dtype, shape and byte count. InvalidArgument
// naming the feed. (The executor checks the caller's feeds against the caller's program
// before it builds; StageFeeds checks what a run stages against the built graph.)
absl::Status CheckFeed(absl::string_view name, const HostTensor& value, DataType dtype,
                       const Shape& shape);
// Checks a device-resident feed: a blob of `vm` (VirtualMachine::OwnsStorage: not null, not
// a precomputed graph's lazy blob, not released, not another VM's) on `device`, with the
// declared dtype and shape. InvalidArgument naming the feed.
absl::Status CheckDeviceFeed(absl::string_view name, const vm::BlobRef& blob,
                             const vm::VirtualMachine& vm, const Device& device, DataType dtype,
                             const Shape& shape);

// Thread-compatible, as the Interpreter that owns it: a run's StageFeeds and
// WaitForPendingCopies happen before its ReadFetches and CopyOutDeviceFetches, which happen
// before the next run's StageFeeds. The VM must outlive it.
class BoundIo {
 public:
  // How a device-resident feed or fetch is copied: an `assign` kernel on a stream.
  struct DeviceCopy {
    const vm::OpKernel* assign = nullptr;  // null: a host feed or fetch
    vm::Stream* stream = nullptr;          // the feed's or fetch's device, compute stream 0
  };
  // One feed or fetch of the build: its name, the graph's blob for it (on cpu, or on the
  // device where it is bound) and its copy.
  struct Port {
    std::string name;
    vm::BlobRef blob;
    DeviceCopy copy;
  };

  BoundIo() = default;
  // Makes an InstructionsBuilder of its own for the copies when any port is device-resident.
  BoundIo(vm::VirtualMachine* vm, std::vector<Port> feeds, std::vector<Port> fetches);

  // Checks every feed — a known feed name, given the way the build binds it (a host feed
  // as a HostTensor, a device-resident one as a blob), dtype and shape as bound, every feed
  // given — then copies host bytes into the host feed blobs and submits, for each
  // device-resident feed, an `assign` from the caller's blob into the feed blob, through
  // this object's builder, so soft sync and the engine order it after the blob's producer,
  // which must have been submitted before this call (work another builder holds back is
  // handed over first). InvalidArgument naming the feed, before anything is written.
  absl::Status StageFeeds(const Feeds& feeds, const BlobFeeds& device_feeds);
  // When copies were submitted since the last wait (by StageFeeds, or by the previous
  // run's CopyOutDeviceFetches, which read the graph's fetch blobs), waits on the host for
  // a barrier behind them: the graph's batch orders only its own instructions.
  absl::Status WaitForPendingCopies();
  // After the run completed: the fetched values, in fetch order, read from the host fetch
  // blobs (VirtualMachine::ReadIdleHostBlobs). A device-resident fetch's entry has its dtype
  // and shape and no bytes. The run's error for a poisoned fetch, FailedPrecondition for one
  // the run did not produce.
  absl::StatusOr<std::vector<HostTensor>> ReadFetches() const;
  // After the run completed, and before the next StageFeeds: for each device-resident
  // fetch, a new blob on the fetch's device filled by an `assign` from the fetch blob,
  // submitted (and handed to the engine) here. In fetch order; null for host fetches; empty
  // without device-resident fetches. Errors as ReadFetches.
  absl::StatusOr<std::vector<vm::BlobRef>> CopyOutDeviceFetches();

 private:
  vm::VirtualMachine* vm_ = nullptr;
  std::vector<Port> feeds_;
  std::vector<Port> fetches_;
  bool device_fetches_ = false;  // any fetch is device-resident
  // Submits the device copies; null without a device-resident feed or fetch.
  std::unique_ptr<vm::InstructionsBuilder> builder_;
  // Copies were submitted since the last wait for them.
  bool copies_pending_ = false;
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_IO_BINDING_H_
