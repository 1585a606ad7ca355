// sluice._sluice's ONNX import (framework/onnx): a serialized ModelProto becomes a static
// Program (the sluice.static.Program type) with its persistables as NumPy arrays, the graph
// inputs and outputs mapped to the program's variables, and the importer's notes. What
// sluice.onnx is made of. In a build without ONNX every import raises UnimplementedError.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/onnx/onnx_import.h"
#include "python/src/bindings.h"

namespace sluice::python {
namespace {

namespace onnx = framework::onnx;

// One graph input or output, as Python sees it.
struct PyOnnxValue {
  std::string onnx_name;
  std::string var;
  std::string dtype;
  std::vector<int64_t> shape;
};

// The result of one import. The persistables are NumPy arrays made once (they own the bytes
// the importer produced: no copy), in the program's declaration order.
struct PyOnnxImport {
  std::shared_ptr<PyProgram> program;
  nb::list persistables;  // (name, array) pairs
  std::vector<PyOnnxValue> inputs;
  std::vector<PyOnnxValue> outputs;
  std::vector<std::string> notes;
  int64_t ir_version = 0;
  int64_t opset = 0;
  std::string producer;
};

PyOnnxValue ToPyValue(const onnx::OnnxValue& v) {
  return {v.onnx_name, v.var, std::string(DataTypeName(v.dtype)), FromShape(v.shape)};
}

// `model`: bytes (or anything the buffer protocol gives bytes of). `dim_sizes`: symbolic
// dimension name -> size; `input_shapes`: ONNX input name -> whole shape;
// `constant_inputs`: ONNX input name -> array, graph inputs taken as constants.
PyOnnxImport Import(eager::Context ctx, nb::bytes model, nb::dict dim_sizes, nb::dict input_shapes,
                    nb::dict constant_inputs) {
  onnx::OnnxImportOptions options;
  for (auto [key, value] : dim_sizes) {
    options.dim_sizes[nb::cast<std::string>(key)] = nb::cast<int64_t>(value);
  }
  for (auto [key, value] : input_shapes) {
    options.input_shapes[nb::cast<std::string>(key)] = nb::cast<std::vector<int64_t>>(value);
  }
  for (auto [key, value] : constant_inputs) {
    const std::string name = nb::cast<std::string>(key);
    options.constant_inputs[name] = HostTensorFromArray(value, "constant input '" + name + "'");
  }
  const std::string bytes(model.c_str(), model.size());
  absl::StatusOr<onnx::OnnxImport> imported;
  {
    // The import is pure and reads nothing Python owns.
    nb::gil_scoped_release release;
    imported = onnx::ImportOnnxModel(bytes, &ctx.registry(), options);
  }
  onnx::OnnxImport result = Unwrap(std::move(imported));

  PyOnnxImport out;
  out.program = std::make_shared<PyProgram>(std::move(ctx));
  RegisterOwner(out.program);
  out.program->program->mutable_desc() = std::move(result.program);
  for (auto& [name, tensor] : result.persistables) {
    out.persistables.append(
        nb::make_tuple(name, ArrayFromBytes(tensor.dtype, tensor.shape, std::move(tensor.bytes))));
  }
  for (const onnx::OnnxValue& v : result.inputs) out.inputs.push_back(ToPyValue(v));
  for (const onnx::OnnxValue& v : result.outputs) out.outputs.push_back(ToPyValue(v));
  out.notes = std::move(result.notes);
  out.ir_version = result.ir_version;
  out.opset = result.opset;
  out.producer = std::move(result.producer);
  return out;
}

}  // namespace

void BindOnnx(nb::module_& m) {
  nb::class_<PyOnnxValue>(m, "_OnnxValue", "A graph input or output of an imported ONNX model.")
      .def_ro("onnx_name", &PyOnnxValue::onnx_name, "The value's name in the ONNX graph.")
      .def_ro("var", &PyOnnxValue::var, "The program variable that holds it.")
      .def_ro("dtype", &PyOnnxValue::dtype, "Its Sluice dtype name (\"float32\", ...).")
      .def_prop_ro(
          "shape",
          [](const PyOnnxValue& v) {
            nb::list dims;
            for (int64_t d : v.shape) dims.append(d);
            return nb::tuple(dims);
          },
          "Its static shape in the program.")
      .def("__repr__", [](const PyOnnxValue& v) {
        std::string dims;
        for (size_t i = 0; i < v.shape.size(); ++i) {
          absl::StrAppend(&dims, i == 0 ? "" : ", ", v.shape[i]);
        }
        return absl::StrCat("OnnxValue(onnx_name='", v.onnx_name, "', var='", v.var,
                            "', dtype=", v.dtype, ", shape=[", dims, "])");
      });

  nb::class_<PyOnnxImport>(m, "_OnnxImport", "An imported ONNX model (framework/onnx).")
      .def_ro("program", &PyOnnxImport::program,
              "The model as a static Program: the graph's nodes as ops of the global block.")
      .def_ro("persistables", &PyOnnxImport::persistables,
              "(name, NumPy array) for each persistable variable (the initializers and the "
              "constants the program reads as tensors), in declaration order.")
      .def_ro("inputs", &PyOnnxImport::inputs, "The feeds: graph inputs that are not initializers.")
      .def_ro("outputs", &PyOnnxImport::outputs, "The fetches: the graph outputs.")
      .def_ro("notes", &PyOnnxImport::notes,
              "What the import did that a user may want to know (a skipped checker, ...).")
      .def_ro("ir_version", &PyOnnxImport::ir_version)
      .def_ro("opset", &PyOnnxImport::opset, "The model's opset of the default ONNX domain.")
      .def_ro("producer", &PyOnnxImport::producer);

  m.def("_onnx_import", &Import, nb::arg("context"), nb::arg("model"),
        nb::arg("dim_sizes") = nb::dict(), nb::arg("input_shapes") = nb::dict(),
        nb::arg("constant_inputs") = nb::dict(),
        "Imports the serialized ONNX ModelProto `model` (framework::onnx::ImportOnnxModel). "
        "The GIL is released while it runs.");
  m.def(
      "_onnx_supported_ops",
      [] {
        std::vector<std::tuple<std::string, int64_t, int64_t, std::string>> rows;
        for (const onnx::OnnxOpRow& row : onnx::SupportedOnnxOps()) {
          rows.emplace_back(row.op_type, row.first_opset, row.last_opset, row.limits);
        }
        return rows;
      },
      "The importer's op table: (op_type, first_opset, last_opset, limits) rows.");
  m.def("_onnx_import_available", &onnx::OnnxImportAvailable,
        "Whether this build links ONNX (libonnx-dev and libprotobuf-dev).");
}

}  // namespace sluice::python
