// Error handling for all of Sluice: absl::Status / absl::StatusOr plus the two propagation
// macros and an invariant check for programmer errors.
//
// Errors that user input or a device can cause are returned as values; SLUICE_CHECK is only
// for invariants whose violation means a bug in Sluice itself (it prints and aborts).
#ifndef SLUICE_CORE_STATUS_H_
#define SLUICE_CORE_STATUS_H_

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SLUICE_INTERNAL_CONCAT_IMPL(a, b) a##b
#define SLUICE_INTERNAL_CONCAT(a, b) SLUICE_INTERNAL_CONCAT_IMPL(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define SLUICE_RETURN_IF_ERROR(expr)                                 \
  do {                                                               \
    ::absl::Status sluice_status_internal = (expr);                  \
    if (!sluice_status_internal.ok()) return sluice_status_internal; \
  } while (0)

// `lhs = value of statusor_expr`, or returns its error from the enclosing function.
// `lhs` may be a declaration (`auto x`) or an existing variable.
#define SLUICE_ASSIGN_OR_RETURN(lhs, expr) \
  SLUICE_INTERNAL_ASSIGN_OR_RETURN(SLUICE_INTERNAL_CONCAT(sluice_statusor_, __LINE__), lhs, expr)
#define SLUICE_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return std::move(tmp).status();         \
  lhs = std::move(tmp).value()

namespace sluice::internal {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "%s:%d: SLUICE_CHECK failed: %s\n", file, line, cond);
  std::abort();
}
}  // namespace sluice::internal

// Aborts when an internal invariant does not hold. Never use for user input.
#define SLUICE_CHECK(cond) \
  ((cond) ? (void)0 : ::sluice::internal::CheckFailed(__FILE__, __LINE__, #cond))

#endif  // SLUICE_CORE_STATUS_H_
