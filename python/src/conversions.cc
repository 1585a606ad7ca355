// Conversions between Python objects and the C++ front end's types (bindings.h).
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/graph/graph.h"
#include "python/src/bindings.h"

namespace sluice::python {
namespace {

// Program -> its PyProgram, for Values that come back from the front end as bare Vars.
// Guarded by the GIL (every caller holds it).
absl::flat_hash_map<const framework::Program*, std::weak_ptr<PyProgram>>& Owners() {
  static auto* owners =
      new absl::flat_hash_map<const framework::Program*, std::weak_ptr<PyProgram>>;
  return *owners;
}

std::string TypeName(nb::handle object) {
  return nb::cast<std::string>(
      nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(object.ptr()))).attr("__name__")));
}

}  // namespace

PyProgram::PyProgram(eager::Context ctx)
    : context(std::move(ctx)), program(std::make_unique<framework::Program>(&context.registry())) {
  Owners()[program.get()] = std::weak_ptr<PyProgram>();  // filled in by the binding
}

PyProgram::~PyProgram() { ForgetOwner(program.get()); }

std::shared_ptr<PyProgram> OwnerOf(const framework::Program* program) {
  auto it = Owners().find(program);
  return it == Owners().end() ? nullptr : it->second.lock();
}

void RegisterOwner(const std::shared_ptr<PyProgram>& owner) {
  Owners()[owner->program.get()] = owner;
}

void ForgetOwner(const framework::Program* program) { Owners().erase(program); }

void CheckUsable(const PyVariable& variable) {
  if (!variable.usable()) {
    throw StatusError(absl::FailedPreconditionError(
        absl::StrCat("variable '", variable.var.name(),
                     "' belongs to a graph trace that has ended; use it inside build()")));
  }
}

framework::Value ToValue(nb::handle object) {
  if (nb::isinstance<eager::Tensor>(object)) {
    const eager::Tensor& tensor = nb::cast<const eager::Tensor&>(object);
    if (framework::graph::Trace* trace = CurrentTrace()) return Unwrap(trace->Param(tensor));
    return tensor;
  }
  if (nb::isinstance<PyVariable>(object)) {
    const PyVariable& variable = nb::cast<const PyVariable&>(object);
    CheckUsable(variable);
    return variable.var;
  }
  throw nb::type_error(
      absl::StrCat("expected a sluice Tensor or static Variable, got ", TypeName(object)).c_str());
}

eager::Tensor EagerOperand(nb::handle object, const char* op, const char* name) {
  if (!nb::isinstance<eager::Tensor>(object)) {
    throw nb::type_error(absl::StrCat("sluice.", op, ": ", name,
                                      " must be an eager sluice Tensor (in-place functions do not "
                                      "take static Variables), got ",
                                      TypeName(object))
                             .c_str());
  }
  if (CurrentTrace() != nullptr) {
    throw nb::type_error(absl::StrCat("sluice.", op,
                                      ": in-place functions are eager only; inside a Graph's "
                                      "trace use the out-of-place function")
                             .c_str());
  }
  return nb::cast<const eager::Tensor&>(object);
}

nb::object FromValue(framework::Value value) {
  if (value.is_static()) {
    const framework::Var& var = value.var();
    std::shared_ptr<PyProgram> owner = OwnerOf(var.program());
    std::shared_ptr<const bool> token = owner == nullptr ? TraceToken(var.program()) : nullptr;
    return nb::cast(PyVariable{var, std::move(owner), std::move(token)});
  }
  return nb::cast(value.tensor());
}

vm::AttrMap ToAttrs(const nb::dict& attrs) {
  vm::AttrMap map;
  for (auto [key, value] : attrs) {
    const std::string name = nb::cast<std::string>(key);
    if (PyBool_Check(value.ptr())) {
      map.Set(name, static_cast<int64_t>(value.ptr() == Py_True));
    } else if (PyLong_Check(value.ptr())) {
      map.Set(name, nb::cast<int64_t>(value));
    } else if (PyFloat_Check(value.ptr())) {
      map.Set(name, nb::cast<double>(value));
    } else if (nb::isinstance<nb::str>(value)) {
      map.Set(name, nb::cast<std::string>(value));
    } else if (nb::isinstance<nb::list>(value) || nb::isinstance<nb::tuple>(value)) {
      std::vector<int64_t> ints;
      for (nb::handle item : value) {
        if (!PyLong_Check(item.ptr()) || PyBool_Check(item.ptr())) {
          throw nb::type_error(absl::StrCat("attribute '", name,
                                            "': a sequence attribute holds ints only, got ",
                                            TypeName(item))
                                   .c_str());
        }
        ints.push_back(nb::cast<int64_t>(item));
      }
      map.Set(name, std::move(ints));
    } else {
      throw nb::type_error(absl::StrCat("attribute '", name,
                                        "': expected bool, int, float, str or a sequence of "
                                        "ints, got ",
                                        TypeName(value))
                               .c_str());
    }
  }
  return map;
}

std::vector<framework::Value> ToValues(nb::handle sequence) {
  std::vector<framework::Value> values;
  for (nb::handle item : sequence) values.push_back(ToValue(item));
  return values;
}

std::vector<int64_t> Axes(nb::handle axis) {
  if (axis.is_none()) return {};
  if (PyLong_Check(axis.ptr())) return {nb::cast<int64_t>(axis)};
  return nb::cast<std::vector<int64_t>>(axis);
}

DataType ParseDtype(const std::string& name) { return Unwrap(ParseDataType(name)); }

Device ParseDevice(const std::string& name) { return Unwrap(Device::Parse(name)); }

Shape ToShape(const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d < 0) {
      throw StatusError(absl::InvalidArgumentError(absl::StrCat(
          "shape [", absl::StrJoin(dims, ", "),
          "]: every dimension must be known and non-negative (Sluice programs are static)")));
    }
  }
  return Shape(dims);
}

std::vector<int64_t> FromShape(const Shape& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

framework::HostTensor HostTensorFromArray(nb::handle array, const std::string& what) {
  using Array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
  Array a;
  bool converted = false;
  try {
    converted = nb::try_cast<Array>(array, a);
  } catch (const std::exception&) {
    converted = false;  // a dtype DLPack cannot describe (strings, objects)
  }
  if (!converted) {
    PyErr_Clear();  // what the failed conversion left set
    if (nb::hasattr(array, "dtype")) {
      nb::str dtype_name(array.attr("dtype"));
      throw StatusError(absl::InvalidArgumentError(
          absl::StrCat(what, ": arrays of dtype ", dtype_name.c_str(),
                       " are not supported (float32, float64, int32, int64 and bool are)")));
    }
    throw nb::type_error(absl::StrCat(what,
                                      ": expected an array (NumPy, or anything with the "
                                      "buffer protocol or DLPack), got ",
                                      TypeName(array))
                             .c_str());
  }
  const nb::dlpack::dtype dt = a.dtype();
  DataType dtype;
  if (dt == nb::dtype<float>()) {
    dtype = DataType::kF32;
  } else if (dt == nb::dtype<double>()) {
    dtype = DataType::kF64;
  } else if (dt == nb::dtype<int32_t>()) {
    dtype = DataType::kI32;
  } else if (dt == nb::dtype<int64_t>()) {
    dtype = DataType::kI64;
  } else if (dt == nb::dtype<bool>()) {
    dtype = DataType::kBool;
  } else {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat(what, ": arrays of dtype code ", static_cast<int>(dt.code), " with ", dt.bits,
                     " bits are not supported (float32, float64, int32, int64 and bool are)")));
  }
  std::vector<int64_t> dims(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) dims[i] = static_cast<int64_t>(a.shape(i));
  framework::HostTensor tensor{dtype, Shape(dims), {}};
  tensor.bytes.resize(a.nbytes());
  if (a.nbytes() > 0) std::memcpy(tensor.bytes.data(), a.data(), a.nbytes());
  return tensor;
}

nb::object ArrayFromBytes(DataType dtype, const Shape& shape, std::vector<uint8_t> bytes) {
  auto* owned = new std::vector<uint8_t>(std::move(bytes));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  std::vector<size_t> dims(shape.dims().begin(), shape.dims().end());
  nb::dlpack::dtype dt;
  switch (dtype) {
    case DataType::kF32:
      dt = nb::dtype<float>();
      break;
    case DataType::kF64:
      dt = nb::dtype<double>();
      break;
    case DataType::kI32:
      dt = nb::dtype<int32_t>();
      break;
    case DataType::kI64:
      dt = nb::dtype<int64_t>();
      break;
    case DataType::kBool:
      dt = nb::dtype<bool>();
      break;
  }
  nb::ndarray<nb::numpy> array(owned->data(), dims.size(), dims.data(), owner, nullptr, dt);
  return array.cast();
}

}  // namespace sluice::python
