// sluice._sluice VM tools: replaying recorded instruction streams and the stress run, for
// Python users who test stream synchronization (sluice.vm).
#include "python/src/bindings.h"

namespace sluice::python {

void BindVmTools(nb::module_& m) {}

}  // namespace sluice::python
