// absl::Status -> Python exceptions. The Python package (sluice/errors.py) defines one
// class per status code, each a subclass of sluice.Error and of the built-in exception a
// Python user expects (InvalidArgumentError is a ValueError, NotFoundError a LookupError,
// CancelledError a KeyboardInterrupt-free RuntimeError, ...), and hands the table to
// _set_error_classes at import. The raised exception carries `code` (the status code's
// name, "INVALID_ARGUMENT") and `message`.
#include <nanobind/stl/string.h>

#include <string>

#include "absl/status/status.h"
#include "python/src/bindings.h"

namespace sluice::python {
namespace {

// The classes by absl::StatusCode value; owned references, set once at import and kept
// for the life of the process (the module holds them too).
PyObject* error_classes[32] = {};

std::string CodeName(absl::StatusCode code) {
  return absl::StatusCodeToString(code);  // "INVALID_ARGUMENT"
}

void Raise(const absl::Status& status) {
  // The status replaces whatever a failed conversion on the way left set.
  PyErr_Clear();
  const int code = static_cast<int>(status.code());
  PyObject* type = code >= 0 && code < 32 ? error_classes[code] : nullptr;
  if (type == nullptr) type = error_classes[static_cast<int>(absl::StatusCode::kUnknown)];
  if (type == nullptr) type = PyExc_RuntimeError;
  const std::string message(status.message());
  PyObject* error = PyObject_CallOneArg(type, nb::str(message.data(), message.size()).ptr());
  if (error == nullptr) return;  // the constructor raised: that error stands
  const std::string name = CodeName(status.code());
  PyObject_SetAttrString(error, "code", nb::str(name.c_str()).ptr());
  PyObject_SetAttrString(error, "message", nb::str(message.data(), message.size()).ptr());
  PyErr_SetObject(type, error);
  Py_DECREF(error);
}

}  // namespace

void BindErrors(nb::module_& m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      Raise(e.status());
    }
  });
  m.def(
      "_set_error_classes",
      [](nb::dict classes) {
        for (auto [key, value] : classes) {
          const int code = nb::cast<int>(key);
          if (code < 0 || code >= 32) throw nb::value_error("status code out of range");
          Py_XDECREF(error_classes[code]);
          error_classes[code] = value.ptr();
          Py_INCREF(value.ptr());
        }
      },
      "Installs the exception class raised for each absl status code (sluice/errors.py).");
  m.def(
      "_raise_status",
      [](int code, const std::string& message) {
        throw StatusError(absl::Status(static_cast<absl::StatusCode>(code), message));
      },
      "Raises the exception for a status (tests of the mapping).");
}

}  // namespace sluice::python
