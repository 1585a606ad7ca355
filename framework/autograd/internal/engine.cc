#include "framework/autograd/internal/engine.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/autograd/internal/grad_mode.h"
#include "framework/autograd/internal/recorder.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/eager/internal/tensor_access.h"
#include "framework/eager/stream_scope.h"

namespace sluice::autograd::internal {
namespace {

using eager::Tensor;

// `sum` plus `more`, or `more` alone when `sum` is empty.
absl::Status AddInto(Tensor& sum, const Tensor& more) {
  if (!sum.valid()) {
    sum = more;
    return absl::OkStatus();
  }
  SLUICE_ASSIGN_OR_RETURN(sum, fn::Add(sum, more));
  return absl::OkStatus();
}

absl::Status AccumulateInto(GradSlot& slot, const Tensor& grad) {
  PlainMutexLock lock(&slot.mu);
  return AddInto(slot.grad, grad);
}

struct PendingNode {
  std::shared_ptr<Node> node;
  int consumers = 0;          // nodes of the pass that read its outputs and have not run
  std::vector<Tensor> grads;  // per output: the sum of what reached it
  // With captures (Grad): whether some path from this node reaches a capture, so its grad
  // ops must run. Without captures every node runs.
  bool leads_to_capture = false;
  std::vector<Node*> readers;  // with captures: the nodes of the pass that read its outputs
};

class Pass {
 public:
  Pass(eager::Context context, bool retain_graph, std::vector<Capture>* captures)
      : context_(std::move(context)), retain_graph_(retain_graph), captures_(captures) {}

  absl::Status Run(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds) {
    std::vector<std::shared_ptr<Node>> stack;
    for (size_t r = 0; r < roots.size(); ++r) {
      const AutogradMeta* meta = MetaOf(eager::internal::TensorAccess::State(roots[r]));
      if (meta->grad_fn == nullptr) {
        SLUICE_RETURN_IF_ERROR(ToLeaf(meta->grad, seeds[r]));
        continue;
      }
      PendingNode& pending = Discover(meta->grad_fn, stack);
      SLUICE_RETURN_IF_ERROR(AddInto(pending.grads[static_cast<size_t>(meta->output)], seeds[r]));
    }
    // Depth first from the roots: each edge to a node counts one consumer of it.
    while (!stack.empty()) {
      std::shared_ptr<Node> node = std::move(stack.back());
      stack.pop_back();
      for (const Edge& edge : node->next) {
        if (edge.node == nullptr) continue;
        PendingNode& producer = Discover(edge.node, stack);
        ++producer.consumers;
        if (captures_ != nullptr) producer.readers.push_back(node.get());
      }
    }
    if (captures_ != nullptr) MarkPathsToCaptures();
    // In discovery order, not the map's (addresses differ between runs and processes):
    // ranks running one program must issue its gradient collectives in one order.
    std::vector<Node*> ready;
    for (Node* node : discovered_) {
      if (pending_.at(node).consumers == 0) ready.push_back(node);
    }
    while (!ready.empty()) {
      Node* node = ready.back();
      ready.pop_back();
      SLUICE_RETURN_IF_ERROR(RunNode(pending_.at(node), ready));
    }
    return absl::OkStatus();
  }

 private:
  // The pass's entry for `node`, made (and pushed for discovery) on first sight.
  PendingNode& Discover(const std::shared_ptr<Node>& node,
                        std::vector<std::shared_ptr<Node>>& stack) {
    auto [it, inserted] = pending_.try_emplace(node.get());
    if (inserted) {
      discovered_.push_back(node.get());
      it->second.node = node;
      it->second.grads.resize(node->outputs.size());
      stack.push_back(node);
    }
    return it->second;
  }

  bool Captured(const Node* node) const {
    for (const Capture& capture : *captures_) {
      if (capture.node == node) return true;
    }
    return false;
  }
  bool Captured(const std::shared_ptr<GradSlot>& leaf) const {
    for (const Capture& capture : *captures_) {
      if (capture.leaf == leaf) return true;
    }
    return false;
  }

  // Grad computes what its captures need and nothing more: a node runs its grad ops only
  // when one of its inputs is captured or leads to a capture (a walk from the captures
  // toward the roots, over `readers`). The other nodes only count down.
  void MarkPathsToCaptures() {
    std::vector<Node*> frontier;
    auto mark = [&](Node* node) {
      PendingNode& pending = pending_.at(node);
      if (pending.leads_to_capture) return;
      pending.leads_to_capture = true;
      frontier.push_back(node);
    };
    for (auto& [node, pending] : pending_) {
      for (const Edge& edge : node->next) {
        if ((edge.leaf != nullptr && Captured(edge.leaf)) ||
            (edge.node != nullptr && Captured(edge.node.get()))) {
          mark(node);
          break;
        }
      }
    }
    while (!frontier.empty()) {
      Node* node = frontier.back();
      frontier.pop_back();
      for (Node* reader : pending_.at(node).readers) mark(reader);
    }
  }

  absl::Status ToLeaf(const std::shared_ptr<GradSlot>& slot, const Tensor& grad) {
    if (captures_ == nullptr) return AccumulateInto(*slot, grad);
    for (Capture& capture : *captures_) {
      if (capture.leaf == slot) SLUICE_RETURN_IF_ERROR(AddInto(capture.grad, grad));
    }
    return absl::OkStatus();
  }

  absl::Status RunNode(PendingNode& pending, std::vector<Node*>& ready) {
    Node& node = *pending.node;
    PlainMutexLock lock(&node.mu);
    // What reached the outputs is final now: captures and retained gradients take it.
    for (size_t k = 0; k < pending.grads.size(); ++k) {
      if (!pending.grads[k].valid()) continue;
      if (captures_ != nullptr) {
        for (Capture& capture : *captures_) {
          if (capture.node == &node && capture.output == static_cast<int>(k)) {
            SLUICE_RETURN_IF_ERROR(AddInto(capture.grad, pending.grads[k]));
          }
        }
      } else if (node.retained[k] != nullptr) {
        SLUICE_RETURN_IF_ERROR(AccumulateInto(*node.retained[k], pending.grads[k]));
      }
    }
    std::vector<Tensor> input_grads(node.next.size());
    bool any_grad = false;
    for (const Tensor& g : pending.grads) any_grad = any_grad || g.valid();
    bool wanted = false;
    for (const Edge& edge : node.next) wanted = wanted || edge.wanted();
    const bool runs = any_grad && wanted && (captures_ == nullptr || pending.leads_to_capture);
    if (runs) {
      // Where the forward op ran: its gradient's stream.
      std::optional<eager::StreamScope> scope;
      if (node.stream.has_value()) scope.emplace(*node.stream);
      SLUICE_RETURN_IF_ERROR(IssueGradOps(node, pending.grads, input_grads));
    }
    pending.grads.clear();  // the pass holds no gradient it no longer needs
    for (size_t i = 0; i < node.next.size(); ++i) {
      const Edge& edge = node.next[i];
      if (edge.node != nullptr) {
        PendingNode& producer = pending_.at(edge.node.get());
        if (input_grads[i].valid()) {
          SLUICE_RETURN_IF_ERROR(
              AddInto(producer.grads[static_cast<size_t>(edge.output)], input_grads[i]));
        }
        if (--producer.consumers == 0) ready.push_back(edge.node.get());
      } else if (edge.leaf != nullptr && input_grads[i].valid()) {
        SLUICE_RETURN_IF_ERROR(ToLeaf(edge.leaf, input_grads[i]));
      }
    }
    if (!retain_graph_ && (runs || captures_ == nullptr)) {
      // Saved tensors go as soon as the node's grad ops are issued (they hold the
      // storage until those ops ran, through the VM).
      node.saved_inputs.clear();
      node.saved_outputs.clear();
      node.released = true;
    }
    return absl::OkStatus();
  }

  absl::Status IssueGradOps(Node& node, const std::vector<Tensor>& output_grads,
                            std::vector<Tensor>& input_grads) {
    if (node.released) {
      return absl::FailedPreconditionError(absl::StrCat(
          "backward through op '", node.op(),
          "' a second time: an earlier backward pass freed its graph (pass retain_graph "
          "to keep it)"));
    }
    const GradPlan& plan = *node.plan;
    if (!plan.error.ok()) {
      return absl::Status(plan.error.code(), absl::StrCat("backward through op '", node.op(),
                                                          "': ", plan.error.message()));
    }
    for (bool inputs : {true, false}) {
      const absl::Span<const SavedTensor> saved =
          inputs ? absl::MakeConstSpan(node.saved_inputs) : absl::MakeConstSpan(node.saved_outputs);
      for (size_t i = 0; i < saved.size(); ++i) {
        const SavedTensor& s = saved[i];
        if (!s.tensor.valid()) continue;
        const uint32_t now = eager::internal::TensorAccess::State(s.tensor)->version();
        if (now != s.version) {
          return absl::FailedPreconditionError(absl::StrCat(
              "backward through op '", node.op(), "': its ", inputs ? "input " : "output ", i,
              " was modified in place after the op saved it (version ", s.version, ", now ", now,
              ")"));
        }
      }
    }
    for (const GradStep& step : plan.steps) {
      bool needed = false;
      for (int w : step.writes) {
        needed = needed || (w >= 0 && node.next[static_cast<size_t>(w)].wanted());
      }
      if (!needed) continue;
      std::vector<std::vector<Tensor>> inputs(step.inputs.size());
      for (size_t slot = 0; slot < step.inputs.size(); ++slot) {
        for (const GradRef& ref : step.inputs[slot]) {
          const size_t k = static_cast<size_t>(ref.index);
          switch (ref.kind) {
            case GradRef::Kind::kInput:
              inputs[slot].push_back(node.saved_inputs[k].tensor);
              break;
            case GradRef::Kind::kOutput:
              inputs[slot].push_back(node.saved_outputs[k].tensor);
              break;
            case GradRef::Kind::kOutputGrad:
              if (output_grads[k].valid()) {
                inputs[slot].push_back(output_grads[k]);
              } else if (!step.optional[slot]) {
                const OutputInfo& out = node.outputs[k];
                SLUICE_ASSIGN_OR_RETURN(Tensor zeros, fn::FillConstant(context_, out.shape, 0.0,
                                                                       out.dtype, out.device));
                inputs[slot].push_back(std::move(zeros));
              }
              break;
          }
        }
      }
      absl::StatusOr<std::vector<Tensor>> results = context_.Call(step.type, inputs, step.attrs);
      if (!results.ok()) {
        return absl::Status(
            results.status().code(),
            absl::StrCat("backward through op '", node.op(), "': ", results.status().message()));
      }
      for (size_t o = 0; o < step.writes.size() && o < results->size(); ++o) {
        const int w = step.writes[o];
        if (w < 0 || !node.next[static_cast<size_t>(w)].wanted()) continue;
        SLUICE_RETURN_IF_ERROR(AddInto(input_grads[static_cast<size_t>(w)], (*results)[o]));
      }
    }
    return absl::OkStatus();
  }

  eager::Context context_;
  const bool retain_graph_;
  std::vector<Capture>* const captures_;
  absl::flat_hash_map<Node*, PendingNode> pending_;
  std::vector<Node*> discovered_;  // pending_'s keys in the order the walk found them
};

}  // namespace

absl::Status RunBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
                         bool retain_graph, std::vector<Capture>* captures) {
  ++no_grad_depth;  // grad ops record nothing
  Pass pass(roots[0].context(), retain_graph, captures);
  const absl::Status status = pass.Run(roots, seeds);
  --no_grad_depth;
  return status;
}

}  // namespace sluice::autograd::internal
