// HostKernel: the base of kernels whose work the host runs on host-addressable memory — the
// cpu device and the sim devices share them (sim memory is host memory; the work runs on
// the sim stream's thread, in stream order). A kernel validates its operands on the VM
// worker (Prepare) and returns the work; the base enqueues it with LaunchHostWork, which
// re-checks poison when it runs and turns a returned error into the op's error. Where the
// stream runs host work at once (cpu), the base calls RunNow instead (validate and work in
// one call, under the same rules: KernelContext::RunHostWorkNow). On sim the work first fills
// the outputs its op's in-place contract does not cover with poison (NaN for floats), so that
// a kernel reading an output, or an input aliased to one, shows it (docs/design.md,
// "Aliasing").
#ifndef SLUICE_OPS_CPU_HOST_KERNEL_H_
#define SLUICE_OPS_CPU_HOST_KERNEL_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/intra_op_pool.h"
#include "core/shape.h"
#include "core/status.h"
#include "ops/op_registry.h"
#include "vm/attrs.h"
#include "vm/blob.h"
#include "vm/kernel.h"

namespace sluice::ops {

// A view of one operand: valid during Prepare and, for the pointer, inside the work (the
// engine keeps the storage alive until the instruction retires). Value type.
struct HostTensor {
  void* data = nullptr;
  DataType dtype = DataType::kF32;
  const Shape* shape = nullptr;
  int64_t size = 0;  // elements
  const vm::Blob* blob = nullptr;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // "input 0 (blob #3 'x', f32[2, 3])", for error messages.
  std::string Describe(absl::string_view role, int index) const;
};

// InvalidArgument "op 'add': <message>": how every kernel (host or cuda) reports bad
// operands or attributes.
absl::Status OpError(absl::string_view op, absl::string_view message);

// A view of `blob` (operand `index` in `role` of `op`); FailedPrecondition naming them when
// the blob has no storage (freed by a Release, or a lazy blob never written). A blob whose
// Release kept its storage for parking still shows it: the builder rejects any use after a
// Release; a batch or sequence that names a released blob anyway runs on those bytes.
absl::StatusOr<HostTensor> ViewBlob(const vm::Blob* blob, absl::string_view role, int index,
                                    absl::string_view op);

struct HostArgs {
  absl::InlinedVector<HostTensor, 4> inputs;
  absl::InlinedVector<HostTensor, 2> outputs;
  const vm::AttrMap* attrs = nullptr;
  // The launch's context (valid during Prepare and RunNow, not inside the work).
  const vm::KernelContext* context = nullptr;

  // How the work may split across the host's cores (vm::KernelContext::parallel): the cpu
  // device's intra-op pool; on sim, a scope that runs everything on the stream's thread. A
  // value the work may capture. Asked for only by kernels large enough to split, so the
  // per-op path of small kernels does not pay for it.
  ParallelScope parallel() const {
    return context != nullptr ? context->parallel() : ParallelScope();
  }
};

using HostWork = absl::AnyInvocable<absl::Status()>;

// The launch's vm::kAddToAttr bits: output o is added into when bit o is set (0 without the
// attribute).
inline int64_t AddToBits(const HostArgs& args) {
  return args.attrs->GetInt(vm::kAddToAttr).value_or(0);
}

// For a kernel adding into some of `outs` (the `adds` bits), from its work: the error an
// added-into output carries when an earlier contributor failed or was skipped, else OK. The
// executor checks only the inputs' poison; an added-into output is read too, so a kernel
// that added into it anyway would clear the poison and hand a garbage gradient on.
// Returning it makes this op fail with the earlier error, and the outputs stay poisoned.
inline absl::Status AddedIntoPoison(absl::Span<const HostTensor> outs, int64_t adds) {
  for (size_t o = 0; o < outs.size() && o < 63; ++o) {
    const vm::Blob* blob = outs[o].blob;
    if ((adds >> o & 1) != 0 && blob != nullptr && blob->poisoned()) return blob->poison();
  }
  return absl::OkStatus();
}

// An output a kernel computes in full and then, with its add-to bit set, adds into the
// output's value (vm::kAddToAttr): target() is where the kernel writes the result (a buffer
// of its own that lives as long as this object, or the output itself), and AddInto() adds
// the buffer in. Adding a finished result, rather than accumulating into the old value,
// rounds as a `sum` op of the two would: the result is bit for bit the same.
template <typename T>
class AddedOutput {
 public:
  AddedOutput(T* out, int64_t size, bool add)
      : out_(out), size_(size), buffer_(add ? static_cast<size_t>(size) : 0), add_(add) {}
  T* target() { return add_ ? buffer_.data() : out_; }
  void AddInto() {
    for (int64_t i = 0; add_ && i < size_; ++i) out_[i] = out_[i] + buffer_[static_cast<size_t>(i)];
  }

 private:
  T* const out_;
  const int64_t size_;
  std::vector<T> buffer_;
  const bool add_;
};

// Thread-safe (no mutable state).
class HostKernel : public vm::OpKernel {
 public:
  explicit HostKernel(std::string op) : op_(std::move(op)) {}
  absl::string_view name() const final { return op_; }
  // Builds HostArgs (FailedPrecondition for a released operand), calls Prepare, enqueues
  // the work it returns (none: nothing to enqueue, e.g. an empty tensor) — or, where the
  // stream runs host work at once, calls RunNow under the same rules.
  absl::Status Launch(vm::KernelContext& ctx) const final;

 protected:
  // Worker thread. Validates operand counts, dtypes and shapes against the op's contract
  // (InvalidArgument naming the operand) and returns the work, or nullptr for none.
  virtual absl::StatusOr<HostWork> Prepare(const HostArgs& args) const = 0;
  // Worker thread, on a stream that runs host work at once (cpu): validates and does the
  // work now. By default Prepare, then its work; a kernel may do both without building
  // the work (the eager per-op path on cpu).
  virtual absl::Status RunNow(const HostArgs& args) const;

  // InvalidArgument "op 'add': <message>".
  absl::Status Error(absl::string_view message) const;
  // Checks operand counts (-1: any number >= 1).
  absl::Status CheckArity(const HostArgs& args, int inputs, int outputs) const {
    const int n_in = static_cast<int>(args.inputs.size());
    const int n_out = static_cast<int>(args.outputs.size());
    if ((inputs < 0 ? n_in >= 1 : n_in == inputs) &&
        (outputs < 0 ? n_out >= 1 : n_out == outputs)) {
      return absl::OkStatus();
    }
    return ArityError(args, inputs, outputs);
  }
  // Checks a tensor's dtype.
  absl::Status CheckDtype(const HostTensor& t, DataType dtype, absl::string_view role,
                          int index) const {
    if (t.dtype == dtype) return absl::OkStatus();
    return DtypeError(t, dtype, role, index);
  }

 private:
  absl::Status ArityError(const HostArgs& args, int inputs, int outputs) const;
  absl::Status DtypeError(const HostTensor& t, DataType dtype, absl::string_view role,
                          int index) const;

  const std::string op_;
};

// A HostKernel from a function: `prepare` is called as Prepare.
template <typename Fn>
class FnHostKernel final : public HostKernel {
 public:
  FnHostKernel(std::string op, Fn prepare)
      : HostKernel(std::move(op)), prepare_(std::move(prepare)) {}

 protected:
  absl::StatusOr<HostWork> Prepare(const HostArgs& args) const override { return prepare_(args); }

 private:
  Fn prepare_;
};

template <typename Fn>
std::shared_ptr<const vm::OpKernel> MakeHostKernel(std::string op, Fn prepare) {
  return std::make_shared<FnHostKernel<Fn>>(std::move(op), std::move(prepare));
}

// Passes a C++ element type to a generic lambda: make(TypeTag<float>{}).
template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) for the C++ element type of `dtype`.
template <typename Fn>
auto VisitDtype(DataType dtype, Fn fn) {
  switch (dtype) {
    case DataType::kF32:
      return fn(TypeTag<float>{});
    case DataType::kF64:
      return fn(TypeTag<double>{});
    case DataType::kI32:
      return fn(TypeTag<int32_t>{});
    case DataType::kI64:
      return fn(TypeTag<int64_t>{});
    case DataType::kBool:
      return fn(TypeTag<bool>{});
  }
  return fn(TypeTag<float>{});
}

// Registers make(TypeTag<T>{}) (a shared_ptr<const vm::OpKernel>) as the cpu and sim kernel
// of `op` for each T in Ts.
template <typename... Ts, typename Make>
absl::Status RegisterStressKernelsFor(OpRegistry* registry, absl::string_view op, Make make) {
  absl::Status status;
  (
      [&] {
        if (!status.ok()) return;
        status = registry->RegisterKernel(op, {DeviceType::kCpu, DeviceType::kSim},
                                          DataTypeOf<Ts>(), make(TypeTag<Ts>{}));
      }(),
      ...);
  return status;
}

// A float kernel's prepare function for element type T: the op's name and its arguments to
// the work it will run.
template <typename T>
using FloatPrepareFn = absl::StatusOr<HostWork> (*)(const std::string&, const HostArgs&);

// Registers prepare_f32 / prepare_f64 as the cpu and sim kernels of `op`.
inline absl::Status RegisterFloatHostKernels(OpRegistry* registry, const std::string& op,
                                             FloatPrepareFn<float> prepare_f32,
                                             FloatPrepareFn<double> prepare_f64) {
  return RegisterStressKernelsFor<float, double>(registry, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    FloatPrepareFn<T> prepare;
    if constexpr (std::is_same_v<T, float>) {
      prepare = prepare_f32;
    } else {
      prepare = prepare_f64;
    }
    return MakeHostKernel(op, [op, prepare](const HostArgs& a) { return prepare(op, a); });
  });
}

}  // namespace sluice::ops

#endif  // SLUICE_OPS_CPU_HOST_KERNEL_H_
