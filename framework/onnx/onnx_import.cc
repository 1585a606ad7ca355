#include "framework/onnx/onnx_import.h"

#include <exception>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/program.h"
#include "framework/onnx/internal/graph_walk.h"
#include "framework/onnx/internal/node_context.h"
#include "framework/onnx/internal/node_table.h"
#include "framework/onnx/internal/tensor_proto.h"
#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

namespace sluice::framework::onnx {
namespace {

using internal::GraphState;
using internal::NodeContext;

// The model's opset of the default domain; InvalidArgument when it imports none.
absl::StatusOr<int64_t> DefaultOpset(const ::onnx::ModelProto& model) {
  for (const auto& opset : model.opset_import()) {
    if (internal::IsDefaultOnnxDomain(opset.domain())) return opset.version();
  }
  return absl::InvalidArgumentError("the model imports no opset of the default ONNX domain");
}

// ONNX's checker and shape inference, where the linked library knows the model's versions.
// Returns the inferred static shapes by value name (empty when skipped).
absl::StatusOr<absl::flat_hash_map<std::string, Shape>> CheckAndInfer(
    const ::onnx::ModelProto& model, int64_t opset, OnnxImport* result) {
  absl::flat_hash_map<std::string, Shape> shapes;
  const int64_t lib_opset =
      ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
  const int64_t lib_ir = ::onnx::Version::IR_VERSION;
  if (model.ir_version() > lib_ir || opset > lib_opset) {
    result->notes.push_back(
        absl::StrCat("ONNX checker and shape inference skipped: the model (IR ", model.ir_version(),
                     ", opset ", opset, ") is newer than the linked ONNX library knows (IR ",
                     lib_ir, ", opset ", lib_opset, "); check it with a newer ONNX first"));
    return shapes;
  }
  ::onnx::ModelProto inferred = model;
  try {
    ::onnx::checker::check_model(model);
    ::onnx::ShapeInferenceOptions options;
    options.check_type = true;
    options.error_mode = 1;
    ::onnx::shape_inference::InferShapes(inferred, ::onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    // The checker's messages span lines; one line reads better in a Status.
    std::string message = e.what();
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    return absl::InvalidArgumentError(absl::StrCat("ONNX checker: ", message));
  }
  for (const auto& info : inferred.graph().value_info()) {
    Shape shape;
    if (internal::StaticShapeOf(info, &shape)) shapes.emplace(info.name(), shape);
  }
  result->notes.push_back("ONNX checker and shape inference passed");
  return shapes;
}

absl::Status ImportGraph(const ::onnx::GraphProto& graph, int64_t opset,
                         const absl::flat_hash_map<std::string, Shape>& inferred,
                         const OnnxImportOptions& options, Program& main, OnnxImport* result) {
  GraphState state(&main);
  SLUICE_RETURN_IF_ERROR(internal::BindInitializers(graph, state));
  for (const auto& input : graph.input()) {
    if (state.Has(input.name())) continue;  // an initializer listed as an input (IR < 4)
    if (auto given = options.constant_inputs.find(input.name());
        given != options.constant_inputs.end()) {
      SLUICE_RETURN_IF_ERROR(internal::CheckConstantInput(input, given->second));
      state.BindConstant(input.name(), given->second);
      result->notes.push_back(
          absl::StrCat("graph input '", input.name(), "' taken as the constant given at import"));
      continue;
    }
    state.MarkGraphInput(input.name());
    SLUICE_ASSIGN_OR_RETURN(Shape shape, internal::InputShape(input, options));
    SLUICE_ASSIGN_OR_RETURN(DataType dtype, internal::DtypeOfOnnxType(
                                                input.type().tensor_type().elem_type(),
                                                absl::StrCat("graph input '", input.name(), "'")));
    SLUICE_ASSIGN_OR_RETURN(Var var, Data(state.VarNameFor(input.name()), shape, dtype));
    state.BindVar(input.name(), var);
    result->inputs.push_back({input.name(), var.name(), dtype, shape});
  }
  state.set_inferred_shapes(&inferred);
  SLUICE_RETURN_IF_ERROR(internal::MapGraphNodes(graph, opset, state));
  for (const auto& output : graph.output()) {
    absl::StatusOr<Var> var = state.VarOf(output.name());
    if (!var.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", output.name(), "': ", var.status().message()));
    }
    const int32_t declared = output.type().tensor_type().elem_type();
    if (declared != 0 && declared != internal::OnnxTypeOfDtype(var->dtype())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph output '", output.name(), "' is declared ", internal::OnnxTypeName(declared),
          " but computes ", internal::OnnxTypeName(internal::OnnxTypeOfDtype(var->dtype()))));
    }
    result->outputs.push_back({output.name(), var->name(), var->dtype(), var->shape()});
  }
  result->persistables = std::move(state.persistables());
  return absl::OkStatus();
}

}  // namespace

bool OnnxImportAvailable() { return true; }

std::vector<OnnxOpRow> SupportedOnnxOps() {
  std::vector<OnnxOpRow> rows;
  for (const internal::NodeMapping& row : internal::NodeMappings()) {
    rows.push_back(
        {std::string(row.op_type), row.first_opset, row.last_opset, std::string(row.limits)});
  }
  return rows;
}

absl::StatusOr<OnnxImport> ImportOnnxModel(absl::string_view bytes, const ops::OpRegistry* registry,
                                           const OnnxImportOptions& options) {
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(absl::StrCat("not an ONNX model: ", bytes.size(),
                                            " bytes that do not parse as a ModelProto"));
  }
  if (!model.has_graph()) return absl::InvalidArgumentError("the ONNX model has no graph");
  OnnxImport result;
  result.ir_version = model.ir_version();
  SLUICE_ASSIGN_OR_RETURN(result.opset, DefaultOpset(model));
  result.producer = absl::StrCat(model.producer_name(), model.producer_version().empty() ? "" : " ",
                                 model.producer_version());
  SLUICE_ASSIGN_OR_RETURN(auto inferred, CheckAndInfer(model, result.opset, &result));
  Program main(registry);
  Program startup(registry);
  {
    ProgramGuard guard(main, startup);
    SLUICE_RETURN_IF_ERROR(
        ImportGraph(model.graph(), result.opset, inferred, options, main, &result));
  }
  SLUICE_RETURN_IF_ERROR(main.desc().Validate());
  result.program = main.desc();
  return result;
}

absl::StatusOr<OnnxImport> ImportOnnxFile(const std::string& path, const ops::OpRegistry* registry,
                                          const OnnxImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ONNX model '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ONNX model '", path, "'"));
  absl::StatusOr<OnnxImport> result = ImportOnnxModel(buffer.str(), registry, options);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat(path, ": ", result.status().message()));
  }
  return result;
}

}  // namespace sluice::framework::onnx
