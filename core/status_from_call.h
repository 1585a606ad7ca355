// StatusFromCall: the one place where an exception thrown by code the engine calls — a
// kernel, a host task on a stream, a blob callback — becomes an absl::Status. No exception
// crosses a worker's or a stream thread's entry point: each runs the callee through this.
#ifndef SLUICE_CORE_STATUS_FROM_CALL_H_
#define SLUICE_CORE_STATUS_FROM_CALL_H_

#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sluice {

// Calls `f()` (which returns absl::Status) and returns its status; an exception it throws
// becomes InternalError "<what> threw: <e.what()>" (or "... a non-standard exception").
// `what` names the callee for the message ("kernel 'add'", "host task"). Thread-safe as `f`.
template <typename F>
absl::Status StatusFromCall(absl::string_view what, F&& f) noexcept {
  try {
    return std::forward<F>(f)();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, " threw: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(what, " threw a non-standard exception"));
  }
}

}  // namespace sluice

#endif  // SLUICE_CORE_STATUS_FROM_CALL_H_
