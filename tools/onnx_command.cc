#include "tools/onnx_command.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "framework/io/npy.h"
#include "framework/io/persistables.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"

namespace sluice::tools {
namespace {

namespace onnx = framework::onnx;

absl::StatusOr<std::pair<std::string, std::string>> SplitAssignment(absl::string_view text,
                                                                    absl::string_view form) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not ", form));
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

absl::Status WriteImport(const onnx::OnnxImport& imported, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create directory '", dir, "': ", error.message()));
  }
  SLUICE_RETURN_IF_ERROR(imported.program.Save(dir + "/main.program"));
  for (const auto& [name, value] : imported.persistables) {
    SLUICE_RETURN_IF_ERROR(
        framework::io::WriteNpy(framework::io::PersistablePath(dir, name),
                                framework::io::NpyArray{value.dtype, value.shape, value.bytes}));
  }
  return absl::OkStatus();
}

void PrintOnnxOps() {
  if (!onnx::OnnxImportAvailable()) {
    std::printf("this build has no ONNX import (install libonnx-dev and libprotobuf-dev)\n");
    return;
  }
  std::printf("%-20s %-10s %s\n", "op type", "opsets", "limits");
  for (const onnx::OnnxOpRow& row : onnx::SupportedOnnxOps()) {
    const std::string opsets = absl::StrCat(row.first_opset, "-", row.last_opset);
    std::printf("%-20s %-10s %s\n", row.op_type.c_str(), opsets.c_str(), row.limits.c_str());
  }
}

}  // namespace

bool IsOnnxPath(absl::string_view path) { return absl::EndsWith(path, ".onnx"); }

void AddOnnxShapeOptions(OptionParser& parser, onnx::OnnxImportOptions* options) {
  parser.AddRepeated(
      "--dim", "NAME=N",
      "ONNX models: the size of symbolic dimension NAME (e.g. batch=8); Sluice programs are "
      "static",
      [options](absl::string_view text) -> absl::Status {
        SLUICE_ASSIGN_OR_RETURN(auto kv, SplitAssignment(text, "NAME=N"));
        int64_t n = 0;
        if (!absl::SimpleAtoi(kv.second, &n) || n < 0) {
          return absl::InvalidArgumentError(absl::StrCat("'", kv.second, "' is not a size"));
        }
        options->dim_sizes[kv.first] = n;
        return absl::OkStatus();
      });
  parser.AddRepeated(
      "--input-shape", "NAME=D0,D1,...",
      "ONNX models: the whole shape of graph input NAME (an empty list for a scalar)",
      [options](absl::string_view text) -> absl::Status {
        SLUICE_ASSIGN_OR_RETURN(auto kv, SplitAssignment(text, "NAME=D0,D1,..."));
        std::vector<int64_t> dims;
        for (absl::string_view part : absl::StrSplit(kv.second, ',', absl::SkipEmpty())) {
          int64_t d = 0;
          if (!absl::SimpleAtoi(part, &d) || d < 0) {
            return absl::InvalidArgumentError(absl::StrCat("'", part, "' is not a dimension"));
          }
          dims.push_back(d);
        }
        options->input_shapes[kv.first] = std::move(dims);
        return absl::OkStatus();
      });
  parser.AddRepeated(
      "--constant-input", "NAME=FILE",
      "ONNX models: take graph input NAME as a constant with the value in FILE (.npy), for "
      "an input an op takes as an attribute (a Reshape's shape, a Reduce's axes); it is then "
      "not fed",
      [options](absl::string_view text) -> absl::Status {
        SLUICE_ASSIGN_OR_RETURN(auto kv, SplitAssignment(text, "NAME=FILE"));
        SLUICE_ASSIGN_OR_RETURN(framework::io::NpyArray array, framework::io::ReadNpy(kv.second));
        options->constant_inputs[kv.first] =
            framework::HostTensor{array.dtype, array.shape, std::move(array.bytes)};
        return absl::OkStatus();
      });
}

void PrintOnnxImport(const onnx::OnnxImport& imported) {
  std::printf("onnx: IR %lld, opset %lld%s%s; %d ops, %zu persistables\n",
              static_cast<long long>(imported.ir_version), static_cast<long long>(imported.opset),
              imported.producer.empty() ? "" : ", from ", imported.producer.c_str(),
              static_cast<int>(imported.program.global_block().ops().size()),
              imported.persistables.size());
  for (const std::string& note : imported.notes) std::printf("onnx: %s\n", note.c_str());
  for (const auto& in : imported.inputs) {
    std::printf("onnx: input  %s -> %s %s %s\n", in.onnx_name.c_str(), in.var.c_str(),
                std::string(DataTypeName(in.dtype)).c_str(), in.shape.ToString().c_str());
  }
  for (const auto& out : imported.outputs) {
    std::printf("onnx: output %s -> %s %s %s\n", out.onnx_name.c_str(), out.var.c_str(),
                std::string(DataTypeName(out.dtype)).c_str(), out.shape.ToString().c_str());
  }
}

absl::StatusOr<OnnxRunProgram> ImportForRun(
    const std::string& path, const ops::OpRegistry* registry, onnx::OnnxImportOptions options,
    std::vector<std::pair<std::string, framework::HostTensor>>* feeds,
    std::vector<std::string>* fetches) {
  for (const auto& [name, value] : *feeds) {
    if (!options.input_shapes.contains(name)) {
      options.input_shapes[name] =
          std::vector<int64_t>(value.shape.dims().begin(), value.shape.dims().end());
    }
  }
  OnnxRunProgram run;
  SLUICE_ASSIGN_OR_RETURN(run.imported, onnx::ImportOnnxFile(path, registry, options));
  for (auto& [name, value] : *feeds) {
    for (const auto& in : run.imported.inputs) {
      if (in.onnx_name == name) name = in.var;
    }
  }
  if (fetches->empty()) {
    for (const auto& out : run.imported.outputs) fetches->push_back(out.onnx_name);
  }
  for (const std::string& fetch : *fetches) {
    std::string var = fetch;
    for (const auto& out : run.imported.outputs) {
      if (out.onnx_name == fetch) var = out.var;
    }
    run.fetch_vars.push_back(var);
  }
  return run;
}

int ImportMain(int argc, char** argv) {
  std::string model_path;
  std::string out_dir;
  bool list_ops = false;
  onnx::OnnxImportOptions options;
  OptionParser parser(
      "import",
      "Imports an ONNX model: writes OUT/main.program (docs/program-format.md) and each\n"
      "persistable (initializer) as OUT/NAME.npy, then prints the feeds and fetches.\n"
      "Run the result with `sluice run OUT/main.program --load OUT --feed ... --fetch ...`,\n"
      "or run the model directly with `sluice run MODEL.onnx`. docs/onnx.md lists the op\n"
      "types and opsets this build maps.\n",
      "Exit status: 0 on success, 1 when the model could not be read or imported (the\n"
      "error names the node, its op type and opset), 2 for bad options.\n");
  parser.AddPositional("MODEL", "the .onnx file", &model_path);
  parser.AddString("-o", "DIR", "where to write main.program and the .npy files", &out_dir);
  parser.AddFlag("--list-ops", "print the op types and opsets this build maps, and exit",
                 &list_ops);
  AddOnnxShapeOptions(parser, &options);
  for (int i = 1; i < argc; ++i) {  // needs no MODEL
    if (absl::string_view(argv[i]) == "--list-ops") {
      PrintOnnxOps();
      return kExitOk;
    }
  }
  if (std::optional<int> exit = ParseCommandLine(parser, argc, argv)) return *exit;
  if (out_dir.empty()) {
    std::fprintf(stderr, "sluice import: -o DIR is required\n");
    return kExitUsage;
  }
  ops::OpRegistry registry;
  if (absl::Status registered = ops::RegisterStandardOps(&registry); !registered.ok()) {
    return ReportFailure("import", registered);
  }
  absl::StatusOr<onnx::OnnxImport> imported = onnx::ImportOnnxFile(model_path, &registry, options);
  if (!imported.ok()) return ReportFailure("import", imported.status());
  if (absl::Status written = WriteImport(*imported, out_dir); !written.ok()) {
    return ReportFailure("import", written);
  }
  PrintOnnxImport(*imported);
  std::printf("wrote %s/main.program and %zu .npy files\n", out_dir.c_str(),
              imported->persistables.size());
  return kExitOk;
}

}  // namespace sluice::tools
