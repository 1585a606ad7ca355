// The kernel of every collective op (ops/collective_ops.cc) on every device type: it turns
// the operands into communicator calls (ep/ccl/collective.h) on the ccl stream's
// communicator. A host communicator's calls run as stream work (they complete on the
// stream's worker, and an input poisoned by an earlier failure skips them); a device
// communicator enqueues on the stream at once. An all_reduce of several tensors is one call
// over a packed buffer on the host.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "ep/ccl/collective.h"
#include "ep/ccl/communicator.h"
#include "ep/cuda/cuda_device.h"
#include "ep/device.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/op_families.h"

namespace sluice::ops::internal {
namespace {

using ep::ccl::CollectiveCall;
using ep::ccl::CollectiveKind;

// The calls one launch makes, and for a packed all_reduce the tensors to pack and unpack.
struct Plan {
  std::vector<CollectiveCall> calls;
  std::string label;  // the calls' label (CollectiveCall::label views it)
  struct Part {
    const void* in;
    void* out;
    size_t bytes;
  };
  std::vector<Part> packed;  // non-empty: calls[0] moves them packed, in place
  std::vector<int> group;    // the 'ranks' attribute: empty for the whole world
  double scale = 1.0;        // all_gather's 'scale', applied to calls[0].recv afterwards
  size_t packed_bytes = 0;
};

absl::Status RunPlan(Plan& plan, ep::Stream* stream) {
  ep::Device* device = stream->device();
  ep::ccl::Communicator* comm = device->communicator();
  if (!plan.group.empty()) {
    // Made here, in stream order, on first use: a split is collective over the group, so
    // it must not race the device's earlier collectives still running on the stream.
    absl::StatusOr<ep::ccl::Communicator*> group = device->GroupCommunicator(plan.group);
    if (!group.ok()) {
      return absl::Status(group.status().code(),
                          absl::StrCat("the group of ranks [", absl::StrJoin(plan.group, ", "),
                                       "]: ", group.status().message()));
    }
    comm = *group;
  }
  for (CollectiveCall& call : plan.calls) call.label = plan.label;
  if (plan.packed.empty()) {
    for (const CollectiveCall& call : plan.calls) SLUICE_RETURN_IF_ERROR(comm->Run(call, stream));
    if (plan.scale != 1.0) {  // host memory: Launch refuses a scale on a device communicator
      const CollectiveCall& call = plan.calls[0];
      const int64_t n = call.count * comm->size();
      if (call.dtype == DataType::kF32) {
        float* out = static_cast<float*>(call.recv);
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(out[i] * plan.scale);
      } else if (call.dtype == DataType::kF64) {
        double* out = static_cast<double*>(call.recv);
        for (int64_t i = 0; i < n; ++i) out[i] *= plan.scale;
      }
    }
    return absl::OkStatus();
  }
  std::vector<uint8_t> buffer(plan.packed_bytes);
  size_t offset = 0;
  for (const Plan::Part& part : plan.packed) {
    if (part.bytes > 0) std::memcpy(buffer.data() + offset, part.in, part.bytes);
    offset += part.bytes;
  }
  CollectiveCall call = plan.calls[0];
  call.send = buffer.data();
  call.recv = buffer.data();
  SLUICE_RETURN_IF_ERROR(comm->Run(call, stream));
  offset = 0;
  for (const Plan::Part& part : plan.packed) {
    if (part.bytes > 0) std::memcpy(part.out, buffer.data() + offset, part.bytes);
    offset += part.bytes;
  }
  return absl::OkStatus();
}

class CollectiveKernel final : public vm::OpKernel {
 public:
  CollectiveKernel(std::string op, CollectiveKind kind) : op_(std::move(op)), kind_(kind) {}
  absl::string_view name() const override { return op_; }

  absl::Status Launch(vm::KernelContext& ctx) const override {
    ep::Stream* stream = ctx.stream();
    const StreamKey& key = stream->key();
    if (key.type != StreamType::kCcl || key.index != 0) {
      return OpError(op_, absl::StrCat("runs on its device's ccl stream (", key.device.ToString(),
                                       "/ccl); it was placed on ", key.ToString()));
    }
    // A group's communicator is of the device communicator's family: it decides how the
    // calls run.
    const ep::ccl::Communicator* base = stream->device()->communicator();
    SLUICE_ASSIGN_OR_RETURN(std::vector<int> group, Group(ctx.attrs(), base->size()));
    const int size = group.empty() ? base->size() : static_cast<int>(group.size());
    SLUICE_ASSIGN_OR_RETURN(Plan plan, MakePlan(ctx, size, /*pack=*/!base->enqueues_on_stream()));
    plan.group = std::move(group);
    if (absl::StatusOr<double> scale = ctx.attrs().GetFloat("scale"); scale.ok()) {
      plan.scale = *scale;
    }
    if (base->enqueues_on_stream() && plan.scale != 1.0) {
      return OpError(op_,
                     "a 'scale' other than 1 is applied on the host; this device's "
                     "communicator runs on the device");
    }
    if (base->enqueues_on_stream()) return RunPlan(plan, stream);
    return ctx.LaunchHostWork(
        [plan = std::move(plan), stream]() mutable { return RunPlan(plan, stream); });
  }

 private:
  absl::StatusOr<std::vector<HostTensor>> Views(absl::Span<vm::Blob* const> blobs,
                                                absl::string_view role) const {
    std::vector<HostTensor> views;
    for (size_t i = 0; i < blobs.size(); ++i) {
      SLUICE_ASSIGN_OR_RETURN(HostTensor view, ViewBlob(blobs[i], role, static_cast<int>(i), op_));
      views.push_back(view);
    }
    return views;
  }

  // The 'ranks' attribute (world ranks; roots, peers and 'nranks' are then relative to
  // it), checked against the world's size; empty for the whole world.
  absl::StatusOr<std::vector<int>> Group(const vm::AttrMap& attrs, int world_size) const {
    absl::StatusOr<std::vector<int64_t>> ranks = attrs.GetInts("ranks");
    std::vector<int> group;
    if (!ranks.ok()) return group;
    for (int64_t r : *ranks) {
      if (r < 0 || r >= world_size) {
        return OpError(op_, absl::StrCat("attribute 'ranks' names rank ", r,
                                         ", outside the world of ", world_size));
      }
      group.push_back(static_cast<int>(r));
    }
    return group;
  }

  absl::Status Count(const std::vector<HostTensor>& views, size_t n, absl::string_view role) const {
    if (views.size() == n) return absl::OkStatus();
    return OpError(op_,
                   absl::StrCat("takes ", n, " ", role, n == 1 ? "" : "s", ", got ", views.size()));
  }

  // `out` must have `in`'s dtype and `factor_in` x in's elements == `factor_out` x out's.
  absl::Status Matches(const HostTensor& in, int i, const HostTensor& out, int64_t factor_in,
                       int64_t factor_out) const {
    if (in.dtype != out.dtype || in.size * factor_in != out.size * factor_out) {
      return OpError(
          op_, absl::StrCat(in.Describe("input", i), " does not fit ", out.Describe("output", i)));
    }
    return absl::OkStatus();
  }

  absl::Status CheckRanks(const vm::AttrMap& attrs, int size) const {
    SLUICE_ASSIGN_OR_RETURN(int64_t nranks, attrs.GetInt("nranks"));
    if (nranks == size) return absl::OkStatus();
    return OpError(op_, absl::StrCat("attribute 'nranks' is ", nranks, " but the world has ", size,
                                     " rank", size == 1 ? "" : "s"));
  }

  // `pack`: an all_reduce of several tensors becomes one call over a host buffer (host
  // communicators); else one call per tensor.
  absl::StatusOr<Plan> MakePlan(vm::KernelContext& ctx, int size, bool pack) const {
    SLUICE_ASSIGN_OR_RETURN(std::vector<HostTensor> in, Views(ctx.inputs(), "input"));
    SLUICE_ASSIGN_OR_RETURN(std::vector<HostTensor> out, Views(ctx.outputs(), "output"));
    const vm::AttrMap& attrs = ctx.attrs();
    Plan plan;
    CollectiveCall call;
    call.kind = kind_;
    if (attrs.GetString("reduce").ok()) {
      SLUICE_ASSIGN_OR_RETURN(std::string reduce, attrs.GetString("reduce"));
      absl::StatusOr<ep::ccl::ReduceOp> op = ep::ccl::ParseReduceOp(reduce);
      if (!op.ok()) return OpError(op_, op.status().message());
      call.reduce = *op;
    }
    const HostTensor& first = !in.empty() ? in[0] : out.at(0);
    plan.label = first.blob != nullptr ? first.blob->name() : std::string();
    call.dtype = first.dtype;
    call.shape = *first.shape;
    switch (kind_) {
      case CollectiveKind::kAllReduce: {
        if (in.empty() || in.size() != out.size()) {
          return OpError(op_, absl::StrCat("takes as many outputs as inputs (at least one); got ",
                                           in.size(), " and ", out.size()));
        }
        for (size_t i = 0; i < in.size(); ++i) {
          SLUICE_RETURN_IF_ERROR(Matches(in[i], static_cast<int>(i), out[i], 1, 1));
          if (in[i].dtype != first.dtype) {
            return OpError(op_, absl::StrCat(in[i].Describe("input", static_cast<int>(i)),
                                             " must have input 0's dtype"));
          }
        }
        if (in.size() == 1 || !pack) {
          for (size_t i = 0; i < in.size(); ++i) {
            call.send = in[i].data;
            call.recv = out[i].data;
            call.count = in[i].size;
            call.shape = *in[i].shape;
            plan.calls.push_back(call);
          }
          return plan;
        }
        int64_t total = 0;
        plan.label = absl::StrCat(in.size(), " tensors (their element counts as the shape) from ",
                                  plan.label);
        for (size_t i = 0; i < in.size(); ++i) {
          const size_t bytes = static_cast<size_t>(in[i].size) * SizeOf(in[i].dtype);
          plan.packed.push_back({in[i].data, out[i].data, bytes});
          plan.packed_bytes += bytes;
          total += in[i].size;
        }
        call.count = total;
        // The parts' element counts stand for the shape ranks compare, so that ranks
        // packing tensors of other sizes into the same total disagree.
        std::vector<int64_t> parts;
        for (const HostTensor& t : in) parts.push_back(t.size);
        call.shape = Shape(parts);
        plan.calls.push_back(call);
        return plan;
      }
      case CollectiveKind::kAllGather:
      case CollectiveKind::kReduceScatter: {
        SLUICE_RETURN_IF_ERROR(Count(in, 1, "input"));
        SLUICE_RETURN_IF_ERROR(Count(out, 1, "output"));
        SLUICE_RETURN_IF_ERROR(CheckRanks(attrs, size));
        const bool gather = kind_ == CollectiveKind::kAllGather;
        SLUICE_RETURN_IF_ERROR(Matches(in[0], 0, out[0], gather ? size : 1, gather ? 1 : size));
        call.send = in[0].data;
        call.recv = out[0].data;
        call.count = gather ? in[0].size : out[0].size;
        plan.calls.push_back(call);
        return plan;
      }
      case CollectiveKind::kBroadcast:
      case CollectiveKind::kReduce: {
        SLUICE_RETURN_IF_ERROR(Count(in, 1, "input"));
        SLUICE_RETURN_IF_ERROR(Count(out, 1, "output"));
        SLUICE_RETURN_IF_ERROR(Matches(in[0], 0, out[0], 1, 1));
        SLUICE_ASSIGN_OR_RETURN(int64_t root, attrs.GetInt("root"));
        call.peer = static_cast<int>(root);
        call.send = in[0].data;
        call.recv = out[0].data;
        call.count = in[0].size;
        plan.calls.push_back(call);
        return plan;
      }
      case CollectiveKind::kSend:
      case CollectiveKind::kRecv: {
        const bool send = kind_ == CollectiveKind::kSend;
        SLUICE_RETURN_IF_ERROR(Count(in, send ? 1 : 0, "input"));
        SLUICE_RETURN_IF_ERROR(Count(out, send ? 0 : 1, "output"));
        SLUICE_ASSIGN_OR_RETURN(int64_t peer, attrs.GetInt("peer"));
        call.peer = static_cast<int>(peer);
        call.send = send ? in[0].data : nullptr;
        call.recv = send ? nullptr : out[0].data;
        call.count = first.size;
        plan.calls.push_back(call);
        return plan;
      }
    }
    return OpError(op_, "unknown collective");
  }

  const std::string op_;
  const CollectiveKind kind_;
};

}  // namespace

absl::Status RegisterCollectiveKernels(OpRegistry* registry) {
  const std::pair<const char*, CollectiveKind> ops[] = {
      {"all_reduce", CollectiveKind::kAllReduce},
      {"all_gather", CollectiveKind::kAllGather},
      {"reduce_scatter", CollectiveKind::kReduceScatter},
      {"broadcast", CollectiveKind::kBroadcast},
      {"reduce", CollectiveKind::kReduce},
      {"send", CollectiveKind::kSend},
      {"recv", CollectiveKind::kRecv}};
  // cuda too where the provider is built (a cuda kernel exists exactly then, as for every
  // family; tests/ops/cuda checks it).
  std::vector<DeviceType> devices = {DeviceType::kCpu, DeviceType::kSim};
  if (ep::CudaProviderBuilt()) devices.push_back(DeviceType::kCuda);
  for (const auto& [op, kind] : ops) {
    auto kernel = std::make_shared<const CollectiveKernel>(op, kind);
    for (DataType dtype :
         {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64, DataType::kBool}) {
      SLUICE_RETURN_IF_ERROR(registry->RegisterKernel(op, devices, dtype, kernel));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
