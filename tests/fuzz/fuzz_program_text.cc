// Fuzz target: the program text reader (framework/ir/program_desc.h, docs/program-format.md),
// then Validate and an interpreter build on what it accepts. A program read must print to a
// text that reads back equal and prints the same again; what the reader refuses must be
// refused with InvalidArgument or DataLoss; Validate and Interpreter::Build may refuse a
// program, but neither may crash, leak or hang on it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "framework/eager/context.h"
#include "framework/interpreter/interpreter.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace fuzz = sluice::fuzz;
using sluice::framework::ir::ProgramDesc;

// One runtime (cpu and a sim device) for every input: creating threads per input would
// dominate the run. Built programs are destroyed before the next input, and nothing runs.
sluice::eager::Context& SharedContext() {
  static sluice::eager::Context* context = [] {
    sluice::eager::ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.enable_cuda = false;
    absl::StatusOr<sluice::eager::Context> created = sluice::eager::Context::Create(options);
    fuzz::Check(created.ok(), "no context: " + created.status().ToString());
    return new sluice::eager::Context(*std::move(created));
  }();
  return *context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<ProgramDesc> program = ProgramDesc::FromText(fuzz::AsText(data, size));
  if (!program.ok()) {
    fuzz::CheckInputError(program.status(), "ProgramDesc::FromText");
    return 0;
  }
  const std::string text = program->ToText();
  absl::StatusOr<ProgramDesc> again = ProgramDesc::FromText(text);
  fuzz::Check(again.ok(),
              "ToText's output does not read back: " + again.status().ToString() + "\n" + text);
  fuzz::Check(*again == *program, "the program read back differs:\n" + text);
  fuzz::Check(again->ToText() == text, "the program read back prints differently:\n" + text);
  fuzz::Check(again->Hash() == program->Hash(), "equal programs hash differently");

  if (!program->Validate().ok()) return 0;
  sluice::eager::Context& context = SharedContext();
  sluice::framework::Scope scope;
  absl::StatusOr<std::unique_ptr<sluice::framework::Interpreter>> built =
      sluice::framework::Interpreter::Build(*program, &context.registry(), context.vm(), &scope,
                                            /*feed_names=*/{}, /*fetch_names=*/{});
  (void)built;  // refusing the program is fine; crashing, leaking or hanging is not
  return 0;
}
