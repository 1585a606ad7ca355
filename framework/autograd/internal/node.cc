#include "framework/autograd/internal/node.h"

#include <utility>
#include <vector>

namespace sluice::autograd::internal {

Node::~Node() {
  // This node's producers, held here first so that the saved tensors (whose metas may hold
  // the same producers) can go without being their last holders; then each producer this
  // loop holds last gives up its own the same way, so no destructor recurses.
  std::vector<std::shared_ptr<Node>> producers;
  std::vector<eager::Tensor> tensors;
  auto take = [&](Node& node) {
    for (Edge& edge : node.next) {
      if (edge.node != nullptr) producers.push_back(std::move(edge.node));
    }
    for (SavedTensor& saved : node.saved_inputs) tensors.push_back(std::move(saved.tensor));
    for (SavedTensor& saved : node.saved_outputs) tensors.push_back(std::move(saved.tensor));
  };
  take(*this);
  while (true) {
    tensors.clear();  // their metas' holds on producers go; `producers` still holds them
    if (producers.empty()) break;
    std::shared_ptr<Node> node = std::move(producers.back());
    producers.pop_back();
    // use_count: relaxed, a hint; another holder that appears meanwhile just keeps it alive.
    if (node.use_count() == 1) take(*node);
  }
}

}  // namespace sluice::autograd::internal
