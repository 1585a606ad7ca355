#include "ep/ccl/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ep/ccl/internal/call_checks.h"
#include "ep/stream.h"

namespace sluice::ep::ccl::internal {

namespace {

ncclDataType_t NcclTypeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return ncclFloat32;
    case DataType::kF64:
      return ncclFloat64;
    case DataType::kI32:
      return ncclInt32;
    case DataType::kI64:
      return ncclInt64;
    case DataType::kBool:
      return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t NcclOpOf(ReduceOp op, DataType dtype) {
  switch (op) {
    case ReduceOp::kSum:
      return dtype == DataType::kBool ? ncclMax : ncclSum;
    case ReduceOp::kMean:
      return ncclAvg;  // NCCL 2.10 and later
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

absl::Status Check(ncclResult_t result, const CollectiveCall& call, absl::string_view what) {
  if (result == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(DescribeCall(call), ": ", what, " failed: ", ncclGetErrorString(result)));
}

// Thread-compatible: Run is called by the ccl stream's worker alone.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int ordinal, NcclBootstrap bootstrap)
      : comm_(comm), ordinal_(ordinal), bootstrap_(std::move(bootstrap)) {}
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }

  int rank() const override { return bootstrap_.rank; }
  int size() const override { return bootstrap_.size; }
  bool enqueues_on_stream() const override { return true; }

  absl::Status Run(const CollectiveCall& call, Stream* stream) override {
    SLUICE_RETURN_IF_ERROR(ValidateCall(call, rank(), size()));
    if (bootstrap_.agree) SLUICE_RETURN_IF_ERROR(bootstrap_.agree(call));
    auto* cuda_stream = static_cast<cudaStream_t>(stream->native_handle());
    const ncclDataType_t type = NcclTypeOf(call.dtype);
    const ncclRedOp_t op = NcclOpOf(call.reduce, call.dtype);
    const size_t count = static_cast<size_t>(call.count);
    cudaSetDevice(ordinal_);
    switch (call.kind) {
      case CollectiveKind::kAllReduce:
        return Check(ncclAllReduce(call.send, call.recv, count, type, op, comm_, cuda_stream), call,
                     "ncclAllReduce");
      case CollectiveKind::kAllGather:
        return Check(ncclAllGather(call.send, call.recv, count, type, comm_, cuda_stream), call,
                     "ncclAllGather");
      case CollectiveKind::kReduceScatter:
        return Check(ncclReduceScatter(call.send, call.recv, count, type, op, comm_, cuda_stream),
                     call, "ncclReduceScatter");
      case CollectiveKind::kBroadcast:
        return Check(
            ncclBroadcast(call.send, call.recv, count, type, call.peer, comm_, cuda_stream), call,
            "ncclBroadcast");
      case CollectiveKind::kReduce: {
        SLUICE_RETURN_IF_ERROR(
            Check(ncclReduce(call.send, call.recv, count, type, op, call.peer, comm_, cuda_stream),
                  call, "ncclReduce"));
        if (call.peer != rank() && count > 0 &&
            cudaMemsetAsync(call.recv, 0, count * SizeOf(call.dtype), cuda_stream) != cudaSuccess) {
          return absl::InternalError(absl::StrCat(DescribeCall(call), ": cudaMemsetAsync failed"));
        }
        return absl::OkStatus();
      }
      case CollectiveKind::kSend:
        return Check(ncclSend(call.send, count, type, call.peer, comm_, cuda_stream), call,
                     "ncclSend");
      case CollectiveKind::kRecv:
        return Check(ncclRecv(call.recv, count, type, call.peer, comm_, cuda_stream), call,
                     "ncclRecv");
    }
    return absl::InternalError("unknown collective");
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(absl::Span<const int>) override {
    return absl::UnimplementedError(
        "collectives over part of the world's cuda devices (a placement's sub-mesh) are not "
        "built yet for NCCL");
  }

 private:
  ncclComm_t comm_;
  const int ordinal_;
  NcclBootstrap bootstrap_;
};

}  // namespace

bool NcclBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(int ordinal,
                                                                     NcclBootstrap bootstrap) {
  ncclUniqueId id;
  if (bootstrap.rank == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess) {
      return absl::InternalError(
          absl::StrCat("ncclGetUniqueId failed: ", ncclGetErrorString(result)));
    }
  }
  SLUICE_RETURN_IF_ERROR(bootstrap.broadcast_from_rank0(&id, sizeof(id)));
  if (cudaSetDevice(ordinal) != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaSetDevice(", ordinal, ") failed"));
  }
  ncclComm_t comm;
  const ncclResult_t result = ncclCommInitRank(&comm, bootstrap.size, id, bootstrap.rank);
  if (result != ncclSuccess) {
    return absl::InternalError(absl::StrCat("ncclCommInitRank on cuda:", ordinal,
                                            " failed: ", ncclGetErrorString(result)));
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(comm, ordinal, std::move(bootstrap)));
}

}  // namespace sluice::ep::ccl::internal
