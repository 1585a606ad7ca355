#include "ep/ccl/mpi/mpi_world.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "core/plain_mutex.h"
#include "core/status.h"
#include "ep/ccl/internal/backends.h"
#include "ep/ccl/internal/call_checks.h"
#include "ep/ccl/mpi/mpi_calls.h"
#include "ep/ccl/mpi/mpi_communicator.h"
#include "ep/ccl/nccl/nccl_communicator.h"
#include "ep/device.h"

namespace sluice::ep::ccl::internal {

namespace {

// MPI is per process: the one world (and one lock for every call, mpi_calls.h).
struct ProcessWorld {
  absl::Mutex mu;
  std::shared_ptr<MpiWorld> world ABSL_GUARDED_BY(mu);
  bool initialized ABSL_GUARDED_BY(mu) = false;
};
ProcessWorld& TheProcessWorld() {
  static auto* const process = new ProcessWorld;  // never destroyed: exit handlers use it
  return *process;
}

void FinalizeAtExit() {
  std::shared_ptr<MpiWorld> world;
  {
    ProcessWorld& process = TheProcessWorld();
    absl::MutexLock lock(&process.mu);
    world = process.world;
  }
  if (world != nullptr && world->broken()) return;  // a peer may be gone: do not wait for it
  int finalized = 0;
  PlainMutexLock lock(&MpiLock());
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

uint64_t HostHash() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return std::hash<std::string>()(name);
}

// True when process `pid` of this host has exited (gone, or a zombie not yet reaped).
bool ProcessGone(int64_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

// How long a wait yields between polls before it naps (plus the time its bytes take to
// move), and the nap.
constexpr absl::Duration kYieldFor = absl::Microseconds(200);
constexpr absl::Duration kNap = absl::Microseconds(50);

bool MpiBuilt() { return true; }

absl::StatusOr<std::shared_ptr<World>> GetMpiWorld(WorldOptions options) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<MpiWorld> world, MpiWorld::Get(options));
  return std::shared_ptr<World>(std::move(world));
}

MpiWorld::MpiWorld(WorldOptions options, int rank, int size)
    : World(options), rank_(rank), size_(size) {}

absl::StatusOr<std::shared_ptr<MpiWorld>> MpiWorld::Get(WorldOptions options) {
  ProcessWorld& process = TheProcessWorld();
  absl::MutexLock lock(&process.mu);
  if (process.world != nullptr) return process.world;
  if (process.initialized) {
    return absl::FailedPreconditionError("MPI was finalized in this process; it cannot restart");
  }
  int rank = 0, size = 1;
  {
    PlainMutexLock mpi_lock(&MpiLock());
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      if (code != MPI_SUCCESS) {
        return absl::InternalError(absl::StrCat("MPI_Init_thread failed: ", MpiErrorText(code)));
      }
      if (provided < MPI_THREAD_SERIALIZED) {
        return absl::InternalError(
            "this MPI library offers no thread support beyond MPI_THREAD_FUNNELED; Sluice "
            "calls MPI from its ccl stream workers and needs MPI_THREAD_SERIALIZED");
      }
      std::atexit(FinalizeAtExit);
      SetMpiThreadMultiple(provided >= MPI_THREAD_MULTIPLE);
    }
    process.initialized = true;
    // Errors come back as codes, so that they become Status values instead of aborts.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  std::shared_ptr<MpiWorld> world(new MpiWorld(options, rank, size));
  SLUICE_RETURN_IF_ERROR(world->ExchangePeers());
  process.world = world;
  return world;
}

absl::Status MpiWorld::ExchangePeers() {
  const int64_t mine[2] = {static_cast<int64_t>(getpid()), static_cast<int64_t>(HostHash())};
  std::vector<int64_t> all(2 * static_cast<size_t>(size_));
  MPI_Request request;
  SLUICE_RETURN_IF_ERROR(MpiCall("MPI_Iallgather", [&] {
    return MPI_Iallgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, MPI_COMM_WORLD,
                          &request);
  }));
  SLUICE_RETURN_IF_ERROR(Wait(
      &request, 1, [] { return std::string("starting the world"); }, /*bytes=*/0));
  peers_.resize(size_);
  for (int r = 0; r < size_; ++r) {
    peers_[r].pid = all[2 * r];
    peers_[r].host = static_cast<uint64_t>(all[2 * r + 1]);
  }
  return absl::OkStatus();
}

std::vector<std::string> MpiWorld::GonePeers() const {
  std::vector<std::string> gone;
  if (peers_.empty()) return gone;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || peers_[r].host != peers_[rank_].host) continue;
    if (ProcessGone(peers_[r].pid))
      gone.push_back(absl::StrCat("rank ", r, " (pid ", peers_[r].pid, ")"));
  }
  return gone;
}

absl::Status MpiWorld::Wait(MPI_Request* requests, int count,
                            absl::FunctionRef<std::string()> describe, int64_t bytes) {
  const absl::Time start = absl::Now();
  // Shared-memory transports move a large message in fragments, each side progressing only
  // inside MPI calls: a nap stalls the transfer. Poll (yielding) for about as long as the
  // bytes take to move at 1 GB/s before napping.
  const absl::Duration yield_for = kYieldFor + absl::Nanoseconds(bytes);
  const absl::Time deadline = start + options().timeout;
  absl::Time next_peer_check = start + absl::Milliseconds(100);
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    SLUICE_RETURN_IF_ERROR(MpiCall(
        "MPI_Testall", [&] { return MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE); }));
    if (done) return absl::OkStatus();
    auto where = [&] { return absl::StrCat("rank ", rank_, " of ", size_, ": "); };
    if (StopRequested()) {
      std::vector<std::string> gone = GonePeers();
      return absl::UnavailableError(absl::StrCat(
          where(), describe(), ": this process was asked to stop while waiting for its peers",
          gone.empty() ? "" : absl::StrCat("; gone: ", absl::StrJoin(gone, ", "))));
    }
    // A peer a few microseconds behind is the common case: poll without a clock at first.
    if (polls < 512) continue;
    const absl::Time now = absl::Now();
    if (now >= next_peer_check) {
      std::vector<std::string> gone = GonePeers();
      if (!gone.empty()) {
        return absl::UnavailableError(
            absl::StrCat(where(), describe(), ": peer ", absl::StrJoin(gone, ", "), " exited"));
      }
      next_peer_check = now + absl::Milliseconds(100);
    }
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          where(), describe(), ": not complete after ", absl::FormatDuration(options().timeout),
          " (the collective timeout); every peer on this host is alive, so one of them is "
          "late or called something else"));
    }
    // Waits give the core back: on a small machine the peers and this rank's own compute
    // need it (a data-parallel step runs backward while its buckets are reduced). Yield
    // while the peer is probably a few microseconds away, then nap.
    if (now - start < yield_for) {
      std::this_thread::yield();
    } else {
      absl::SleepFor(kNap);
    }
  }
}

absl::StatusOr<std::unique_ptr<Communicator>> MpiWorld::NewCommunicator(const Device& device) {
  const sluice::Device id = device.id();
  if (id.type() == DeviceType::kCuda) {
    NcclBootstrap bootstrap;
    bootstrap.rank = rank_;
    bootstrap.size = size_;
    std::shared_ptr<MpiWorld> self = shared_from_this();
    bootstrap.broadcast_from_rank0 = [self](void* data, size_t bytes) -> absl::Status {
      MPI_Request request;
      SLUICE_RETURN_IF_ERROR(MpiCall("MPI_Ibcast", [&] {
        return MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD, &request);
      }));
      return self->Wait(
          &request, 1, [] { return std::string("sharing NCCL's unique id"); }, /*bytes=*/0);
    };
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> host,
                            MpiCommunicator::Create(self, id.ToString()));
    std::shared_ptr<Communicator> checker(std::move(host));
    bootstrap.agree = [checker](const CollectiveCall& call) {
      return static_cast<MpiCommunicator&>(*checker).Agree(call);
    };
    return CreateNcclCommunicator(id.index(), std::move(bootstrap));
  }
  return MpiCommunicator::Create(shared_from_this(), id.ToString());
}

void MpiWorld::Abort(int code) {
  NoteBroken();
  std::fflush(nullptr);
  {
    PlainMutexLock lock(&MpiLock());
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::_Exit(code);
}

}  // namespace sluice::ep::ccl::internal
