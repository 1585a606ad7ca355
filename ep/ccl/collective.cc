#include "ep/ccl/collective.h"

#include "absl/strings/str_cat.h"

namespace sluice::ep::ccl {

absl::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kSend:
      return "send";
    case CollectiveKind::kRecv:
      return "recv";
  }
  return "unknown";
}

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMean:
      return "mean";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
    if (name == ReduceOpName(op)) return op;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduction '", name, "'; expected sum, mean, max or min"));
}

namespace {

bool Reduces(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter ||
         kind == CollectiveKind::kReduce;
}

}  // namespace

std::string DescribeCall(const CollectiveCall& call) {
  std::string text(CollectiveKindName(call.kind));
  if (Reduces(call.kind)) absl::StrAppend(&text, "(", ReduceOpName(call.reduce), ")");
  absl::StrAppend(&text, " of ", DataTypeName(call.dtype), call.shape.ToString());
  if (!call.label.empty()) absl::StrAppend(&text, " '", call.label, "'");
  switch (call.kind) {
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      absl::StrAppend(&text, " with root ", call.peer);
      break;
    case CollectiveKind::kSend:
      absl::StrAppend(&text, " to rank ", call.peer);
      break;
    case CollectiveKind::kRecv:
      absl::StrAppend(&text, " from rank ", call.peer);
      break;
    default:
      break;
  }
  return text;
}

}  // namespace sluice::ep::ccl
