// The backward pass of eager autograd. From the roots' nodes it finds the recorded graph
// (depth first, counting each node's consumers), then runs the nodes in reverse
// dependence order (a node once every node that reads its outputs ran): it sums the
// gradients that reached each output, issues the node's grad ops through the eager
// context (recording off), and routes each input's gradient along its edge — into the
// producing node's buffer, a leaf's slot, or a capture. A node whose gradient was not
// needed by anything still counts down its consumers.
//
// Thread-compatible per pass; passes over disjoint graphs may run at once, and passes
// sharing nodes are serialized node by node (Node::mu).
#ifndef SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_ENGINE_H_
#define SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_ENGINE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "framework/autograd/internal/node.h"
#include "framework/eager/tensor.h"

namespace sluice::autograd::internal {

// A gradient Grad() asks for: of a leaf (its slot) or of a node's output. `grad` gets it.
struct Capture {
  std::shared_ptr<GradSlot> leaf;
  const Node* node = nullptr;
  int output = 0;
  eager::Tensor grad;
};

// Runs a pass from `roots` seeded with `seeds` (one each, already checked). With
// `captures` null the leaves accumulate their gradients; otherwise only the captures get
// gradients (and no leaf changes).
absl::Status RunBackward(const std::vector<eager::Tensor>& roots,
                         const std::vector<eager::Tensor>& seeds, bool retain_graph,
                         std::vector<Capture>* captures);

}  // namespace sluice::autograd::internal

#endif  // SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_ENGINE_H_
