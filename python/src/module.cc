// The extension module sluice._sluice: the C++ front end for the pure-Python package
// (python/sluice). Each Bind* lives with its area (bindings.h).
#include "python/src/bindings.h"

NB_MODULE(_sluice, m) {
  namespace py = sluice::python;
  m.doc() =
      "Sluice's C++ engine: eager tensors, static programs, executors, graphs, VM tools, ONNX "
      "import.";
#ifdef SLUICE_PYTHON_WITH_CUDA
  m.attr("compiled_with_cuda") = true;
#else
  m.attr("compiled_with_cuda") = false;
#endif
  // Objects alive at interpreter exit (a module-level tensor) are not leaks worth a warning.
  nanobind::set_leak_warnings(false);
  py::BindErrors(m);
  py::BindTensors(m);
  py::BindFunctional(m);
  py::BindStatic(m);
  py::BindExecutor(m);
  py::BindGraph(m);
  py::BindTraining(m);
  py::BindVmTools(m);
  py::BindOnnx(m);
}
