// The recorded graph of eager autograd: a Node per recorded op, the AutogradMeta a tensor
// carries, and the GradSlot a gradient is kept in.
//
// Ownership, and why there are no cycles. A tensor that requires a gradient owns its
// AutogradMeta; a non-leaf's meta holds the node that produced it (grad_fn). A node holds
// its inputs' producers (edges, toward the leaves) and the forward tensors its gradient
// reads. When that gradient reads an op's *output*, the user gets an alias of the output
// (eager::internal::TensorState::NewAlias: same storage, its own meta) and the node keeps
// the owner, which has no meta: user tensor -> meta -> node -> owner, never back. So the
// graph lives exactly as long as some tensor that can reach it, and a forward pass whose
// backward never runs frees everything with its tensors.
//
// Thread-safety: a node is built by the recorder on the calling thread. Afterwards its
// released flag, saved tensors and `retained` slots change, under its `mu`: a backward pass
// holds it while it runs the node (passes sharing nodes are serialized node by node), and
// RetainGrad while it sets a slot. GradSlot has its own mutex.
#ifndef SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_NODE_H_
#define SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_NODE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/plain_mutex.h"
#include "core/shape.h"
#include "core/stream_id.h"
#include "framework/autograd/internal/grad_plan.h"
#include "framework/eager/internal/grad_hook.h"
#include "framework/eager/tensor.h"
#include "vm/attrs.h"

namespace sluice::autograd::internal {

class Node;

// A gradient kept for the user: a leaf's accumulated gradient, or a non-leaf's retained one.
struct GradSlot {
  PlainMutex mu;
  eager::Tensor grad ABSL_GUARDED_BY(mu);  // empty until a backward pass writes it
};

// Where the gradient of one forward input goes: the node that produced the input (its
// output `output`), or a leaf's slot, or nowhere (the input does not require a gradient).
struct Edge {
  std::shared_ptr<Node> node;
  int output = 0;
  std::shared_ptr<GradSlot> leaf;
  bool wanted() const { return node != nullptr || leaf != nullptr; }
};

// A forward tensor a gradient reads, and its storage's version when it was saved.
struct SavedTensor {
  eager::Tensor tensor;
  uint32_t version = 0;
};

struct OutputInfo {
  DataType dtype = DataType::kF32;
  Shape shape;
  Device device;
};

class Node {
 public:
  Node() = default;
  // Iterative: a chain of nodes (each the last holder of the one before, through an edge
  // and a saved tensor's meta) is freed in a loop, not by a recursion as deep as the chain.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& op() const { return plan->op; }

  const GradPlan* plan = nullptr;              // owned by the context's GradPlanCache
  absl::InlinedVector<Edge, 2> next;           // per flattened forward input
  absl::InlinedVector<OutputInfo, 1> outputs;  // per flattened forward output
  // Per flattened forward input / output: the tensor when the plan reads it, else empty.
  absl::InlinedVector<SavedTensor, 2> saved_inputs;
  absl::InlinedVector<SavedTensor, 1> saved_outputs;
  // Per output: where RetainGrad wants its gradient kept (null: nowhere).
  absl::InlinedVector<std::shared_ptr<GradSlot>, 1> retained;
  // The eager::StreamScope the op ran in (its gradient runs there too), if any.
  std::optional<StreamKey> stream;
  // Set once a pass without retain_graph ran it: its saved tensors are gone.
  bool released = false;
  PlainMutex mu;  // held by a backward pass while it runs this node (no waits inside)
};

// The meta a tensor that requires a gradient carries (eager::internal::GradMeta).
class AutogradMeta final : public eager::internal::GradMeta {
 public:
  std::shared_ptr<Node> grad_fn;  // null for a leaf
  int output = 0;                 // which output of grad_fn this tensor is
  // A leaf's accumulated gradient (made with the meta); a non-leaf's after RetainGrad.
  std::shared_ptr<GradSlot> grad;
};

}  // namespace sluice::autograd::internal

#endif  // SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_NODE_H_
