// The add-to pass: a gradient that several ops contribute to is accumulated where it lies —
// Paddle's `addto` pass and its ops' `use_addto`. Autodiff writes each contribution to a
// temporary of its own and sums them after the last (framework/autodiff/backward.h,
// "Accumulation"); here the first contributor writes the sum's output directly and each
// later one adds into it (vm::kAddToAttr, which the kernel declares it honours:
// vm::OpKernel::CanAddTo), and the `sum` op goes. The contributions' temporaries are never
// allocated, and one kernel launch fewer runs.
//
// The rules, for a `sum` func s with inputs g_0 .. g_k (k >= 1, in the sum's order) and
// output Out; every one must hold, else s is left alone:
//  - s is Out's first toucher (no func before s reads or writes Out) and writes only Out;
//  - each g_i is a temporary (not fed, fetched or persistable) on Out's device with Out's
//    dtype and shape, written once, by a func w_i other than s, at one output position,
//    and read by s alone, once;
//  - every w_i is an op with its kernel chosen (not a control-flow func, whose step binds
//    its outputs by name when it is built, after this pass);
//  - w_0 < w_1 < ... < w_k < s: the contributors come in the sum's order, so the
//    accumulation adds in the order the sum did and the results are bit-identical
//    (((g_0 + g_1) + g_2) ...);
//  - for i >= 1, w_i's kernel can add into that output (CanAddTo) and does not already add
//    into it.
// Then w_0 writes Out, each later w_i adds into Out (its kAddToAttr bit set, and Out added
// to OpFunc::accumulates: a read as well as a write, so the dependence graph orders the
// contributors in program order on any stream count), and s is removed from `funcs`.
// Runs after subgraph fusion (a compiled group's kernel adds into nothing; a sum fused with
// its contributions already keeps no temporary) and before the dependence graph.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_ADDTO_PASS_H_
#define SLUICE_FRAMEWORK_INTERPRETER_ADDTO_PASS_H_

#include <vector>

#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework {

// What the pass did.
struct AddToStats {
  int sums_removed = 0;
  int addto_writes = 0;  // contributions that add into their sum's output
};

// Applies the rules above to `funcs` (placed, before BuildDependencies). Pure but for its
// in/out argument; thread-compatible.
AddToStats PlanAddTo(std::vector<OpFunc>& funcs, const VarTable& vars);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_ADDTO_PASS_H_
