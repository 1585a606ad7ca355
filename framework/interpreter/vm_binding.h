// Binding the lowered graph to a VM: each op func's stream key to a vm::Stream (dense
// stream indices for the passes after it), and each var slot to a blob. The only build
// steps before the back ends that create or look up VM objects.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_VM_BINDING_H_
#define SLUICE_FRAMEWORK_INTERPRETER_VM_BINDING_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/device.h"
#include "framework/interpreter/lowered_graph.h"
#include "framework/interpreter/scope.h"
#include "vm/stream.h"
#include "vm/virtual_machine.h"

namespace sluice::framework {

// The streams a block's funcs run on, by dense index in order of first use.
struct StreamTable {
  std::vector<vm::Stream*> streams;
  std::vector<int> func_stream;  // per op func: index into `streams`
};

// Looks up every func's stream (which must be set). Two keys the VM maps to one stream
// share an index. InvalidArgument naming the first func whose stream the VM refuses.
absl::StatusOr<StreamTable> BindStreams(vm::VirtualMachine& vm, const std::vector<OpFunc>& funcs);

// What the stream analysis needs to know of each stream (lowered_graph.h's StreamInfo):
// its device, whether it runs on the host, and its worker as a dense id — asked of the VM
// (VirtualMachine::RunsOnHost, HasOwnWorkers), not read from its threads.
std::vector<StreamInfo> DescribeStreams(const vm::VirtualMachine& vm,
                                        const std::vector<vm::Stream*>& streams);

// Blobs bound by BindBlobs, besides those stored in the slots.
struct BoundBlobs {
  // Persistables the scope does not hold yet: new lazy blobs, to be added to the root
  // scope once the build has succeeded.
  std::vector<std::pair<std::string, vm::BlobRef>> new_persistables;
  std::vector<Device> devices;  // of every slot, each once, in slot order
};

// Gives every slot a blob: a feed a new blob on its device (cpu, or the program's device for
// a device-resident feed), a persistable the scope's blob or a new lazy blob on its device,
// a temporary a new lazy blob on its device — or, for a device-resident fetch, a new blob
// with storage (VarSlot::device_fetch). Does not change `scope`. Errors as the VM reports
// them.
absl::StatusOr<BoundBlobs> BindBlobs(vm::VirtualMachine& vm, const Scope& scope, VarTable& vars);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_VM_BINDING_H_
