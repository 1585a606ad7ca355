#include "framework/graph/graph_launch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ep/device.h"
#include "vm/recorder.h"
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

GraphLaunch::CopySet* GraphLaunch::TakeCopySet() const {
  for (const std::unique_ptr<CopySet>& set : sets_) {
    if (!set->busy.load(std::memory_order_acquire)) return set.get();
  }
  auto clone = [](const vm::Instruction& prototype) {
    auto step = std::make_unique<vm::Instruction>();
    step->kind = prototype.kind;
    step->kernel = prototype.kernel;
    step->inputs = prototype.inputs;
    step->outputs = prototype.outputs;
    step->origin = prototype.origin;
    return step;
  };
  auto set = std::make_unique<CopySet>();
  for (const auto& prototype : copy_in_) set->in.push_back(clone(*prototype));
  for (const auto& prototype : copy_out_) set->out.push_back(clone(*prototype));
  sets_.push_back(std::move(set));
  return sets_.back().get();
}

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
  ep::Stream* const stream = ctx.stream();
  if (stream->IsAsync() && done_pending_) {
    // The event reports the stream's first error, which is its step's to report.
    done_->Sync().IgnoreError();
    done_pending_ = false;
  }
  CopySet* const set = TakeCopySet();
  set->busy.store(true, std::memory_order_relaxed);
  for (size_t i = 0; i < set->in.size(); ++i) {
    vm::Instruction* step = set->in[i].get();
    step->inputs[0] = in[i];
    if (log != nullptr) log->Add(step);
    ctx.RunStep(step, check);
  }
  absl::Status status = frame_.steps->Launch(ctx);
  if (status.ok()) {
    for (size_t i = 0; i < set->out.size(); ++i) {
      vm::Instruction* step = set->out[i].get();
      step->outputs[0] = out[i];
      if (log != nullptr) log->Add(step);
      ctx.RunStep(step, check);
    }
  }
  // Free the set once the stream has run its steps: now on a synchronous stream, by a task
  // behind them on an asynchronous one (if that cannot be enqueued, the set stays busy).
  if (!stream->IsAsync()) {
    set->busy.store(false, std::memory_order_release);
  } else {
    absl::Status freed = stream->Launch([set]() -> absl::Status {
      set->busy.store(false, std::memory_order_release);
      return absl::OkStatus();
    });
    if (freed.ok() && done_ == nullptr) {
      absl::StatusOr<std::unique_ptr<ep::Event>> event = stream->device()->CreateEvent();
      if (event.ok()) done_ = *std::move(event);
      freed = event.status();
    }
    if (freed.ok()) freed = stream->RecordEvent(done_.get());
    done_pending_ = freed.ok();
    if (status.ok()) status = freed;
  }
  SLUICE_RETURN_IF_ERROR(status);
  if (tracer != nullptr) {
    tracer->Add({ctx.instruction()->stream, tracer->Intern(name_), begin, vm::Tracer::NowNs()});
  }
  return absl::OkStatus();
}

}  // namespace sluice::framework::graph
