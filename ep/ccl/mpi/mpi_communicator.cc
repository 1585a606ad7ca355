#include "ep/ccl/mpi/mpi_communicator.h"

#include <climits>
#include <cstring>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "ep/ccl/internal/call_checks.h"
#include "ep/ccl/mpi/mpi_calls.h"

namespace sluice::ep::ccl::internal {

namespace {

constexpr int kDataTag = 0;
constexpr int kSignatureTag = 1;

MPI_Datatype MpiTypeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return MPI_FLOAT;
    case DataType::kF64:
      return MPI_DOUBLE;
    case DataType::kI32:
      return MPI_INT32_T;
    case DataType::kI64:
      return MPI_INT64_T;
    case DataType::kBool:
      return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

// Mean is a sum divided afterwards; on bool (bytes 0 and 1) sum and max are a logical or.
MPI_Op MpiOpOf(ReduceOp op, DataType dtype) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean:
      return dtype == DataType::kBool ? MPI_MAX : MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_SUM;
}

bool IsTransfer(CollectiveKind kind) {
  return kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MpiCommunicator::Create(std::shared_ptr<MpiJob> world,
                                                                      std::string where) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request;
  SLUICE_RETURN_IF_ERROR(
      MpiCall("MPI_Comm_idup", [&] { return MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request); }));
  SLUICE_RETURN_IF_ERROR(world->Wait(
      &request, 1, [&] { return absl::StrCat("creating the communicator of ", where); },
      /*bytes=*/0));
  SLUICE_RETURN_IF_ERROR(MpiCall("MPI_Comm_set_errhandler",
                                 [&] { return MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN); }));
  const int rank = world->rank(), size = world->size();
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(std::move(world), comm, std::move(where), rank, size));
}

absl::StatusOr<std::unique_ptr<Communicator>> MpiCommunicator::Split(absl::Span<const int> group) {
  if (!broken_.ok()) return broken_;
  SLUICE_RETURN_IF_ERROR(ValidateGroup(group, rank(), size()));
  std::vector<int> ranks(group.begin(), group.end());
  // The tag tells concurrent creations on this communicator apart, and every member must
  // pass the same one: a hash of the group (a count of splits would differ between ranks
  // that belong to different groups).
  uint64_t hash = 1469598103934665603ull;
  for (int r : ranks) hash = (hash ^ static_cast<uint64_t>(r)) * 1099511628211ull;
  const int tag = static_cast<int>(hash % 32749);
  MPI_Comm comm = MPI_COMM_NULL;
  int new_rank = -1;
  SLUICE_RETURN_IF_ERROR(MpiCallBlocking("MPI_Comm_create_group", [&] {
    MPI_Group whole, part;
    int code = MPI_Comm_group(comm_, &whole);
    if (code != MPI_SUCCESS) return code;
    code = MPI_Group_incl(whole, static_cast<int>(ranks.size()), ranks.data(), &part);
    if (code == MPI_SUCCESS) code = MPI_Comm_create_group(comm_, part, tag, &comm);
    if (code == MPI_SUCCESS) code = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (code == MPI_SUCCESS) code = MPI_Comm_rank(comm, &new_rank);
    MPI_Group_free(&part);
    MPI_Group_free(&whole);
    return code;
  }));
  std::string where = absl::StrCat(where_, " ranks [", absl::StrJoin(ranks, ", "), "]");
  return std::unique_ptr<Communicator>(new MpiCommunicator(world_, comm, std::move(where), new_rank,
                                                           static_cast<int>(ranks.size())));
}

MpiCommunicator::~MpiCommunicator() {
  // A broken channel may still have requests in flight: leave it to the process's end.
  if (!broken_.ok() || world_->broken()) return;
  MpiCall("MPI_Comm_free", [&] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    return finalized ? MPI_SUCCESS : MPI_Comm_free(&comm_);
  }).IgnoreError();
}

absl::Status MpiCommunicator::Break(absl::Status status) {
  broken_ = status;
  world_->NoteBroken();
  return status;
}

absl::Status MpiCommunicator::Wait(MPI_Request* requests, int count, const CollectiveCall& call) {
  // What this rank's side moves: the buffer, times the ranks for a gather's output.
  int64_t bytes = call.count * static_cast<int64_t>(SizeOf(call.dtype));
  if (call.kind == CollectiveKind::kAllGather || call.kind == CollectiveKind::kReduceScatter) {
    bytes *= size();
  }
  absl::Status status = world_->Wait(
      requests, count, [&] { return absl::StrCat(DescribeCall(call), " on ", where_, "/ccl"); },
      bytes);
  if (!status.ok()) return Break(std::move(status));
  return absl::OkStatus();
}

absl::Status MpiCommunicator::Run(const CollectiveCall& call, Stream*) {
  if (!broken_.ok()) return broken_;
  SLUICE_RETURN_IF_ERROR(ValidateCall(call, rank(), size()));
  if (call.count > INT_MAX / (size() > 0 ? size() : 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        DescribeCall(call), ": ", call.count, " elements are more than one MPI call can move"));
  }
  if (world_->check_calls()) SLUICE_RETURN_IF_ERROR(Agree(call));
  if (!IsTransfer(call.kind)) ++collectives_;
  return Transfer(call);
}

absl::Status MpiCommunicator::Agree(const CollectiveCall& call) {
  const int64_t sequence = IsTransfer(call.kind) ? 0 : collectives_ + 1;
  const CallSignature mine = SignatureOf(call, sequence);
  if (IsTransfer(call.kind)) {
    CallSignature theirs{};
    MPI_Request requests[2];
    SLUICE_RETURN_IF_ERROR(MpiCall("MPI_Isend/MPI_Irecv", [&] {
      int code = MPI_Isend(mine.data(), kSignatureWords, MPI_INT64_T, call.peer, kSignatureTag,
                           comm_, &requests[0]);
      if (code != MPI_SUCCESS) return code;
      return MPI_Irecv(theirs.data(), kSignatureWords, MPI_INT64_T, call.peer, kSignatureTag, comm_,
                       &requests[1]);
    }));
    SLUICE_RETURN_IF_ERROR(Wait(requests, 2, call));
    if (!TransferSignaturesAgree(mine, rank(), theirs, call.peer)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank(), " of ", size(), ": ranks disagree on a transfer on ",
                       where_, "/ccl: rank ", rank(), " calls ", DescribeCall(call), "; rank ",
                       call.peer, " calls ", DescribeSignature(theirs)));
    }
    return absl::OkStatus();
  }
  // Inline for the usual few ranks: this runs on every call.
  absl::InlinedVector<int64_t, 8 * kSignatureWords> all(static_cast<size_t>(kSignatureWords) *
                                                        size());
  MPI_Request request;
  SLUICE_RETURN_IF_ERROR(MpiCall("MPI_Iallgather", [&] {
    return MPI_Iallgather(mine.data(), kSignatureWords, MPI_INT64_T, all.data(), kSignatureWords,
                          MPI_INT64_T, comm_, &request);
  }));
  SLUICE_RETURN_IF_ERROR(Wait(&request, 1, call));
  bool agree = true;
  for (int r = 0; r < size() && agree; ++r) {
    agree = std::memcmp(&all[static_cast<size_t>(r) * kSignatureWords], mine.data(),
                        sizeof(CallSignature)) == 0;
  }
  if (agree) return absl::OkStatus();
  std::vector<CallSignature> signatures(size());
  for (int r = 0; r < size(); ++r) {
    std::memcpy(signatures[r].data(), &all[static_cast<size_t>(r) * kSignatureWords],
                sizeof(CallSignature));
  }
  std::string text = absl::StrCat("rank ", rank(), " of ", size(), ": ranks disagree on ",
                                  DescribeCall(call), " on ", where_, "/ccl:");
  constexpr int kMaxListed = 8;
  for (int r = 0; r < size() && r < kMaxListed; ++r) {
    absl::StrAppend(&text, r == 0 ? " " : "; ", "rank ", r, " calls ",
                    DescribeSignature(signatures[r]));
  }
  if (size() > kMaxListed) absl::StrAppend(&text, "; ...");
  return absl::InvalidArgumentError(text);
}

absl::Status MpiCommunicator::Transfer(const CollectiveCall& call) {
  const MPI_Datatype type = MpiTypeOf(call.dtype);
  const MPI_Op op = MpiOpOf(call.reduce, call.dtype);
  const int count = static_cast<int>(call.count);
  const bool aliased = call.send == call.recv;
  const bool root = call.peer == rank();
  const size_t bytes = static_cast<size_t>(call.count) * SizeOf(call.dtype);
  MPI_Request request;
  absl::Status started;
  switch (call.kind) {
    case CollectiveKind::kAllReduce:
      started = MpiCall("MPI_Iallreduce", [&] {
        return MPI_Iallreduce(aliased ? MPI_IN_PLACE : call.send, call.recv, count, type, op, comm_,
                              &request);
      });
      break;
    case CollectiveKind::kAllGather:
      started = MpiCall("MPI_Iallgather", [&] {
        return MPI_Iallgather(call.send, count, type, call.recv, count, type, comm_, &request);
      });
      break;
    case CollectiveKind::kReduceScatter:
      started = MpiCall("MPI_Ireduce_scatter_block", [&] {
        return MPI_Ireduce_scatter_block(call.send, call.recv, count, type, op, comm_, &request);
      });
      break;
    case CollectiveKind::kBroadcast:
      if (root && !aliased && bytes > 0) std::memcpy(call.recv, call.send, bytes);
      started = MpiCall("MPI_Ibcast", [&] {
        return MPI_Ibcast(call.recv, count, type, call.peer, comm_, &request);
      });
      break;
    case CollectiveKind::kReduce:
      started = MpiCall("MPI_Ireduce", [&] {
        const void* send = root && aliased ? MPI_IN_PLACE : call.send;
        return MPI_Ireduce(send, root ? call.recv : nullptr, count, type, op, call.peer, comm_,
                           &request);
      });
      break;
    case CollectiveKind::kSend:
      started = MpiCall("MPI_Isend", [&] {
        return MPI_Isend(call.send, count, type, call.peer, kDataTag, comm_, &request);
      });
      break;
    case CollectiveKind::kRecv:
      started = MpiCall("MPI_Irecv", [&] {
        return MPI_Irecv(call.recv, count, type, call.peer, kDataTag, comm_, &request);
      });
      break;
  }
  if (!started.ok()) return Break(std::move(started));
  SLUICE_RETURN_IF_ERROR(Wait(&request, 1, call));
  if (call.kind == CollectiveKind::kReduce && !root) {
    if (bytes > 0) std::memset(call.recv, 0, bytes);
  } else if (call.reduce == ReduceOp::kMean && (call.kind == CollectiveKind::kAllReduce ||
                                                call.kind == CollectiveKind::kReduceScatter ||
                                                call.kind == CollectiveKind::kReduce)) {
    DivideInPlace(call.recv, call.count, call.dtype, size());
  }
  return absl::OkStatus();
}

}  // namespace sluice::ep::ccl::internal
