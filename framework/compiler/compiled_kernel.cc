#include "framework/compiler/compiled_kernel.h"

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ep/device.h"
#include "vm/instruction.h"

namespace sluice::framework::compiler {

absl::Status TileProgramKernel::Check(const ops::HostArgs& args) const {
  SLUICE_RETURN_IF_ERROR(CheckArity(args, static_cast<int>(graph_->inputs.size()),
                                    static_cast<int>(graph_->outputs.size())));
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const SubgraphInput& in = graph_->inputs[i];
    const ops::HostTensor& t = args.inputs[i];
    if (t.dtype != in.dtype || *t.shape != in.shape) {
      return Error(absl::StrCat(t.Describe("input", static_cast<int>(i)), " must be ",
                                DataTypeName(in.dtype), in.shape.ToString()));
    }
  }
  for (size_t o = 0; o < args.outputs.size(); ++o) {
    const DataType dtype = graph_->dtype_of(graph_->outputs[o]);
    const ops::HostTensor& t = args.outputs[o];
    if (t.dtype != dtype || *t.shape != graph_->domain) {
      return Error(absl::StrCat(t.Describe("output", static_cast<int>(o)), " must be ",
                                DataTypeName(dtype), graph_->domain.ToString()));
    }
  }
  return absl::OkStatus();
}

namespace {

// The operands' data pointers, in order: what TileProgram::Run takes.
struct Operands {
  absl::InlinedVector<const void*, 8> in;
  absl::InlinedVector<void*, 4> out;
};
Operands OperandsOf(const ops::HostArgs& args) {
  Operands operands;
  for (const ops::HostTensor& t : args.inputs) operands.in.push_back(t.data);
  for (const ops::HostTensor& t : args.outputs) operands.out.push_back(t.data);
  return operands;
}

}  // namespace

absl::StatusOr<ops::HostWork> TileProgramKernel::Prepare(const ops::HostArgs& args) const {
  SLUICE_RETURN_IF_ERROR(Check(args));
  return ops::HostWork(
      [program = program_, operands = OperandsOf(args), parallel = args.parallel()] {
        return program->Run(operands.in, operands.out, parallel);
      });
}

// Prepare's work, done at once: no work object to build on the stream that runs it now.
absl::Status TileProgramKernel::RunNow(const ops::HostArgs& args) const {
  SLUICE_RETURN_IF_ERROR(Check(args));
  const Operands operands = OperandsOf(args);
  return program_->Run(operands.in, operands.out, args.parallel());
}

}  // namespace sluice::framework::compiler
