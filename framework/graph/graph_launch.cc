#include "framework/graph/graph_launch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "vm/step_log.h"
#include "vm/tracer.h"

namespace sluice::framework::graph {
namespace {

// "graph 'step' input 1" / "graph 'step' output 0": the copies' origin in errors.
class CopyOrigin final : public vm::InstructionOrigin {
 public:
  explicit CopyOrigin(std::string text) : text_(std::move(text)) {}
  std::string Describe() const override { return text_; }

 private:
  const std::string text_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GraphLaunch>> GraphLaunch::Create(std::string name,
                                                                 control_flow::Frame frame,
                                                                 std::vector<vm::BlobRef> inputs,
                                                                 const ops::OpRegistry& registry) {
  std::unique_ptr<GraphLaunch> launch(new GraphLaunch());
  launch->name_ = std::move(name);
  // An `assign` step from `from` to `to`; a null operand is the one Launch sets per call.
  auto copy_step = [&](const vm::Blob& like, vm::Blob* from, vm::Blob* to,
                       std::string origin) -> absl::StatusOr<std::unique_ptr<vm::Instruction>> {
    SLUICE_ASSIGN_OR_RETURN(const vm::OpKernel* assign,
                            registry.FindKernel("assign", like.device().type(), like.dtype()));
    auto step = std::make_unique<vm::Instruction>();
    step->kind = vm::InstructionKind::kOpCall;
    step->kernel = assign;
    step->inputs.push_back(from);
    step->outputs.push_back(to);
    launch->origins_.push_back(std::make_unique<CopyOrigin>(std::move(origin)));
    step->origin = launch->origins_.back().get();
    return step;
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(
        std::unique_ptr<vm::Instruction> step,
        copy_step(*inputs[i], nullptr, inputs[i].get(), absl::StrCat(launch->name_, " input ", i)));
    launch->copy_in_.push_back(std::move(step));
  }
  for (size_t i = 0; i < frame.results.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<vm::Instruction> step,
                            copy_step(*frame.results[i], frame.results[i], nullptr,
                                      absl::StrCat(launch->name_, " output ", i)));
    launch->copy_out_.push_back(std::move(step));
  }
  launch->frame_ = std::move(frame);
  launch->inputs_ = std::move(inputs);
  return launch;
}

GraphLaunch::~GraphLaunch() = default;

absl::Status GraphLaunch::Launch(vm::KernelContext& ctx) const {
  return vm::RunLoggingSteps(ctx, [&] { return Run(ctx); });
}

absl::Status GraphLaunch::Run(vm::KernelContext& ctx) const {
  const bool check = ctx.sync_checker() != nullptr;
  vm::StepLog* const log = vm::StepLog::Current();
  vm::Tracer* const tracer = ctx.tracer();
  const int64_t begin = tracer != nullptr ? vm::Tracer::NowNs() : 0;
  const absl::Span<vm::Blob* const> in = ctx.inputs();
  const absl::Span<vm::Blob* const> out = ctx.outputs();
  if (in.size() < copy_in_.size() || out.size() < copy_out_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": launched with ", in.size(), " inputs and ", out.size(),
                     " outputs; it takes at least ", copy_in_.size(), " and ", copy_out_.size()));
  }
  for (size_t i = 0; i < copy_in_.size(); ++i) {
    vm::Instruction* step = copy_in_[i].get();
    step->inputs[0] = in[i];
    if (log != nullptr) log->Add(step);
    ctx.RunStep(step, check);
  }
  SLUICE_RETURN_IF_ERROR(frame_.steps->Launch(ctx));
  for (size_t i = 0; i < copy_out_.size(); ++i) {
    vm::Instruction* step = copy_out_[i].get();
    step->outputs[0] = out[i];
    if (log != nullptr) log->Add(step);
    ctx.RunStep(step, check);
  }
  if (tracer != nullptr) {
    tracer->Add({ctx.instruction()->stream, tracer->Intern(name_), begin, vm::Tracer::NowNs()});
  }
  return absl::OkStatus();
}

}  // namespace sluice::framework::graph
