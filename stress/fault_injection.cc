#include "stress/fault_injection.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::stress {

absl::Status FaultInjectingKernel::Launch(vm::KernelContext& ctx) const {
  const absl::StatusOr<int64_t> key = ctx.attrs().GetInt(kFaultKeyAttr);
  if (key.ok()) {
    if (const int64_t fault = faults_->Fire(static_cast<uint64_t>(*key)); fault != 0) {
      if (swallow_) return absl::OkStatus();
      return absl::InternalError(faults_->Describe(fault));
    }
  }
  return inner_->Launch(ctx);
}

absl::Status RegisterFaultInjectingKernels(const ops::KernelRegistry& inner, FaultInjector* faults,
                                           bool swallow, ops::KernelRegistry* out) {
  for (const char* name : {"fill", "add", "mul", "scale", "copy"}) {
    SLUICE_ASSIGN_OR_RETURN(const vm::OpKernel* kernel, inner.Find(name));
    SLUICE_RETURN_IF_ERROR(
        out->Register(std::make_unique<FaultInjectingKernel>(kernel, faults, swallow)));
  }
  return absl::OkStatus();
}

std::string StressOpOrigin::Describe() const { return absl::StrCat("stress op ", op_); }

FaultTrace TraceFaults(absl::string_view error) {
  FaultTrace trace;
  static constexpr absl::string_view kInjected = "injected ";
  for (size_t at = error.find(kInjected); at != absl::string_view::npos;
       at = error.find(kInjected, at + 1)) {
    // "injected <kind> fault #<digits>"
    const size_t begin = at + kInjected.size();
    const size_t hash = error.find(" fault #", begin);
    if (hash == absl::string_view::npos) continue;
    size_t end = hash + 8;
    while (end < error.size() && error[end] >= '0' && error[end] <= '9') ++end;
    if (end == hash + 8) continue;
    trace.faults.emplace_back(error.substr(begin, end - begin));
  }
  static constexpr absl::string_view kOp = "op '";
  if (const size_t op = error.find(kOp); op != absl::string_view::npos) {
    const size_t close = error.find('\'', op + kOp.size());
    if (close != absl::string_view::npos) {
      trace.kernel = std::string(error.substr(op + kOp.size(), close - op - kOp.size()));
    }
  }
  static constexpr absl::string_view kOrigin = "(stress op ";
  if (const size_t origin = error.find(kOrigin); origin != absl::string_view::npos) {
    const size_t close = error.find(')', origin);
    int op = -1;
    if (close != absl::string_view::npos &&
        absl::SimpleAtoi(error.substr(origin + kOrigin.size(), close - origin - kOrigin.size()),
                         &op)) {
      trace.op = op;
    }
  }
  return trace;
}

std::vector<bool> TaintedTensors(const StressProgram& program, const std::vector<bool>& failed) {
  std::vector<bool> tainted(program.tensor_home.size(), false);
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const StressOp& op = program.ops[i];
    const bool reads_taint = (op.a >= 0 && tainted[op.a]) || (op.b >= 0 && tainted[op.b]);
    tainted[op.y] = (i < failed.size() && failed[i]) || reads_taint;
  }
  return tainted;
}

}  // namespace sluice::stress
