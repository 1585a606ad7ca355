// SetCurrentThreadName: names the calling thread for debuggers, `perf` and `top -H`
// ("sluice-sched", "sluice-cpu", "sim0-compute1", ...). Linux keeps 15 characters; longer
// names are cut. A no-op where the platform has no thread names.
#ifndef SLUICE_CORE_THREAD_NAME_H_
#define SLUICE_CORE_THREAD_NAME_H_

#include "absl/strings/string_view.h"

namespace sluice {

// Any thread; names only itself.
void SetCurrentThreadName(absl::string_view name);

}  // namespace sluice

#endif  // SLUICE_CORE_THREAD_NAME_H_
