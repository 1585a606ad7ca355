// The kernel that runs a compiled subgraph on the host: an ordinary vm::OpKernel to the VM
// and the interpreter. Its name is "fused[<op>+<op>...]", which trace slices, records and
// errors show. Internal to the compiler folder (compiler.cc creates it); declared here for
// tests. The kernels a replay uses for recorded subgraphs are in replay_kernels.h.
#ifndef SLUICE_FRAMEWORK_COMPILER_COMPILED_KERNEL_H_
#define SLUICE_FRAMEWORK_COMPILER_COMPILED_KERNEL_H_

#include <memory>
#include <string>

#include "framework/compiler/cpu/tile_program.h"
#include "framework/compiler/subgraph.h"
#include "ops/cpu/host_kernel.h"

namespace sluice::framework::compiler {

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

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_COMPILED_KERNEL_H_
