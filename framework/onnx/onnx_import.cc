#include "framework/onnx/onnx_import.h"

#include <exception>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
// Whether the linked ONNX library knows the model's IR version and opset (else its checker
// and shape inference are skipped, with a note saying so).
bool LibraryKnows(const ::onnx::ModelProto& model, int64_t opset, OnnxImport* result) {
  const int64_t lib_opset =
      ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
  const int64_t lib_ir = ::onnx::Version::IR_VERSION;
  if (model.ir_version() > lib_ir || opset > lib_opset) {
    result->notes.push_back(
        absl::StrCat("ONNX checker and shape inference skipped: the model (IR ", model.ir_version(),
                     ", opset ", opset, ") is newer than the linked ONNX library knows (IR ",
                     lib_ir, ", opset ", lib_opset, "); check it with a newer ONNX first"));
    return false;
  }
  return true;
}

// Runs `step` (ONNX's checker or its shape inference), turning what it throws into
// InvalidArgument.
template <typename F>
absl::Status OnnxLibraryStep(F step) {
  try {
    step();
  } catch (const std::exception& e) {
    // The checker's messages span lines; one line reads better in a Status.
    std::string message = e.what();
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    return absl::InvalidArgumentError(absl::StrCat("ONNX checker: ", message));
  }
  return absl::OkStatus();
}

// ONNX's shape inference over `model`: the inferred static shapes by value name. Run only
// on a model the importer has mapped once: libonnx 1.12's inference gives a shape tensor
// of static length n a rank-n result shape before anything checks n, so a Range or a
// chain of Concats of a few bytes asks it for terabytes; the importer's own mapping
// refuses such graphs first (a shape operand must be a constant of a few elements).
// ONNX infers from the graph inputs' shapes as the import resolved them (`inputs`) and from
// nothing the model declares further down (value_info and the outputs' shapes are dropped):
// a declared shape that contradicts the inputs is the model's inconsistency, which the
// import refuses as such (ImportGraph), not a difference between two inferences.
absl::StatusOr<absl::flat_hash_map<std::string, Shape>> InferShapes(
    const ::onnx::ModelProto& model, const std::vector<OnnxValue>& inputs) {
  ::onnx::ModelProto inferred = model;
  ::onnx::GraphProto* graph = inferred.mutable_graph();
  graph->clear_value_info();
  for (auto& output : *graph->mutable_output()) {
    if (output.type().has_tensor_type()) {
      output.mutable_type()->mutable_tensor_type()->clear_shape();
    }
  }
  for (auto& input : *graph->mutable_input()) {
    for (const OnnxValue& resolved : inputs) {
      if (resolved.onnx_name != input.name() || !input.type().has_tensor_type()) continue;
      auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->clear_dim();
      for (int64_t d : resolved.shape.dims()) shape->add_dim()->set_dim_value(d);
    }
  }
  SLUICE_RETURN_IF_ERROR(OnnxLibraryStep([&] {
    ::onnx::ShapeInferenceOptions options;
    options.check_type = true;
    options.error_mode = 1;
    ::onnx::shape_inference::InferShapes(inferred, ::onnx::OpSchemaRegistry::Instance(), options);
  }));
  absl::flat_hash_map<std::string, Shape> shapes;
  for (const auto& info : inferred.graph().value_info()) {
    Shape shape;
    if (internal::StaticShapeOf(info, &shape)) shapes.emplace(info.name(), shape);
  }
  return shapes;
}

// Whether a declared output shape admits `shape`: the same rank, and each dimension given as
// a size (dim_value) equal (a named or unknown one admits any size).
bool CompatibleShapes(const ::onnx::TensorShapeProto& declared, const Shape& shape) {
  if (declared.dim_size() != shape.rank()) return false;
  for (int i = 0; i < declared.dim_size(); ++i) {
    const auto& d = declared.dim(i);
    if (d.has_dim_value() && d.dim_value() != shape.dim(i)) return false;
  }
  return true;
}

// "[4, batch, ?]".
std::string DeclaredShapeText(const ::onnx::TensorShapeProto& declared) {
  std::vector<std::string> dims;
  for (const auto& d : declared.dim()) {
    dims.push_back(d.has_dim_value()   ? std::to_string(d.dim_value())
                   : d.has_dim_param() ? d.dim_param()
                                       : "?");
  }
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
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
    if (output.type().tensor_type().has_shape() &&
        !CompatibleShapes(output.type().tensor_type().shape(), var->shape())) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", output.name(), "' is declared ",
                       DeclaredShapeText(output.type().tensor_type().shape()), " but computes ",
                       var->shape().ToString(), " from the graph inputs' shapes"));
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
  const bool checked = LibraryKnows(model, result.opset, &result);
  if (checked) {
    SLUICE_RETURN_IF_ERROR(OnnxLibraryStep([&] { ::onnx::checker::check_model(model); }));
  }
  // One import of the graph, cross-checked against ONNX's shapes where given.
  auto import_once = [&](const absl::flat_hash_map<std::string, Shape>& inferred,
                         OnnxImport* into) -> absl::Status {
    Program main(registry);
    Program startup(registry);
    {
      ProgramGuard guard(main, startup);
      SLUICE_RETURN_IF_ERROR(
          ImportGraph(model.graph(), result.opset, inferred, options, main, into));
    }
    SLUICE_RETURN_IF_ERROR(main.desc().Validate());
    into->program = main.desc();
    return absl::OkStatus();
  };
  if (!checked) {
    SLUICE_RETURN_IF_ERROR(import_once({}, &result));
    return result;
  }
  // Mapped once without ONNX's shapes (InferShapes says why), then again checked against
  // them. Both imports take well under a millisecond for the models measured.
  std::vector<OnnxValue> resolved_inputs;
  {
    // The first mapping's program and constants go before the second is built.
    OnnxImport first = result;
    SLUICE_RETURN_IF_ERROR(import_once({}, &first));
    resolved_inputs = std::move(first.inputs);
  }
  SLUICE_ASSIGN_OR_RETURN(auto inferred, InferShapes(model, resolved_inputs));
  result.notes.push_back("ONNX checker and shape inference passed");
  SLUICE_RETURN_IF_ERROR(import_once(inferred, &result));
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
