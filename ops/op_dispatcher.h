// OpDispatcher: runs one op eagerly through the VM by name — the common core of the eager
// front end (framework/eager), the kernel tests and the tools. One call:
//  1. finds the schema and normalizes the attributes (defaults, types);
//  2. checks the inputs: slot arity, all on one device unless the schema places the op
//     itself (copies);
//  3. infers output dtypes and shapes;
//  4. places the op: the schema's placement rule, else the first input's device, else the
//     caller's default device; compute stream 0 of that device unless told otherwise;
//  5. picks the kernel for (op, device type, key dtype), allocates the outputs on the
//     chosen stream's device, and hands the call to InstructionsBuilder::Call (soft sync).
// Every error is returned before anything is enqueued, naming the op and the operands.
#ifndef SLUICE_OPS_OP_DISPATCHER_H_
#define SLUICE_OPS_OP_DISPATCHER_H_

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/device.h"
#include "core/stream_id.h"
#include "ops/op_registry.h"
#include "vm/attrs.h"
#include "vm/blob.h"
#include "vm/instructions_builder.h"
#include "vm/owned_blob.h"
#include "vm/virtual_machine.h"

namespace sluice::ops {

// Operands per slot, in the schema's slot order (inline up to four slots: an eager call
// allocates nothing for its operand lists).
using SlotBlobs = absl::InlinedVector<vm::BlobList, 4>;

struct DispatchOptions {
  // Device for ops without inputs and without a placement rule.
  Device default_device;
  // Run on this stream instead of the placed device's compute stream 0 (it must be on the
  // placed device).
  std::optional<StreamKey> stream;
  // Run on this stream when the op is placed on its device (else it is ignored), unless
  // the op's placement rule puts it on a ccl stream (collectives stay there): a caller's
  // current-stream scope (eager::StreamScope). `stream` wins when both are set.
  std::optional<StreamKey> preferred_stream;
  // Tensors per output slot for variadic outputs (empty: the infer function decides).
  std::vector<int> output_counts;
  // The caller takes exactly one output: InvalidArgument, before anything is enqueued, for
  // an op that would produce another number.
  bool single_output = false;
};

// Thread-compatible, like the InstructionsBuilder it uses. The registry, VM and builder
// must outlive it.
class OpDispatcher {
 public:
  OpDispatcher(const OpRegistry* registry, vm::VirtualMachine* vm, vm::InstructionsBuilder* builder)
      : registry_(registry), vm_(vm), builder_(builder) {}

  // Runs `op` and returns its new outputs per slot.
  absl::StatusOr<SlotBlobs> Call(absl::string_view op, const SlotBlobs& inputs,
                                 const vm::AttrMap& attrs, const DispatchOptions& options = {});

  // Runs `op` with one blob per input slot (null ones are an error, as in Call) and returns
  // its single output; InvalidArgument, before anything is enqueued, for an op with another
  // number of outputs. The eager front end's per-op path: the caller keeps `inputs` alive
  // for the call, and the output comes as an OwnedBlob, so nothing here counts references.
  absl::StatusOr<vm::OwnedBlob> CallSingle(absl::string_view op, absl::Span<vm::Blob* const> inputs,
                                           const vm::AttrMap& attrs,
                                           const DispatchOptions& options = {});

  // Runs `op` writing into `outputs` the caller allocated (in-place updates such as sgd,
  // whose output is its Param input). Their dtypes and shapes must be what inference says.
  // An output that is also an input, in a pair the op's schema does not declare in place
  // (OpSchema::InPlace), is written to a fresh blob by the kernel and copied back into the
  // caller's by an `assign` right after (the aliasing rule, docs/design.md "Aliasing"): the
  // caller's blob is the tensor others hold, so it is refilled rather than replaced.
  absl::Status CallInto(absl::string_view op, const SlotBlobs& inputs, const SlotBlobs& outputs,
                        const vm::AttrMap& attrs, const DispatchOptions& options = {});

  const OpRegistry* registry() const { return registry_; }
  vm::VirtualMachine* vm() const { return vm_; }
  vm::InstructionsBuilder* builder() const { return builder_; }

 private:
  // Everything a call decides before it allocates outputs. A pure function of the op, the
  // inputs' dtypes, shapes and devices, the attributes and the options (the registry is
  // immutable once in use), so it is cached by those.
  struct Plan {
    const OpSchema* schema = nullptr;
    std::shared_ptr<const vm::AttrMap> attrs;  // normalized; null when empty
    std::vector<std::vector<TensorMeta>> outputs;
    vm::Stream* stream = nullptr;
    Device output_device;
    const vm::OpKernel* kernel = nullptr;
    // Where the outputs are allocated (AllocationStream) and the single output's meta when
    // there is exactly one (null otherwise; set as the plan is cached, pointing into its
    // own `outputs`): decided once, read per call.
    vm::Stream* alloc_stream = nullptr;
    const TensorMeta* single_output = nullptr;
  };
  struct CachedPlan {
    std::string op;
    std::vector<int> slot_sizes;
    std::vector<std::pair<TensorMeta, Device>> inputs;  // flattened
    vm::AttrMap given_attrs;
    Device default_device;
    std::optional<StreamKey> stream;
    std::optional<StreamKey> preferred_stream;
    std::vector<int> output_counts;
    Plan plan;
  };
  // A call's input operands as plans read them: the blobs of every slot in slot order and
  // how many each slot has. Views the caller's storage.
  struct Operands {
    absl::Span<vm::Blob* const> blobs;
    absl::Span<const int> slot_sizes;
  };
  using FlatBlobs = absl::InlinedVector<vm::Blob*, 8>;
  using SlotSizes = absl::InlinedVector<int, 4>;
  static void Flatten(const SlotBlobs& slots, FlatBlobs* blobs, SlotSizes* sizes);

  absl::StatusOr<Plan> Prepare(absl::string_view op, Operands inputs, const vm::AttrMap& attrs,
                               const DispatchOptions& options, std::vector<int> output_counts);
  // The cached plan for this call, prepared on a miss.
  absl::StatusOr<const Plan*> FindPlan(absl::string_view op, Operands inputs,
                                       const vm::AttrMap& attrs, const DispatchOptions& options,
                                       const std::vector<int>& output_counts);
  static bool Matches(const CachedPlan& cached, absl::string_view op, Operands inputs,
                      const vm::AttrMap& attrs, const DispatchOptions& options,
                      const std::vector<int>& output_counts);
  // InvalidArgument for a caller taking one output of `plan`, which has another number.
  static absl::Status SingleOutputError(absl::string_view op, const Plan& plan);
  // The stream a call's outputs are allocated for (the output device's compute stream when
  // the op runs on another device's stream, as copies do).
  absl::StatusOr<vm::Stream*> AllocationStream(const Plan& plan);
  // `fresh_outputs`: the caller allocated `outputs` for this launch (see
  // InstructionsBuilder::CallPtrs).
  absl::Status Launch(const Plan& plan, vm::BlobPtrSpan inputs, vm::BlobPtrSpan outputs,
                      bool fresh_outputs) {
    return builder_->CallPtrs(*plan.kernel, inputs, outputs, plan.attrs, plan.stream,
                              fresh_outputs);
  }
  // VirtualMachine::GetStream through a cache of this dispatcher's own (no locks on the
  // per-op path: the VM's lookup by key goes through the Runtime's device registry).
  absl::StatusOr<vm::Stream*> GetStream(const StreamKey& key);

  const OpRegistry* const registry_;
  vm::VirtualMachine* const vm_;
  vm::InstructionsBuilder* const builder_;
  absl::flat_hash_map<StreamKey, vm::Stream*> streams_;
  // Plans by a hash of the call's signature; a bucket holds the plans sharing a hash.
  absl::flat_hash_map<size_t, std::vector<std::unique_ptr<CachedPlan>>> plans_;
  size_t cached_plans_ = 0;
  // The plans used last, most recent first (entries of plans_; null past the end): looked
  // at before hashing the call.
  static constexpr size_t kRecentPlans = 4;
  std::array<CachedPlan*, kRecentPlans> recent_{};
  void NoteRecent(CachedPlan* plan);
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_OP_DISPATCHER_H_
