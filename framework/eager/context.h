// eager::Context: what an eager program runs in — a Runtime (devices), a VM, the standard
// op registry, and the one InstructionsBuilder + OpDispatcher that every op call of the
// context goes through. Op calls return at once; the VM runs them asynchronously; reading a
// tensor back waits only for what produced it.
//
// Ownership: Context is a handle to shared state that every Tensor created in it also
// holds, so tensors may outlive the Context object; the Runtime and VM go away with the
// last of them (the VM finishing its work first). There is no global context.
#ifndef SLUICE_FRAMEWORK_EAGER_CONTEXT_H_
#define SLUICE_FRAMEWORK_EAGER_CONTEXT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "ep/runtime.h"
#include "ops/op_dispatcher.h"
#include "vm/attrs.h"
#include "vm/kernel.h"
#include "vm/stream.h"
#include "vm/virtual_machine.h"

namespace sluice::eager {

class Tensor;
namespace internal {
struct ContextState;
struct OpCalls;
}  // namespace internal

struct ContextOptions {
  ep::RuntimeOptions runtime;
  vm::VmOptions vm;
  // Where ops without tensor inputs (fill_constant, random) run unless told otherwise.
  Device default_device{DeviceType::kCpu, 0};
  // Seeds the random ops called without an explicit seed (each call draws the next one).
  uint64_t seed = 0x5eed;
  // Testing only: off, op calls emit no sync instructions across streams (vm::
  // InstructionsBuilder::set_soft_sync), so that a test can show the sync checker catches
  // what soft sync prevents.
  bool soft_sync = true;
};

// Thread-safe: op calls from several threads are serialized through one builder (a blob's
// last use must be tracked by one builder at a time).
class Context {
 public:
  static absl::StatusOr<Context> Create(ContextOptions options = {});

  Device default_device() const;
  void set_default_device(Device device);

  // A tensor on `device` holding a copy of `bytes` (size must match dtype x shape). Blocks
  // until the bytes are copied in (the caller's buffer may be reused afterwards).
  absl::StatusOr<Tensor> FromBytes(DataType dtype, const Shape& shape,
                                   absl::Span<const uint8_t> bytes, Device device);
  template <typename T>
  absl::StatusOr<Tensor> FromVector(const std::vector<T>& values, const Shape& shape,
                                    Device device);
  template <typename T>
  absl::StatusOr<Tensor> FromVector(const std::vector<T>& values, const Shape& shape);

  // Runs `op` by name: inputs per schema slot; returns every output, slots flattened in
  // order. Errors name the op and the operands, before anything is enqueued.
  absl::StatusOr<std::vector<Tensor>> Call(absl::string_view op,
                                           const std::vector<std::vector<Tensor>>& inputs,
                                           const vm::AttrMap& attrs = {},
                                           std::optional<Device> device = std::nullopt);
  // Runs an op with one tensor per input slot and a single output, and returns it: the
  // lean path the functional API takes (no per-call containers). InvalidArgument for an op
  // with another number of outputs, plus Call's errors.
  absl::StatusOr<Tensor> CallSingle(absl::string_view op, absl::Span<const Tensor> inputs,
                                    const vm::AttrMap& attrs = {},
                                    std::optional<Device> device = std::nullopt);
  // Runs `op` writing into existing tensors (in-place updates: sgd, adam, fn::<Op>InPlace).
  // Not recorded for autograd: while gradients are recorded, a call that writes or reads a
  // tensor that requires a gradient is refused (FailedPrecondition naming the op), and the
  // written tensors' versions are bumped, so a gradient that saved one fails at Backward.
  absl::Status CallInto(absl::string_view op, const std::vector<std::vector<Tensor>>& inputs,
                        const std::vector<std::vector<Tensor>>& outputs,
                        const vm::AttrMap& attrs = {});

  // One instruction of `kernel` — an OpKernel outside the registry, such as a graph launch
  // (framework/graph) — on `stream`, a stream of this context's VM. It reads `inputs`,
  // updates `updated` in place (read and written: their versions are bumped, as CallInto's)
  // and writes new tensors of the dtypes and shapes in `outputs`, made on `stream`'s device
  // and returned in order. Soft sync orders it with the context's other work, as any op.
  // Not recorded for autograd: the outputs have no history, and an update of a tensor that
  // requires a gradient is not refused (a saved copy of it is then stale, which Backward
  // reports through the version). InvalidArgument for an empty tensor or one of another
  // context (naming `kernel` and the operand), before anything is enqueued.
  struct OutputSpec {
    DataType dtype;
    Shape shape;
  };
  absl::StatusOr<std::vector<Tensor>> LaunchKernel(const vm::OpKernel& kernel, vm::Stream* stream,
                                                   absl::Span<const Tensor> inputs,
                                                   absl::Span<const Tensor> updated,
                                                   absl::Span<const OutputSpec> outputs,
                                                   std::shared_ptr<const vm::AttrMap> attrs = {});

  // Runs `callback` once everything this context submitted so far is complete, on the
  // VM's scheduler thread: it must be quick and must not call into the context or the VM
  // (set a flag, notify a waiter). Errors only once the VM is shut down.
  absl::Status WhenDone(absl::AnyInvocable<void()> callback);

  // Waits for everything submitted so far; the first kernel error since the last sync.
  absl::Status Sync();
  // Tensors of this context alive now: handles, tensors kept by autograd's recorded graphs,
  // and aliases (autograd::Detach) each count one.
  int64_t LiveTensors() const;
  // The seed the next random op without an explicit seed uses.
  int64_t NextSeed();

  vm::VirtualMachine* vm() const;
  ep::Runtime* runtime() const;
  const ops::OpRegistry& registry() const;

  // A tensor over `blob`, a blob of this context's VM with storage on one of its devices —
  // such as a device-resident fetch of a framework::Executor over vm() — taken over without
  // a copy: when the tensor's last handle goes, the blob's storage is released as any eager
  // tensor's is, so the caller must not use the blob through other references afterwards.
  // A reference from Tensor::blob() gives back that tensor (a new handle), not a second
  // owner. Work on the blob submitted before the call, through any builder, orders before
  // the tensor's ops (what other builders hold back is handed over here).
  // InvalidArgument for a null blob, a precomputed graph's lazy blob, a released one, or
  // one of another VM or context.
  absl::StatusOr<Tensor> FromBlob(vm::BlobRef blob);

 private:
  friend class Tensor;
  friend struct internal::OpCalls;
  explicit Context(std::shared_ptr<internal::ContextState> state) : state_(std::move(state)) {}
  // CallSingle in `state` (the functional API reaches it from its first input's state,
  // without a Context handle).
  // `inputs` point to the caller's handles: a braced list of Tensor values would copy each
  // handle (two atomic reference count updates per input and op).
  static absl::StatusOr<Tensor> CallSingleIn(internal::ContextState* state, absl::string_view op,
                                             absl::Span<const Tensor* const> inputs,
                                             const vm::AttrMap& attrs,
                                             std::optional<Device> device);
  // InvalidArgument naming `op` when `t` (a valid tensor) belongs to a context other than
  // `state`'s.
  static absl::Status CheckOwnInput(const internal::ContextState* state, absl::string_view op,
                                    const Tensor& t);
  // Runs `op` through the dispatcher under the context's mutex (Call; CallSingleIn takes
  // the dispatcher's single-output path itself).
  absl::StatusOr<ops::SlotBlobs> Dispatch(absl::string_view op, const ops::SlotBlobs& in,
                                          const vm::AttrMap& attrs, std::optional<Device> device);
  std::shared_ptr<internal::ContextState> state_;
};

}  // namespace sluice::eager

#include "framework/eager/tensor.h"

namespace sluice::eager {

template <typename T>
absl::StatusOr<Tensor> Context::FromVector(const std::vector<T>& values, const Shape& shape,
                                           Device device) {
  return FromBytes(DataTypeOf<T>(), shape,
                   absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(values.data()),
                                       values.size() * sizeof(T)),
                   device);
}

template <typename T>
absl::StatusOr<Tensor> Context::FromVector(const std::vector<T>& values, const Shape& shape) {
  return FromVector(values, shape, default_device());
}

}  // namespace sluice::eager

#endif  // SLUICE_FRAMEWORK_EAGER_CONTEXT_H_
