// Variable collection: a block's variables as the lowered graph's VarTable (lowered_graph.h),
// with each variable's kind (fed, persistable, temporary) and home device; and the
// persistables a block needs a value for before it runs.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_VAR_TABLE_H_
#define SLUICE_FRAMEWORK_INTERPRETER_VAR_TABLE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/device.h"
#include "framework/interpreter/interpreter_options.h"
#include "framework/interpreter/lowered_graph.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework {

// One slot per variable of `block`, in declaration order. Feeds live on cpu, or on `device`
// when `io` binds them there; persistables on the device of the scope's existing value, else
// `device`; temporaries on `device`. Fetched variables are marked, and those `io` keeps on
// their device marked device_fetch. Errors: a feed or fetch that is not a variable of the
// block (NotFound), a persistable or twice-listed feed, a device feed or fetch of `io` that
// is not among the feeds or fetches (InvalidArgument naming it), a persistable whose scope
// value has another dtype or shape (InvalidArgument). Reads `scope`, never changes it.
absl::StatusOr<VarTable> CollectVars(const ir::BlockDesc& block,
                                     const std::vector<std::string>& feed_names,
                                     const std::vector<std::string>& fetch_names,
                                     const Device& device, const Scope& scope,
                                     const IoBinding& io = {});

// The persistables `funcs` read before any of them writes them, in first-read order, then
// the fetched persistables no func writes (they are read at the end of a run). Each listed
// once. Pure function.
std::vector<int> PersistablesReadBeforeWritten(const std::vector<OpFunc>& funcs,
                                               const VarTable& vars,
                                               const std::vector<std::string>& fetch_names);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_VAR_TABLE_H_
