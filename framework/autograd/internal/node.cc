#include "framework/autograd/internal/node.h"

#include <atomic>
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
    // use_count is a relaxed load: a count of 1 means every other holder has let go, and
    // the fence orders their last reads of the node (a pass that discovered it) before the
    // moves below. Another holder cannot appear: holders are made from holders.
    if (node.use_count() == 1) {
      std::atomic_thread_fence(std::memory_order_acquire);
      take(*node);
    }
  }
}

}  // namespace sluice::autograd::internal
