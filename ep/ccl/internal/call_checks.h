// What every communicator checks and finishes the same way: a call's own arguments, the
// fixed-size signature ranks exchange to agree on a call, and the division that turns a
// sum into a mean on the host.
#ifndef SLUICE_EP_CCL_INTERNAL_CALL_CHECKS_H_
#define SLUICE_EP_CCL_INTERNAL_CALL_CHECKS_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ep/ccl/collective.h"

namespace sluice::ep::ccl::internal {

// InvalidArgument naming the call: a negative count, a root or peer outside 0..size-1, a
// send or recv to this rank itself, or mean over bool.
absl::Status ValidateCall(const CollectiveCall& call, int rank, int size);

// InvalidArgument unless `group` is a non-empty list of distinct ranks in 0..size-1 that
// includes `rank`.
absl::Status ValidateGroup(absl::Span<const int> group, int rank, int size);

// A call as ranks compare it: its sequence number on the communicator, kind, reduction,
// dtype, count, root or peer, and up to kMaxDims dimensions (a longer shape's remaining
// dimensions are folded into the last word). Plain int64 words, sent as they are.
inline constexpr int kMaxSignatureDims = 6;
inline constexpr int kSignatureWords = 7 + kMaxSignatureDims;
using CallSignature = std::array<int64_t, kSignatureWords>;

CallSignature SignatureOf(const CollectiveCall& call, int64_t sequence);
// "all_reduce(sum) of f32[4, 3] (call #12)".
std::string DescribeSignature(const CallSignature& signature);
// Two ranks' signatures of one collective agree when they are equal, word for word. For
// send and recv: true when `a` and `b` are the two ends of one transfer (`a` on rank
// `a_rank`, `b` on `b_rank`).
bool TransferSignaturesAgree(const CallSignature& a, int a_rank, const CallSignature& b,
                             int b_rank);

// Divides `count` elements at `data` (host memory) by `size`: the last step of a mean.
// Integers round toward zero.
void DivideInPlace(void* data, int64_t count, DataType dtype, int size);

}  // namespace sluice::ep::ccl::internal

#endif  // SLUICE_EP_CCL_INTERNAL_CALL_CHECKS_H_
