// Placement: where each resolved op runs, and the copies that bring values to it.
//  - An op whose schema has a placement rule (the copies) runs where the rule says, and
//    its temporary outputs live on the rule's output device.
//  - Any other op runs on the block's device: on the stream its "stream" attribute names
//    ("compute:1" on that device), else on a compute stream the list schedule picks
//    (list_schedule.h). Its inputs on another device are copied over first by an inserted
//    `memcpy_h2d` / `memcpy_d2h`; its outputs must already live on its device.
//  - Fetched values on another device are copied back to cpu, except device-resident
//    fetches (I/O binding, VarSlot::device_fetch), which stay where they live; a persistable
//    among them is copied by an `assign` into a temporary "<var>@fetch" on its device at the
//    end of the run (its blob is the scope's and may be lazy).
// A copy of a variable to a device is reused by later readers until an op writes the
// variable again (then the copy is stale and the next reader gets a fresh one).
//  - An op naming one of its inputs as an output, in a pair its schema does not declare in
//    place (ops::OpSchema::InPlace), writes a fresh temporary "<var>@alias<op>" instead, and
//    an inserted `assign` on its device and stream copies that back into the variable right
//    after it (the aliasing rule, docs/design.md "Aliasing"): its kernel never sees the alias.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_PLACEMENT_H_
#define SLUICE_FRAMEWORK_INTERPRETER_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/device.h"
#include "framework/interpreter/lowered_graph.h"
#include "framework/interpreter/op_resolution.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"

namespace sluice::framework {

// The placed block: op funcs in run order (each inserted copy right before its first
// reader; fetch copies last), kernels of block ops still to be chosen.
struct PlacedBlock {
  std::vector<OpFunc> funcs;
  // Var slot per fetch: on cpu (a copy when it lives elsewhere), or for a device-resident
  // fetch where it lives (a persistable's "<var>@fetch" copy).
  std::vector<int> fetch_slots;
  int64_t inserted_copies = 0;
  absl::Status error;  // the first failure; funcs and fetch_slots stop before it
};

// Places `resolved` (a prefix of the block's ops, as ResolveOps returned it) on `device`.
// Appends a slot to `vars` per inserted copy, moves temporaries written by a placement
// rule to its output device, and marks fetch slots fetched. Errors (InvalidArgument naming
// the op): the placement rule fails, a bad "stream" attribute, an op writing a variable
// that lives on another device; registry errors of the copy ops as the registry says.
PlacedBlock PlaceOps(const ResolvedBlock& resolved, const ops::OpRegistry& registry,
                     const Device& device, VarTable& vars);

// Resolution (ResolveOps, with `program` for control flow), placement and kernel choice
// (ChooseKernels) of `block`, each over the ops the step before it got through: the error
// reported is that of the first op to fail any of them. What every block's lowering
// starts with, block 0's and sub-blocks' alike.
absl::StatusOr<PlacedBlock> ResolveAndPlace(const ir::ProgramDesc& program,
                                            const ir::BlockDesc& block,
                                            const ops::OpRegistry& registry, const Device& device,
                                            VarTable& vars,
                                            const std::vector<std::string>& fetch_names);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_PLACEMENT_H_
