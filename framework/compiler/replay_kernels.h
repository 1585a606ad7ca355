// The kernels a replay runs for recorded compiled subgraphs: a record names such an op
// "fused[<op>+<op>...]" and carries the subgraph's text in its "subgraph" attribute, so a
// replay compiles it again (cached) on the device it replays on. A component of its own over
// compiler.h, so that the compiler and the kernel it creates (compiled_kernel.h) do not
// include each other.
#ifndef SLUICE_FRAMEWORK_COMPILER_REPLAY_KERNELS_H_
#define SLUICE_FRAMEWORK_COMPILER_REPLAY_KERNELS_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "vm/kernel.h"
#include "vm/replayer.h"

namespace sluice::framework::compiler {

class Compiler;

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

#endif  // SLUICE_FRAMEWORK_COMPILER_REPLAY_KERNELS_H_
