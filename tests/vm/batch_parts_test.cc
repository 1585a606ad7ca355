// A PrecomputedBatch larger than one part (PrecomputedBatch::kPartSize) is handed to the
// engine in parts while it is still being built; instructions of later parts name
// instructions of earlier parts as predecessors, some of which have retired by then. The
// engine must keep those (retired, not recycled) until the last part is in, or an edge
// would land on a reused instruction. Random batches over several streams and devices,
// resubmitted, are compared with a sequential reference and checked by the sync checker.
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/sync_checker.h"

namespace sluice::vm::batch_parts_test {
namespace {

using testing::VmHarness;

// Blob b lives on cpu compute stream b % 2; each op multiplies two blobs into a third on
// the written blob's stream, with the edges (and StreamWaits between cpu streams) the
// interpreter would give them.
struct Plan {
  std::vector<int> a, b, out;
};

Plan RandomPlan(int ops, int blobs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Plan plan;
  for (int i = 0; i < ops; ++i) {
    plan.a.push_back(static_cast<int>(rng() % blobs));
    plan.b.push_back(static_cast<int>(rng() % blobs));
    plan.out.push_back(static_cast<int>(rng() % blobs));
  }
  return plan;
}

class BatchPartsTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(BatchPartsTest, LargeBatchOverTwoCpuWorkersMatchesSequential) {
  VmOptions options;
  options.check_sync = true;
  VmHarness h(options);
  constexpr int kBlobs = 12;
  constexpr int kOps = 3 * static_cast<int>(PrecomputedBatch::kPartSize) + 17;
  Stream* streams[2] = {h.S("cpu"), h.S("cpu/compute:1")};
  std::vector<BlobRef> blobs;
  for (int b = 0; b < kBlobs; ++b) {
    blobs.push_back(h.NewF32(b % 2 == 0 ? "cpu" : "cpu/compute:1", 1, "b" + std::to_string(b)));
  }
  const Plan plan = RandomPlan(kOps, kBlobs, GetParam());

  // Edges as a dependency builder would make them: the last writer of each blob read or
  // written, the readers since it for a write, and the previous op of the same stream.
  PrecomputedBatch batch;
  std::vector<int> last_writer(kBlobs, -1);
  std::vector<std::vector<int>> readers(kBlobs);
  int last_on[2] = {-1, -1};
  std::vector<int> stream_of;
  for (int i = 0; i < kOps; ++i) {
    const int s = plan.out[i] % 2;
    std::vector<int> preds;
    for (int blob : {plan.a[i], plan.b[i]}) {
      if (last_writer[blob] >= 0) preds.push_back(last_writer[blob]);
    }
    if (last_writer[plan.out[i]] >= 0) preds.push_back(last_writer[plan.out[i]]);
    for (int r : readers[plan.out[i]]) preds.push_back(r);
    // Cross-stream predecessors go through one StreamWait each.
    std::vector<int> incoming;
    for (int p : preds) {
      if (stream_of[p] == s) {
        incoming.push_back(p);
        continue;
      }
      const int wait = batch.AddStreamWait({}, streams[stream_of[p]], streams[s]);
      stream_of.push_back(stream_of[p]);  // a StreamWait runs on its source stream
      SLUICE_ASSERT_OK(batch.AddEdge(p, wait));
      if (last_on[stream_of[p]] >= 0 && last_on[stream_of[p]] != p) {
        SLUICE_ASSERT_OK(batch.AddEdge(last_on[stream_of[p]], wait));
      }
      last_on[stream_of[p]] = wait;
      incoming.push_back(wait);
    }
    const int op = batch.AddOpCall(h.K("mul"), {blobs[plan.a[i]], blobs[plan.b[i]]},
                                   {blobs[plan.out[i]]}, nullptr, streams[s]);
    stream_of.push_back(s);
    if (last_on[s] >= 0) incoming.push_back(last_on[s]);
    for (int from : incoming) SLUICE_ASSERT_OK(batch.AddEdge(from, op));
    last_on[s] = op;
    for (int blob : {plan.a[i], plan.b[i]}) readers[blob].push_back(op);
    last_writer[plan.out[i]] = op;
    readers[plan.out[i]].clear();
  }
  ASSERT_GT(batch.size(), 2 * static_cast<int>(PrecomputedBatch::kPartSize));

  for (int run = 0; run < 4; ++run) {
    SCOPED_TRACE(run);
    std::vector<float> reference(kBlobs);
    for (int b = 0; b < kBlobs; ++b) {
      reference[b] = ((b + run) % 3 == 0) ? -1.0f : 1.0f;  // products stay +-1: exact
      SLUICE_ASSERT_OK(h.Write(blobs[b], {reference[b]}));
    }
    SLUICE_ASSERT_OK(h.vm->Sync());
    SLUICE_ASSERT_OK(batch.Submit(h.vm.get()));
    SLUICE_ASSERT_OK(h.vm->Sync());
    for (int i = 0; i < kOps; ++i) {
      reference[plan.out[i]] = reference[plan.a[i]] * reference[plan.b[i]];
    }
    for (int b = 0; b < kBlobs; ++b) {
      EXPECT_EQ(h.Read(blobs[b]).value(), std::vector<float>{reference[b]}) << "blob " << b;
    }
  }
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

INSTANTIATE_TEST_SUITE_P(Seeds, BatchPartsTest, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace sluice::vm::batch_parts_test
