// ONNX Attention through the importer (framework/onnx/internal/attention_mappers.cc), run and
// checked against a reference written out as loops in double here: grouped-query heads with
// a past cache and the causal frontier (offset by the past length), 3-D inputs with a float
// mask and softcap, a sliding window, every qk_matmul_output mode, a fully masked row (zeros,
// not NaN) and a per-batch nonpad_kv_seqlen. The refusals name the node.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_attention_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The attention problem in 4-D form, [B, heads, S, size] row-major.
struct Problem {
  int64_t b = 1, qh = 1, kvh = 1, sq = 1, skv = 1, past = 0, hs = 1, vs = 1;
  std::vector<float> q, k, v, past_k, past_v;
  std::vector<float> mask;  // [sq, past + skv] when not empty
  bool causal = false;
  double softcap = 0.0;
  int64_t left = -1, right = -1;
  std::vector<int64_t> nonpad;  // per batch, when not empty
};

struct Expected {
  std::vector<float> y;       // [B, qh, sq, vs]
  std::vector<float> scores;  // mode 0: [B, qh, sq, total]
  std::vector<float> biased;  // mode 2
  std::vector<float> probs;   // mode 3
};

Expected Reference(const Problem& p) {
  const int64_t total = p.past + p.skv;
  const double root = static_cast<float>(std::sqrt(1.0 / std::sqrt(static_cast<double>(p.hs))));
  auto key = [&](int64_t b, int64_t h, int64_t j, int64_t d) -> double {
    if (j < p.past) return p.past_k[((b * p.kvh + h) * p.past + j) * p.hs + d];
    return p.k[((b * p.kvh + h) * p.skv + (j - p.past)) * p.hs + d];
  };
  auto value = [&](int64_t b, int64_t h, int64_t j, int64_t d) -> double {
    if (j < p.past) return p.past_v[((b * p.kvh + h) * p.past + j) * p.vs + d];
    return p.v[((b * p.kvh + h) * p.skv + (j - p.past)) * p.vs + d];
  };
  Expected e;
  for (int64_t b = 0; b < p.b; ++b) {
    const int64_t offset = p.nonpad.empty() ? p.past : p.nonpad[b] - p.sq;
    for (int64_t h = 0; h < p.qh; ++h) {
      const int64_t kh = h / (p.qh / p.kvh);  // each kv head serves qh / kvh query heads
      for (int64_t i = 0; i < p.sq; ++i) {
        std::vector<double> s(total), biased(total);
        bool any = false;
        for (int64_t j = 0; j < total; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < p.hs; ++d) {
            dot += p.q[((b * p.qh + h) * p.sq + i) * p.hs + d] * root * key(b, kh, j, d) * root;
          }
          if (p.softcap > 0.0) dot = p.softcap * std::tanh(dot / p.softcap);
          s[j] = dot;
          double bias = p.mask.empty() ? 0.0 : p.mask[i * total + j];
          const int64_t diff = i + offset - j;
          if ((p.causal && diff < 0) || (p.left >= 0 && diff > p.left) ||
              (p.right >= 0 && -diff > p.right) || (!p.nonpad.empty() && j >= p.nonpad[b])) {
            bias = kNegInf;
          }
          any = any || bias != kNegInf;
          biased[j] = dot + bias;
        }
        const double top = *std::max_element(biased.begin(), biased.end());
        double sum = 0.0;
        std::vector<double> prob(total);
        for (int64_t j = 0; j < total; ++j) sum += prob[j] = any ? std::exp(biased[j] - top) : 0;
        for (int64_t j = 0; j < total; ++j) {
          prob[j] = any ? prob[j] / sum : 0.0;
          e.scores.push_back(static_cast<float>(s[j]));
          e.biased.push_back(static_cast<float>(biased[j]));
          e.probs.push_back(static_cast<float>(prob[j]));
        }
        for (int64_t d = 0; d < p.vs; ++d) {
          double y = 0.0;
          for (int64_t j = 0; j < total; ++j) y += prob[j] * value(b, kh, j, d);
          e.y.push_back(static_cast<float>(y));
        }
      }
    }
  }
  return e;
}

// [B, heads, S, size] -> [B, S, heads * size].
std::vector<float> MergeHeads(const std::vector<float>& x, int64_t b, int64_t heads, int64_t s,
                              int64_t size) {
  std::vector<float> out(x.size());
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < s; ++i) {
        for (int64_t d = 0; d < size; ++d) {
          out[((n * s + i) * heads + h) * size + d] = x[((n * heads + h) * s + i) * size + d];
        }
      }
    }
  }
  return out;
}

Problem Random(int64_t b, int64_t qh, int64_t kvh, int64_t sq, int64_t skv, int64_t past,
               int64_t hs, int64_t vs, int seed) {
  Problem p;
  p.b = b, p.qh = qh, p.kvh = kvh, p.sq = sq, p.skv = skv, p.past = past, p.hs = hs, p.vs = vs;
  p.q = Mixed(b * qh * sq * hs, seed);
  p.k = Mixed(b * kvh * skv * hs, seed + 1);
  p.v = Mixed(b * kvh * skv * vs, seed + 2);
  p.past_k = Mixed(b * kvh * past * hs, seed + 3);
  p.past_v = Mixed(b * kvh * past * vs, seed + 4);
  return p;
}

TEST(OnnxAttentionTest, GroupedQueryHeadsWithAPastCacheAndTheCausalFrontier) {
  Problem p = Random(2, 4, 2, 3, 2, 3, 4, 5, 11);
  p.causal = true;
  ModelBuilder m(23);
  m.Input("q", kFloat, {2, 4, 3, 4});
  m.Input("k", kFloat, {2, 2, 2, 4});
  m.Input("v", kFloat, {2, 2, 2, 5});
  m.Input("pk", kFloat, {2, 2, 3, 4});
  m.Input("pv", kFloat, {2, 2, 3, 5});
  IntAttr(
      m.Node("Attention", {"q", "k", "v", "", "pk", "pv"}, {"y", "present_k", "present_v"}, "attn"),
      "is_causal", 1);
  m.Output("y", kFloat, {2, 4, 3, 5});
  m.Output("present_k", kFloat, {2, 2, 5, 4});
  m.Output("present_v", kFloat, {2, 2, 5, 5});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"q", F32(p.q, {2, 4, 3, 4})},
                                                       {"k", F32(p.k, {2, 2, 2, 4})},
                                                       {"v", F32(p.v, {2, 2, 2, 5})},
                                                       {"pk", F32(p.past_k, {2, 2, 3, 4})},
                                                       {"pv", F32(p.past_v, {2, 2, 3, 5})}});
  ASSERT_EQ(out.size(), 3u);
  ExpectFloats(out[0], Reference(p).y, {2, 4, 3, 5}, 1e-4);
  // present_key: the past then the new keys, per batch and head.
  std::vector<float> present;
  for (int64_t bh = 0; bh < 4; ++bh) {
    present.insert(present.end(), p.past_k.begin() + bh * 12, p.past_k.begin() + bh * 12 + 12);
    present.insert(present.end(), p.k.begin() + bh * 8, p.k.begin() + bh * 8 + 8);
  }
  ExpectFloats(out[1], present, {2, 2, 5, 4}, 0.0);
}

TEST(OnnxAttentionTest, ThreeDimensionalInputsWithAFloatMaskSoftcapAndEveryQkMode) {
  Problem p = Random(1, 2, 2, 3, 4, 0, 2, 3, 21);
  p.softcap = 1.5;
  p.mask = Mixed(3 * 4, 27);
  p.mask[5] = static_cast<float>(kNegInf);
  const Expected want = Reference(p);
  for (int64_t mode : {0, 1, 2, 3}) {
    SCOPED_TRACE(mode);
    ModelBuilder m(23);
    m.Input("q", kFloat, {1, 3, 4});
    m.Input("k", kFloat, {1, 4, 4});
    m.Input("v", kFloat, {1, 4, 6});
    m.Input("mask", kFloat, {3, 4});
    ::onnx::NodeProto* node = m.Node("Attention", {"q", "k", "v", "mask"}, {"y", "", "", "qk"});
    IntAttr(node, "q_num_heads", 2);
    IntAttr(node, "kv_num_heads", 2);
    FloatAttr(node, "softcap", 1.5f);
    IntAttr(node, "qk_matmul_output_mode", mode);
    m.Output("y", kFloat, {1, 3, 6});
    m.Output("qk", kFloat, {1, 2, 3, 4});
    const std::vector<HostTensor> out =
        ImportAndRun(m, {{"q", F32(MergeHeads(p.q, 1, 2, 3, 2), {1, 3, 4})},
                         {"k", F32(MergeHeads(p.k, 1, 2, 4, 2), {1, 4, 4})},
                         {"v", F32(MergeHeads(p.v, 1, 2, 4, 3), {1, 4, 6})},
                         {"mask", F32(p.mask, {3, 4})}});
    ASSERT_EQ(out.size(), 2u);
    ExpectFloats(out[0], MergeHeads(want.y, 1, 2, 3, 3), {1, 3, 6}, 1e-4);
    const std::vector<float>& qk = mode == 2 ? want.biased : mode == 3 ? want.probs : want.scores;
    ExpectFloats(out[1], qk, {1, 2, 3, 4}, 1e-4);
  }
}

TEST(OnnxAttentionTest, SlidingWindowAndAFullyMaskedRowGivesZeros) {
  Problem p = Random(1, 1, 1, 4, 5, 0, 3, 2, 31);
  p.left = 1;
  p.right = 0;
  p.mask.assign(4 * 5, 0.0f);
  for (int64_t j = 0; j < 5; ++j) p.mask[2 * 5 + j] = static_cast<float>(kNegInf);  // row 2
  ModelBuilder m(25);
  m.Input("q", kFloat, {1, 1, 4, 3});
  m.Input("k", kFloat, {1, 1, 5, 3});
  m.Input("v", kFloat, {1, 1, 5, 2});
  m.Input("mask", kFloat, {4, 5});
  ::onnx::NodeProto* node = m.Node("Attention", {"q", "k", "v", "mask"}, {"y"});
  IntAttr(node, "left_window_size", 1);
  IntAttr(node, "right_window_size", 0);
  m.Output("y", kFloat, {1, 1, 4, 2});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"q", F32(p.q, {1, 1, 4, 3})},
                                                       {"k", F32(p.k, {1, 1, 5, 3})},
                                                       {"v", F32(p.v, {1, 1, 5, 2})},
                                                       {"mask", F32(p.mask, {4, 5})}});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> want = Reference(p).y;
  EXPECT_EQ(want[4], 0.0f);  // the masked row
  ExpectFloats(out[0], want, {1, 1, 4, 2}, 1e-4);
}

TEST(OnnxAttentionTest, NonpadKvSeqlenMasksPaddedKeysPerBatch) {
  Problem p = Random(2, 2, 1, 2, 4, 0, 3, 3, 41);
  p.causal = true;
  p.nonpad = {3, 1};  // batch 1: offset 1 - 2 = -1, so its query 0 sees no key
  ModelBuilder m(24);
  m.Input("q", kFloat, {2, 2, 2, 3});
  m.Input("k", kFloat, {2, 1, 4, 3});
  m.Input("v", kFloat, {2, 1, 4, 3});
  m.Input("n", kInt64, {2});
  IntAttr(m.Node("Attention", {"q", "k", "v", "", "", "", "n"}, {"y"}), "is_causal", 1);
  m.Output("y", kFloat, {2, 2, 2, 3});
  const std::vector<HostTensor> out = ImportAndRun(m, {{"q", F32(p.q, {2, 2, 2, 3})},
                                                       {"k", F32(p.k, {2, 1, 4, 3})},
                                                       {"v", F32(p.v, {2, 1, 4, 3})},
                                                       {"n", I64(p.nonpad, {2})}});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], Reference(p).y, {2, 2, 2, 3}, 1e-4);
}

TEST(OnnxAttentionTest, RefusalsNameTheNode) {
  auto model = [](int64_t q_heads, int64_t precision) {
    ModelBuilder m(25);
    m.Input("q", kFloat, {1, q_heads, 2, 4});
    m.Input("k", kFloat, {1, 2, 2, 4});
    m.Input("v", kFloat, {1, 2, 2, 4});
    ::onnx::NodeProto* node = m.Node("Attention", {"q", "k", "v"}, {"y"}, "attn");
    if (precision != 0) IntAttr(node, "softmax_precision", precision);
    m.Output("y", kFloat, {1, q_heads, 2, 4});
    return m;
  };
  ExpectError(Import(model(3, 0)), absl::StatusCode::kInvalidArgument,
              {"node 'attn'", "Attention", "3 heads", "multiple of K's 2"});
  ExpectError(Import(model(2, ::onnx::TensorProto::FLOAT16)), absl::StatusCode::kInvalidArgument,
              {"node 'attn'", "softmax_precision 10", "not FLOAT or DOUBLE"});
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_attention_test
