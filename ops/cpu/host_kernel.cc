#include "ops/cpu/host_kernel.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/tensor_storage.h"
#include "ep/device.h"
#include "ep/stream.h"

namespace sluice::ops {
namespace {

// The view of a blob that has storage.
HostTensor ViewOf(const vm::Blob* blob) {
  HostTensor t;
  t.data = blob->raw_storage()->data();
  t.dtype = blob->dtype();
  t.shape = &blob->shape();
  t.size = blob->shape().NumElements();
  t.blob = blob;
  return t;
}

// The view of an input the kernel reads only the shape of (vm::OpKernel::ReadsShapeOnly):
// no data pointer, whether or not the blob still has storage.
HostTensor ShapeView(const vm::Blob* blob) {
  HostTensor t;
  t.dtype = blob->dtype();
  t.shape = &blob->shape();
  t.size = blob->shape().NumElements();
  t.blob = blob;
  return t;
}

// Fills `t` with the poison pattern: quiet NaN for floats, bytes 0xA5 for integers, true for
// bool (any other byte would not be a bool).
void FillPoison(const HostTensor& t) {
  const size_t n = static_cast<size_t>(t.size);
  switch (t.dtype) {
    case DataType::kF32:
      std::fill_n(t.as<float>(), n, std::numeric_limits<float>::quiet_NaN());
      break;
    case DataType::kF64:
      std::fill_n(t.as<double>(), n, std::numeric_limits<double>::quiet_NaN());
      break;
    case DataType::kBool:
      std::fill_n(t.as<bool>(), n, true);
      break;
    case DataType::kI32:
    case DataType::kI64:
      std::memset(t.data, 0xA5, n * SizeOf(t.dtype));
      break;
  }
}

// The sim's aliasing check (docs/design.md, "Aliasing"): every output of `args` in no
// declared in-place pair — and an output that is also an input of an undeclared pair — is
// filled with poison in stream order before `work` runs, so that a kernel reading an operand
// it also writes computes NaN on sim, as it would compute garbage on a device whose threads
// overwrite what others still read (and a kernel reading its output before writing it shows
// too). Outputs of declared pairs keep their bytes: they hold an input's value. Returns `work`
// itself when nothing is poisoned (an elementwise op, an in-place update).
// An output the kernel adds into (vm::kAddToAttr) is read: it keeps its bytes too.
HostWork PoisonOutputs(const vm::InPlaceContract& contract, const HostArgs& args, HostWork work) {
  const int n_in = static_cast<int>(args.inputs.size());
  const int n_out = static_cast<int>(args.outputs.size());
  const int64_t adds = AddToBits(args);
  absl::InlinedVector<HostTensor, 2> poisoned;
  for (int o = 0; o < n_out; ++o) {
    if (o < 63 && (adds >> o & 1) != 0) continue;
    bool poison = !contract.OutputMayAlias(o, n_in, n_out);
    for (int i = 0; i < n_in && !poison; ++i) {
      poison = args.inputs[i].data == args.outputs[o].data && !contract.Allows(i, o, n_in, n_out);
    }
    if (poison) poisoned.push_back(args.outputs[o]);
  }
  if (poisoned.empty()) return work;
  return [poisoned = std::move(poisoned), work = std::move(work)]() mutable {
    for (const HostTensor& t : poisoned) FillPoison(t);
    return work();
  };
}

}  // namespace

absl::StatusOr<HostTensor> ViewBlob(const vm::Blob* blob, absl::string_view role, int index,
                                    absl::string_view op) {
  if (blob->raw_storage() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("op '", op, "' ", role, " ", index, ": ", blob->DebugName(), " was released"));
  }
  return ViewOf(blob);
}

absl::Status OpError(absl::string_view op, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("op '", op, "': ", message));
}

std::string HostTensor::Describe(absl::string_view role, int index) const {
  return absl::StrCat(role, " ", index, " (", blob != nullptr ? blob->DebugName() : "tensor", ", ",
                      DataTypeName(dtype), shape != nullptr ? shape->ToString() : "", ")");
}

absl::Status HostKernel::Launch(vm::KernelContext& ctx) const {
  HostArgs args;
  args.attrs = &ctx.attrs();
  args.context = &ctx;
  // ViewBlob without its StatusOr for the usual operand, which has storage.
  int i = 0;
  for (const vm::Blob* blob : ctx.inputs()) {
    if (ReadsShapeOnly(i)) {
      // Its storage may be gone (the GC plan released it): the kernel gets no data pointer.
      args.inputs.push_back(ShapeView(blob));
      ++i;
      continue;
    }
    if (blob->raw_storage() == nullptr) return ViewBlob(blob, "input", i, op_).status();
    args.inputs.push_back(ViewOf(blob));
    ++i;
  }
  i = 0;
  for (const vm::Blob* blob : ctx.outputs()) {
    if (blob->raw_storage() == nullptr) return ViewBlob(blob, "output", i, op_).status();
    args.outputs.push_back(ViewOf(blob));
    ++i;
  }
  if (ctx.host_work_runs_now()) {
    return ctx.RunHostWorkNow([this, &args] { return RunNow(args); });
  }
  SLUICE_ASSIGN_OR_RETURN(HostWork work, Prepare(args));
  if (work == nullptr) return absl::OkStatus();
  if (in_place().declared && ctx.stream()->device()->id().type() == DeviceType::kSim) {
    work = PoisonOutputs(in_place(), args, std::move(work));
  }
  return ctx.LaunchHostWork(std::move(work));
}

absl::Status HostKernel::RunNow(const HostArgs& args) const {
  SLUICE_ASSIGN_OR_RETURN(HostWork work, Prepare(args));
  if (work == nullptr) return absl::OkStatus();
  return work();
}

absl::Status HostKernel::Error(absl::string_view message) const { return OpError(op_, message); }

absl::Status HostKernel::ArityError(const HostArgs& args, int inputs, int outputs) const {
  const int n_in = static_cast<int>(args.inputs.size());
  const int n_out = static_cast<int>(args.outputs.size());
  auto want = [](int n) { return n < 0 ? std::string("one or more") : absl::StrCat(n); };
  return Error(absl::StrCat("takes ", want(inputs), " input(s) and ", want(outputs),
                            " output(s), got ", n_in, " and ", n_out));
}

absl::Status HostKernel::DtypeError(const HostTensor& t, DataType dtype, absl::string_view role,
                                    int index) const {
  return Error(absl::StrCat(t.Describe(role, index), " must be ", DataTypeName(dtype)));
}

}  // namespace sluice::ops
