#include "ep/ccl/mpi/mpi_calls.h"

#include <mpi.h>

#include "absl/strings/str_cat.h"

namespace sluice::ep::ccl::internal {
namespace {

// Whether MPI_Init_thread granted MPI_THREAD_MULTIPLE: written once, under the lock,
// before any world exists.
bool thread_multiple = false;

}  // namespace

PlainMutex& MpiLock() {
  static auto* const mu = new PlainMutex;  // never destroyed: exit handlers use it
  return *mu;
}

void SetMpiThreadMultiple(bool granted) { thread_multiple = granted; }

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return absl::StrCat("error ", code);
  return std::string(text, length);
}

absl::Status MpiCall(absl::string_view what, absl::FunctionRef<int()> fn) {
  int code;
  {
    PlainMutexLock lock(&MpiLock());
    code = fn();
  }
  if (code == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: ", MpiErrorText(code)));
}

absl::Status MpiCallBlocking(absl::string_view what, absl::FunctionRef<int()> fn) {
  if (!thread_multiple) return MpiCall(what, fn);
  const int code = fn();
  if (code == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: ", MpiErrorText(code)));
}

}  // namespace sluice::ep::ccl::internal
