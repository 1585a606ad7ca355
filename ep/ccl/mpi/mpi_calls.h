// MpiCall: the one process-wide lock every MPI call Sluice makes goes through, so that MPI
// needs no more than MPI_THREAD_SERIALIZED. MpiWorld (mpi_world.h) initializes MPI and
// records the thread level it was granted; the world and its communicators
// (mpi_communicator.h) make their calls here.
//
// Thread-safe: any thread.
#ifndef SLUICE_EP_CCL_MPI_MPI_CALLS_H_
#define SLUICE_EP_CCL_MPI_MPI_CALLS_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/plain_mutex.h"

namespace sluice::ep::ccl::internal {

// The lock, for the sections that call MPI themselves (initialization, finalization,
// abort). A PlainMutex: taken on every poll, and absl::Mutex updates a deadlock graph each
// time. Never destroyed: exit handlers take it.
PlainMutex& MpiLock();

// Records whether MPI_Init_thread granted MPI_THREAD_MULTIPLE. Called once, under MpiLock,
// before any world exists (and so before any MpiCallBlocking).
void SetMpiThreadMultiple(bool granted);

// Runs `fn` (MPI calls) under MpiLock; Internal naming `what` when it returns an MPI error
// code.
absl::Status MpiCall(absl::string_view what, absl::FunctionRef<int()> fn);
// MpiCall for a blocking MPI call that waits for other ranks (MPI_Comm_create_group):
// without the lock where MPI is fully thread-safe (MPI_THREAD_MULTIPLE), so that this
// rank's other ccl streams keep polling meanwhile (two such calls on two devices could
// otherwise wait for each other across ranks); with it elsewhere.
absl::Status MpiCallBlocking(absl::string_view what, absl::FunctionRef<int()> fn);

// MPI's text for error code `code` ("error N" when MPI has none).
std::string MpiErrorText(int code);

}  // namespace sluice::ep::ccl::internal

#endif  // SLUICE_EP_CCL_MPI_MPI_CALLS_H_
