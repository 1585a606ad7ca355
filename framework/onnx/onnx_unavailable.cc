// The ONNX importer's entry points in a build without ONNX (CMakeLists.txt: SLUICE_WITH_ONNX).
#include "absl/status/status.h"
#include "framework/onnx/onnx_import.h"

namespace sluice::framework::onnx {
namespace {

absl::Status Unavailable() {
  return absl::UnimplementedError(
      "this build of Sluice has no ONNX import: install Debian's libonnx-dev and "
      "libprotobuf-dev (scripts/install_deps.sh) and build again");
}

}  // namespace

bool OnnxImportAvailable() { return false; }

std::vector<OnnxOpRow> SupportedOnnxOps() { return {}; }

absl::StatusOr<OnnxImport> ImportOnnxModel(absl::string_view, const ops::OpRegistry*,
                                           const OnnxImportOptions&) {
  return Unavailable();
}

absl::StatusOr<OnnxImport> ImportOnnxFile(const std::string&, const ops::OpRegistry*,
                                          const OnnxImportOptions&) {
  return Unavailable();
}

}  // namespace sluice::framework::onnx
