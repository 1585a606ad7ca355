// The in-place pass: an op writes its output into the storage of an input that dies at that
// op, where the op's schema declares the (input, output) pair in place (ops::OpSchema::InPlace,
// the kernel's vm::InPlaceContract) — Paddle's `inplace` pass and ONNX Runtime's MayInplace
// reuse, over the GC plan's release nodes. A chain of elementwise temporaries then runs on
// one buffer instead of two.
//
// The rules, for op func f, a declared pair of its operand positions (i -> o), X = input i,
// Y = output o; every one must hold:
//  - the kernel declares its contract (a kernel without one, e.g. a compiled subgraph or a
//    control step, is left alone), and every position where f reads X pairs with o;
//  - X is a temporary (not a feed, a fetch or a persistable), Y too, Y != X, and f does not
//    also write X;
//  - f is Y's first writer and writes Y once; Y took no storage yet;
//  - f is X's last toucher on every stream: X's release comes right after f (gc_plan.h), is
//    not a shared release, runs on f's stream and depends on touchers of that stream alone —
//    which the GC plan does only when every toucher on another stream is a transitive
//    predecessor of f (its "ordered" case);
//  - X and Y have the same device, data type and shape;
//  - X's storage is its own: it is not already promised to another variable (a release can
//    give its storage away once).
// Then Y is bound to X's blob and X's release node is marked `handoff_to = Y`: it runs no
// step and stays an ordering point, as a storage hand-off's release does (storage_handoff.h).
// Y may in turn pass the storage on. The pass runs before the storage hand-offs, which skip
// what it took and never rebind a giver (VarSlot::gave_in_place: its blob is Y's too).
// Without release nodes (GC plan off) nothing changes.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_INPLACE_PASS_H_
#define SLUICE_FRAMEWORK_INTERPRETER_INPLACE_PASS_H_

#include <cstdint>
#include <vector>

#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework {

// Applies the rules above over `nodes` (PlanNodes' result for `funcs`): marks the releases
// and rebinds the takers' slots in `vars` (slots must be bound: BindBlobs), setting
// VarSlot::took_storage on each taker and VarSlot::gave_in_place on each giver. Returns the number
// of reuses. Pure but for its in/out arguments; thread-compatible.
int PlanInPlace(const std::vector<OpFunc>& funcs, std::vector<Node>& nodes, VarTable& vars);

// The most bytes of temporaries' storage held at once when the nodes run in order (the list
// schedule's order; a bound, not a measurement, when streams overlap): a temporary
// allocates at its first write unless it took a released one's storage (hand-off or in
// place), and frees at its release unless that release hands the storage on (a shared
// release frees at its last drop in order). Pure function.
int64_t PeakTemporaryBytes(const std::vector<OpFunc>& funcs, const std::vector<Node>& nodes,
                           const VarTable& vars);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_INPLACE_PASS_H_
