// ONNX import: an ONNX model (a serialized ModelProto) becomes a Sluice Program — the
// graph's nodes in order as ops of the global block, its initializers as persistable
// variables with their values, its inputs as feeds and its outputs as fetches. This is how
// models exported from PyTorch, TensorFlow, Paddle or scikit-learn reach the interpreter.
// docs/onnx.md lists the op types and opset ranges this build maps, and what it refuses.
//
// The steps, each failing with a Status that names the culprit (nothing is half-imported:
// the result exists only when every step passed):
//  1. Parse the bytes (DataLoss for a file that is not a ModelProto).
//  2. ONNX's checker and shape inference, from the linked ONNX library, where that library
//     knows the model's IR version and opsets; a newer model skips both, with a line in
//     OnnxImport::notes saying so (a caller holding a newer ONNX, as Python's backend does,
//     checks the model there first). A checker error is InvalidArgument with its message.
//  3. Shapes: Sluice programs are static, so each graph input's shape must be known; a
//     symbolic dimension takes its size from OnnxImportOptions, or the import fails naming
//     the input, the dimension and how to give it.
//  4. Each node maps through the table (framework/onnx/internal/node_table.h) chosen by op
//     type and the model's opset. Inputs that Sluice takes as attributes (Reshape's shape,
//     a Reduce's axes, Clip's bounds, Pow's exponent) must be constants and are folded.
//     An unsupported opset, data type or attribute value is InvalidArgument (Unimplemented
//     for an op type the table lacks or a domain other than ONNX's default one), naming the
//     node (its name, op type and the opset) and the reason. Every op is appended through the
//     builder, so Sluice's own shape inference checks it; where ONNX's shape inference ran,
//     each value's shape is checked against it too.
//
// Names: variables keep their ONNX value names, with characters that the program format or
// a file name cannot hold (whitespace , = ; / \ and control characters) replaced by '_',
// and a suffix where that makes two names equal. OnnxImport::inputs and ::outputs map the
// ONNX names to the variables.
//
// Functions only; pure: thread-safe, given a registry that is not being changed.
#ifndef SLUICE_FRAMEWORK_ONNX_ONNX_IMPORT_H_
#define SLUICE_FRAMEWORK_ONNX_ONNX_IMPORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/ir/program_desc.h"
#include "framework/onnx/onnx_import_options.h"
#include "ops/op_registry.h"

namespace sluice::framework::onnx {

// One graph input or output: its ONNX name and the program variable that holds it.
struct OnnxValue {
  std::string onnx_name;
  std::string var;
  DataType dtype = DataType::kF32;
  Shape shape;
};

struct OnnxImport {
  ir::ProgramDesc program;
  // Values of the persistable variables (the initializers and Constant nodes the program
  // reads as tensors), by variable name, in declaration order.
  std::vector<std::pair<std::string, HostTensor>> persistables;
  std::vector<OnnxValue> inputs;   // graph inputs that are not initializers: the feeds
  std::vector<OnnxValue> outputs;  // graph outputs: the fetches
  int64_t ir_version = 0;
  int64_t opset = 0;     // of the default ("" / "ai.onnx") domain
  std::string producer;  // producer_name and producer_version, when the model has them
  // What the import did that a user may want to know: the checker run or skipped, graph
  // inputs taken as constants (OnnxImportOptions::constant_inputs).
  std::vector<std::string> notes;
};

// One row of the importer's op table (docs/onnx.md): the op type of the default domain, the
// opsets mapped, and what the mapping refuses ("" when nothing).
struct OnnxOpRow {
  std::string op_type;
  int64_t first_opset = 0;
  int64_t last_opset = 0;
  std::string limits;
};

// The table, ordered by op type; empty in a build without ONNX.
std::vector<OnnxOpRow> SupportedOnnxOps();

// Whether this build links ONNX (Debian's libonnx-dev and libprotobuf-dev). Without it the
// functions below return Unimplemented naming those packages.
bool OnnxImportAvailable();

// Imports the serialized ModelProto in `bytes`. `registry` must hold the standard ops.
absl::StatusOr<OnnxImport> ImportOnnxModel(absl::string_view bytes, const ops::OpRegistry* registry,
                                           const OnnxImportOptions& options = {});

// Reads `path` and imports it. NotFound / PermissionDenied naming the path; external
// tensor data (a model over 2 GB) is refused naming the initializer.
absl::StatusOr<OnnxImport> ImportOnnxFile(const std::string& path, const ops::OpRegistry* registry,
                                          const OnnxImportOptions& options = {});

}  // namespace sluice::framework::onnx

#endif  // SLUICE_FRAMEWORK_ONNX_ONNX_IMPORT_H_
