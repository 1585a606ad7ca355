// Global tensors in static programs: a program written on logical tensors, plus the
// layouts of the values it starts from, becomes the program each rank runs on its parts
// (OneFlow's lazy global mode, as one pass). Each op gets its output layout from the same
// rules as eager global ops (sbp_signature.h); where an input has another layout than the
// op needs, the pass inserts the conversion's ops (boxing.h's steps: collectives over
// mesh-axis groups, transposes, splits, zeros) before it; every variable is declared with
// its local shape. A rank outside the placement gets a program with no ops.
//
// Variables read before any op writes them (feeds, persistables) take the layout given in
// `layouts`, else broadcast (every rank holds the whole value). Ops outside the rules run
// on broadcast inputs, so programs of any op are right, if not always lean. A variable
// written by an op must end in one layout: an in-place update that would change a
// variable's layout (an optimizer on a split parameter, for now) is Unimplemented, naming
// the op and the variable.
#ifndef SLUICE_FRAMEWORK_GLOBAL_GLOBAL_PROGRAM_H_
#define SLUICE_FRAMEWORK_GLOBAL_GLOBAL_PROGRAM_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/global/placement.h"
#include "framework/global/sbp.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"

namespace sluice::global {

struct GlobalProgramOptions {
  // Layouts of the values the program starts from (feeds, persistables).
  std::map<std::string, NdSbp> layouts;
  // Variables to deliver whole (broadcast) at the end of the block: NAME's value in a new
  // variable NAME@whole, to fetch.
  std::vector<std::string> whole;
};

struct GlobalProgram {
  framework::ir::ProgramDesc program;    // what this rank runs
  std::map<std::string, NdSbp> layouts;  // every variable's layout
  int64_t boxing_ops = 0;                // ops inserted to convert layouts
  bool excluded = false;                 // this rank is outside the placement: no ops
};

// The program `rank` runs for `logical` on `placement`. InvalidArgument for a layout that
// does not fit a variable's shape or the placement, or an unknown variable in `layouts` or
// `whole`; Unimplemented for control flow (sub-blocks) and layout-changing in-place
// updates; the ops' own errors, naming them.
absl::StatusOr<GlobalProgram> MakeGlobalProgram(const framework::ir::ProgramDesc& logical,
                                                const ops::OpRegistry& registry,
                                                const Placement& placement,
                                                const GlobalProgramOptions& options, int rank);

}  // namespace sluice::global

#endif  // SLUICE_FRAMEWORK_GLOBAL_GLOBAL_PROGRAM_H_
