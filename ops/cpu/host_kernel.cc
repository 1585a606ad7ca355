#include "ops/cpu/host_kernel.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/tensor_storage.h"

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
  // ViewBlob without its StatusOr for the usual operand, which has storage.
  int i = 0;
  for (const vm::Blob* blob : ctx.inputs()) {
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
