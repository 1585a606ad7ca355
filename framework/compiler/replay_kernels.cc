#include "framework/compiler/replay_kernels.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ep/device.h"
#include "framework/compiler/compiler.h"
#include "framework/compiler/subgraph.h"

namespace sluice::framework::compiler {

absl::Status RecordedSubgraphKernel::Launch(vm::KernelContext& ctx) const {
  auto error = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("op 'fused': ", what));
  };
  absl::StatusOr<std::string> text = ctx.attrs().GetString(kSubgraphAttr);
  if (!text.ok()) {
    return error(absl::StrCat("attribute '", kSubgraphAttr, "': ", text.status().message()));
  }
  absl::StatusOr<Subgraph> graph = Subgraph::Parse(*text);
  if (!graph.ok()) {
    return error(absl::StrCat("attribute '", kSubgraphAttr, "': ", graph.status().message()));
  }
  absl::StatusOr<std::shared_ptr<const CompiledSubgraph>> compiled =
      compiler_->Compile(*graph, ctx.stream()->device()->id().type());
  if (!compiled.ok()) {
    return absl::Status(compiled.status().code(), absl::StrCat("op '", graph->KernelName(),
                                                               "': ", compiled.status().message()));
  }
  if ((*compiled)->kernel() == nullptr) {
    return absl::InternalError(absl::StrCat("op '", graph->KernelName(), "': no kernel"));
  }
  // The compiled subgraph stays in the compiler's cache, which outlives the launch.
  return (*compiled)->kernel()->Launch(ctx);
}

bool IsCompiledSubgraphName(absl::string_view op) { return absl::StartsWith(op, "fused["); }

ReplayKernels::ReplayKernels()
    : compiler_(std::make_unique<Compiler>()),
      kernel_(std::make_unique<RecordedSubgraphKernel>(compiler_.get())) {}
ReplayKernels::~ReplayKernels() = default;

vm::KernelLookup ReplayKernels::Wrap(vm::KernelLookup base) const {
  const vm::OpKernel* fused = kernel_.get();
  return [fused, base = std::move(base)](absl::string_view op, const StreamKey& stream,
                                         DataType dtype) -> absl::StatusOr<const vm::OpKernel*> {
    if (IsCompiledSubgraphName(op)) return fused;
    return base(op, stream, dtype);
  };
}

}  // namespace sluice::framework::compiler
