#include "core/thread_name.h"

#include <string>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace sluice {

void SetCurrentThreadName(absl::string_view name) {
#if defined(__linux__)
  constexpr size_t kMaxChars = 15;  // the kernel's limit, without the terminator
  const std::string cut(name.substr(0, kMaxChars));
  pthread_setname_np(pthread_self(), cut.c_str());
#else
  (void)name;
#endif
}

}  // namespace sluice
