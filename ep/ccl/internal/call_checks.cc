#include "ep/ccl/internal/call_checks.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace sluice::ep::ccl::internal {

namespace {

enum Word : int { kSequence, kKind, kReduce, kDtype, kCount, kPeer, kDims, kFirstDim };

bool HasPeer(CollectiveKind kind) {
  return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce ||
         kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv;
}

bool Reduces(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter ||
         kind == CollectiveKind::kReduce;
}

template <typename T>
void Divide(void* data, int64_t count, int size) {
  T* values = static_cast<T*>(data);
  for (int64_t i = 0; i < count; ++i) values[i] = static_cast<T>(values[i] / size);
}

}  // namespace

absl::Status ValidateCall(const CollectiveCall& call, int rank, int size) {
  if (call.count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeCall(call), ": negative element count ", call.count));
  }
  if (HasPeer(call.kind) && (call.peer < 0 || call.peer >= size)) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeCall(call), ": rank ", call.peer,
                                                   " is outside the world of ", size, " rank",
                                                   size == 1 ? "" : "s"));
  }
  if ((call.kind == CollectiveKind::kSend || call.kind == CollectiveKind::kRecv) &&
      call.peer == rank) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeCall(call), ": rank ", rank, " cannot ",
                                                   CollectiveKindName(call.kind), " to itself"));
  }
  if (Reduces(call.kind) && call.reduce == ReduceOp::kMean && call.dtype == DataType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeCall(call), ": the mean of bool values is not defined"));
  }
  return absl::OkStatus();
}

absl::Status ValidateGroup(absl::Span<const int> group, int rank, int size) {
  bool mine = false;
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] < 0 || group[i] >= size) {
      return absl::InvalidArgumentError(
          absl::StrCat("group rank ", group[i], " is outside the world of ", size));
    }
    for (size_t j = 0; j < i; ++j) {
      if (group[j] == group[i]) {
        return absl::InvalidArgumentError(absl::StrCat("group lists rank ", group[i], " twice"));
      }
    }
    mine = mine || group[i] == rank;
  }
  if (!mine) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in the group it asked for"));
  }
  return absl::OkStatus();
}

CallSignature SignatureOf(const CollectiveCall& call, int64_t sequence) {
  CallSignature s{};
  s[kSequence] = sequence;
  s[kKind] = static_cast<int64_t>(call.kind);
  s[kReduce] = Reduces(call.kind) ? static_cast<int64_t>(call.reduce) : 0;
  s[kDtype] = static_cast<int64_t>(call.dtype);
  s[kCount] = call.count;
  s[kPeer] = HasPeer(call.kind) ? call.peer : 0;
  const int dims = call.shape.rank();
  s[kDims] = dims;
  for (int i = 0; i < dims; ++i) {
    const int word = kFirstDim + (i < kMaxSignatureDims ? i : kMaxSignatureDims - 1);
    if (i < kMaxSignatureDims) {
      s[word] = call.shape.dim(i);
    } else {
      s[word] = s[word] * 1000003 + call.shape.dim(i);  // folded: compared, not printed
    }
  }
  return s;
}

std::string DescribeSignature(const CallSignature& s) {
  CollectiveCall call;
  call.kind = static_cast<CollectiveKind>(s[kKind]);
  call.reduce = static_cast<ReduceOp>(s[kReduce]);
  call.dtype = static_cast<DataType>(s[kDtype]);
  call.peer = static_cast<int>(s[kPeer]);
  std::vector<int64_t> dims;
  const int64_t rank = s[kDims];
  for (int64_t i = 0; i < rank && i < kMaxSignatureDims; ++i) dims.push_back(s[kFirstDim + i]);
  call.shape = Shape(dims);
  std::string text = DescribeCall(call);
  if (rank > kMaxSignatureDims) absl::StrAppend(&text, " (", rank, " dimensions)");
  absl::StrAppend(&text, " (call #", s[kSequence], ")");
  return text;
}

bool TransferSignaturesAgree(const CallSignature& a, int a_rank, const CallSignature& b,
                             int b_rank) {
  const auto send = static_cast<int64_t>(CollectiveKind::kSend);
  const auto recv = static_cast<int64_t>(CollectiveKind::kRecv);
  const bool ends =
      (a[kKind] == send && b[kKind] == recv) || (a[kKind] == recv && b[kKind] == send);
  if (!ends || a[kPeer] != b_rank || b[kPeer] != a_rank) return false;
  for (int w = kDtype; w < kSignatureWords; ++w) {
    if (w != kPeer && a[w] != b[w]) return false;
  }
  return true;
}

void DivideInPlace(void* data, int64_t count, DataType dtype, int size) {
  switch (dtype) {
    case DataType::kF32:
      Divide<float>(data, count, size);
      break;
    case DataType::kF64:
      Divide<double>(data, count, size);
      break;
    case DataType::kI32:
      Divide<int32_t>(data, count, size);
      break;
    case DataType::kI64:
      Divide<int64_t>(data, count, size);
      break;
    case DataType::kBool:
      break;  // refused by ValidateCall
  }
}

}  // namespace sluice::ep::ccl::internal
