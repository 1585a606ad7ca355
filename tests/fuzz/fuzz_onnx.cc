// Fuzz target: the ONNX importer (framework/onnx/onnx_import.h) over arbitrary bytes. What
// it refuses must be refused with InvalidArgument, DataLoss or Unimplemented (an op type or
// a build without ONNX) and a message; Internal (an imported shape that ONNX's inference
// contradicts) is an importer bug and fails the target. What it accepts must validate and
// print to a program text that reads back equal. Nothing runs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "framework/ir/program_desc.h"
#include "framework/onnx/onnx_import.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace fuzz = sluice::fuzz;
namespace onnx = sluice::framework::onnx;

const sluice::ops::OpRegistry& SharedRegistry() {
  static const sluice::ops::OpRegistry* registry = [] {
    auto* r = new sluice::ops::OpRegistry;
    const absl::Status registered = sluice::ops::RegisterStandardOps(r);
    fuzz::Check(registered.ok(), "no registry: " + registered.ToString());
    return r;
  }();
  return *registry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onnx::OnnxImportOptions options;
  options.dim_sizes["batch"] = 2;  // the corpus's symbolic dimension
  absl::StatusOr<onnx::OnnxImport> imported =
      onnx::ImportOnnxModel(fuzz::AsText(data, size), &SharedRegistry(), options);
  if (!imported.ok()) {
    const absl::Status& status = imported.status();
    fuzz::Check(status.code() == absl::StatusCode::kInvalidArgument ||
                    status.code() == absl::StatusCode::kDataLoss ||
                    status.code() == absl::StatusCode::kUnimplemented,
                "ImportOnnxModel gave an unexpected error: " + status.ToString());
    fuzz::Check(!status.message().empty(), "ImportOnnxModel gave an error with no message");
    return 0;
  }
  fuzz::Check(imported->program.Validate().ok(), "an imported program does not validate");
  const std::string text = imported->program.ToText();
  absl::StatusOr<sluice::framework::ir::ProgramDesc> again =
      sluice::framework::ir::ProgramDesc::FromText(text);
  fuzz::Check(again.ok() && *again == imported->program,
              "an imported program does not read back:\n" + text);
  return 0;
}
