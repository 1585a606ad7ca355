// The kernels that run compiled subgraphs: an ordinary vm::OpKernel to the VM and the
// interpreter. Its name is "fused[<op>+<op>...]", which trace slices, records and errors
// show. Internal to the compiler folder (compiler.h creates them); declared here for tests.
#ifndef SLUICE_FRAMEWORK_COMPILER_COMPILED_KERNEL_H_
#define SLUICE_FRAMEWORK_COMPILER_COMPILED_KERNEL_H_

#include <memory>
#include <string>

#include "framework/compiler/cpu/tile_program.h"
#include "framework/compiler/subgraph.h"
#include "ops/cpu/host_kernel.h"
#include "vm/replayer.h"

namespace sluice::framework::compiler {

class Compiler;

// Runs a TileProgram as host work (cpu, sim). Checks every operand against the subgraph:
// counts, dtypes, and shapes (inputs as the subgraph's, outputs the domain's): InvalidArgument
// naming the operand. Thread-safe (immutable; `program` and `graph` outlive it).
class TileProgramKernel final : public ops::HostKernel {
 public:
  TileProgramKernel(const Subgraph* graph, const cpu::TileProgram* program)
      : HostKernel(graph->KernelName()), graph_(graph), program_(program) {}

 protected:
  absl::StatusOr<ops::HostWork> Prepare(const ops::HostArgs& args) const override;
  absl::Status RunNow(const ops::HostArgs& args) const override;

 private:
  absl::Status Check(const ops::HostArgs& args) const;

  const Subgraph* const graph_;
  const cpu::TileProgram* const program_;
};

// The kernel a replay runs for a recorded compiled subgraph: reads the subgraph's text from
// the instruction's "subgraph" attribute, compiles it through `compiler` (cached after the
// first launch) for the stream's device type, and runs it. Thread-safe.
class RecordedSubgraphKernel final : public vm::OpKernel {
 public:
  explicit RecordedSubgraphKernel(Compiler* compiler) : compiler_(compiler) {}
  absl::string_view name() const override { return "fused"; }
  absl::Status Launch(vm::KernelContext& ctx) const override;

 private:
  Compiler* const compiler_;
};

// The attribute of a compiled subgraph's op that carries its text (Subgraph::ToText).
inline constexpr char kSubgraphAttr[] = "subgraph";

// True for the name of a compiled subgraph's kernel ("fused[...]").
bool IsCompiledSubgraphName(absl::string_view op);

// Kernels for replaying records that contain compiled subgraphs: Wrap(base) finds a
// RecordedSubgraphKernel for a "fused[...]" op and asks `base` for any other. The lookup it
// returns refers to this object, which must outlive it (and the replay). Thread-safe.
class ReplayKernels {
 public:
  ReplayKernels();
  ~ReplayKernels();
  vm::KernelLookup Wrap(vm::KernelLookup base) const;
  Compiler& compiler() { return *compiler_; }

 private:
  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<RecordedSubgraphKernel> kernel_;
};

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_COMPILED_KERNEL_H_
