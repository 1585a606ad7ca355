// sluice._sluice._EagerSgd / _EagerAdam: the eager optimizers (framework/training), which
// update parameters in place from their gradients (sluice.optimizer's eager step()).
#include <nanobind/stl/vector.h>

#include <vector>

#include "framework/training/eager_optimizers.h"
#include "python/src/bindings.h"

namespace sluice::python {

void BindTraining(nb::module_& m) {
  nb::class_<eager::Sgd>(m, "_EagerSgd")
      .def("__init__",
           [](eager::Sgd* self, std::vector<eager::Tensor> params, double learning_rate) {
             new (self) eager::Sgd(Unwrap(eager::Sgd::Create(std::move(params), learning_rate)));
           })
      .def("step", [](eager::Sgd& o) { Check(o.Step()); })
      .def("zero_grad", [](eager::Sgd& o) { o.ZeroGrad(); });
  nb::class_<eager::Adam>(m, "_EagerAdam")
      .def("__init__",
           [](eager::Adam* self, std::vector<eager::Tensor> params, double learning_rate,
              double beta1, double beta2, double epsilon) {
             eager::AdamOptions options;
             options.learning_rate = learning_rate;
             options.beta1 = beta1;
             options.beta2 = beta2;
             options.epsilon = epsilon;
             new (self) eager::Adam(Unwrap(eager::Adam::Create(std::move(params), options)));
           })
      .def("step", [](eager::Adam& o) { Check(o.Step()); })
      .def("zero_grad", [](eager::Adam& o) { o.ZeroGrad(); });
}

}  // namespace sluice::python
