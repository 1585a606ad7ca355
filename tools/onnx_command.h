// `sluice import` (an ONNX model to a program file and .npy persistables) and the ONNX side
// of `sluice run MODEL.onnx`: the options that size symbolic dimensions, and the import that
// `run` makes before its steps.
#ifndef SLUICE_TOOLS_ONNX_COMMAND_H_
#define SLUICE_TOOLS_ONNX_COMMAND_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/onnx/onnx_import.h"
#include "tools/options.h"

namespace sluice::tools {

// Whether `path` names an ONNX model (ends in ".onnx").
bool IsOnnxPath(absl::string_view path);

// Adds --dim NAME=N, --input-shape NAME=D0,D1,... and --constant-input NAME=FILE.npy to
// `parser`, filling `options`.
void AddOnnxShapeOptions(OptionParser& parser, framework::onnx::OnnxImportOptions* options);

// Prints the import's notes and its inputs and outputs (ONNX name -> variable) to stdout.
void PrintOnnxImport(const framework::onnx::OnnxImport& imported);

// What `sluice run MODEL.onnx` runs: the imported program and persistable values, and the
// fetches as variables. The feeds, named by ONNX input name (or variable name), are renamed
// to their variables in place, and each one's shape sizes the input it feeds. With no
// fetches asked for, every graph output is fetched; `fetches` then lists their ONNX names.
struct OnnxRunProgram {
  framework::onnx::OnnxImport imported;
  std::vector<std::string> fetch_vars;
};
absl::StatusOr<OnnxRunProgram> ImportForRun(
    const std::string& path, const ops::OpRegistry* registry,
    framework::onnx::OnnxImportOptions options,
    std::vector<std::pair<std::string, framework::HostTensor>>* feeds,
    std::vector<std::string>* fetches);

// argv[0] is "import". The exit code (tools/options.h).
int ImportMain(int argc, char** argv);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_ONNX_COMMAND_H_
