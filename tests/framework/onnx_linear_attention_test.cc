// ONNX LinearAttention through the importer (framework/onnx/internal/linear_attention_mappers.cc)
// against its recurrence written out here in double: each update rule, grouped-query heads,
// a past state, decay per head and per key dimension, beta per head and shared; then the
// refusals, naming the node.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/onnx/onnx_import.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_linear_attention_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)

struct Case {
  std::string rule;
  int64_t b = 2, t = 3, hq = 4, hkv = 2, dk = 3, dv = 2;
  int64_t decay_last = 0;  // 0: no decay; hkv or hkv * dk
  int64_t beta_last = 0;   // 0: no beta; hkv or 1
  bool past = false;
};

// Y [B, T, Hq * dv] and the final state [B, Hkv, dk, dv].
void Reference(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
               const std::vector<float>& v, const std::vector<float>& past,
               const std::vector<float>& decay, const std::vector<float>& beta,
               std::vector<float>* y, std::vector<float>* state_out) {
  std::vector<double> s(static_cast<size_t>(c.b * c.hkv * c.dk * c.dv), 0.0);
  if (c.past) s.assign(past.begin(), past.end());
  y->assign(static_cast<size_t>(c.b * c.t * c.hq * c.dv), 0.0f);
  auto S = [&](int64_t n, int64_t h, int64_t i, int64_t j) -> double& {
    return s[((n * c.hkv + h) * c.dk + i) * c.dv + j];
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dk));
  for (int64_t n = 0; n < c.b; ++n) {
    for (int64_t t = 0; t < c.t; ++t) {
      for (int64_t h = 0; h < c.hkv; ++h) {
        auto K = [&](int64_t i) {
          return static_cast<double>(k[(n * c.t + t) * c.hkv * c.dk + h * c.dk + i]);
        };
        std::vector<double> vt(static_cast<size_t>(c.dv));
        for (int64_t j = 0; j < c.dv; ++j) vt[j] = v[(n * c.t + t) * c.hkv * c.dv + h * c.dv + j];
        if (c.decay_last > 0) {
          for (int64_t i = 0; i < c.dk; ++i) {
            const int64_t at = c.decay_last == c.hkv ? h : h * c.dk + i;
            const double e =
                std::exp(static_cast<double>(decay[(n * c.t + t) * c.decay_last + at]));
            for (int64_t j = 0; j < c.dv; ++j) S(n, h, i, j) *= e;
          }
        }
        if (c.beta_last > 0) {
          const double rate = beta[(n * c.t + t) * c.beta_last + (c.beta_last == 1 ? 0 : h)];
          for (int64_t j = 0; j < c.dv; ++j) {
            double retrieved = 0;
            for (int64_t i = 0; i < c.dk; ++i) retrieved += S(n, h, i, j) * K(i);
            vt[j] = rate * (vt[j] - retrieved);
          }
        }
        for (int64_t i = 0; i < c.dk; ++i) {
          for (int64_t j = 0; j < c.dv; ++j) S(n, h, i, j) += K(i) * vt[j];
        }
      }
      for (int64_t hq = 0; hq < c.hq; ++hq) {
        const int64_t h = hq / (c.hq / c.hkv);
        for (int64_t j = 0; j < c.dv; ++j) {
          double o = 0;
          for (int64_t i = 0; i < c.dk; ++i) {
            o +=
                static_cast<double>(q[(n * c.t + t) * c.hq * c.dk + hq * c.dk + i]) * S(n, h, i, j);
          }
          (*y)[(n * c.t + t) * c.hq * c.dv + hq * c.dv + j] = static_cast<float>(scale * o);
        }
      }
    }
  }
  state_out->assign(s.begin(), s.end());
}

TEST(OnnxLinearAttentionTest, EveryRuleAgainstTheRecurrence) {
  const std::vector<Case> cases = {
      {"linear", 2, 3, 4, 2, 3, 2, 0, 0, false},     {"gated", 2, 3, 4, 2, 3, 2, 2, 0, true},
      {"gated", 1, 4, 2, 2, 3, 2, 6, 0, false},      {"delta", 2, 3, 4, 2, 3, 2, 0, 2, true},
      {"gated_delta", 2, 3, 4, 2, 3, 2, 6, 1, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.rule, " decay ", c.decay_last, " beta ", c.beta_last,
                              c.past ? " past" : ""));
    const std::vector<float> q = Mixed(c.b * c.t * c.hq * c.dk, 3),
                             k = Mixed(c.b * c.t * c.hkv * c.dk, 4),
                             v = Mixed(c.b * c.t * c.hkv * c.dv, 5),
                             past = Mixed(c.b * c.hkv * c.dk * c.dv, 6);
    std::vector<float> decay = Mixed(c.b * c.t * std::max<int64_t>(c.decay_last, 1), 7);
    for (float& d : decay) d = -std::fabs(d);  // log-space decay: at most 1 once exponentiated
    std::vector<float> beta = Mixed(c.b * c.t * std::max<int64_t>(c.beta_last, 1), 8);
    for (float& r : beta) r = 1.0f / (1.0f + std::exp(-r));
    ModelBuilder m(27);
    m.Input("q", kFloat, {c.b, c.t, c.hq * c.dk});
    m.Input("k", kFloat, {c.b, c.t, c.hkv * c.dk});
    m.Input("v", kFloat, {c.b, c.t, c.hkv * c.dv});
    std::vector<std::string> inputs = {"q", "k", "v", c.past ? "past" : "", "", ""};
    absl::flat_hash_map<std::string, HostTensor> feeds = {{"q", F32(q, {c.b, c.t, c.hq * c.dk})},
                                                          {"k", F32(k, {c.b, c.t, c.hkv * c.dk})},
                                                          {"v", F32(v, {c.b, c.t, c.hkv * c.dv})}};
    if (c.past) {
      m.Input("past", kFloat, {c.b, c.hkv, c.dk, c.dv});
      feeds.emplace("past", F32(past, {c.b, c.hkv, c.dk, c.dv}));
    }
    if (c.decay_last > 0) {
      m.Input("decay", kFloat, {c.b, c.t, c.decay_last});
      inputs[4] = "decay";
      feeds.emplace("decay", F32(decay, {c.b, c.t, c.decay_last}));
    }
    if (c.beta_last > 0) {
      m.Input("beta", kFloat, {c.b, c.t, c.beta_last});
      inputs[5] = "beta";
      feeds.emplace("beta", F32(beta, {c.b, c.t, c.beta_last}));
    }
    while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
    ::onnx::NodeProto* node = m.Node("LinearAttention", inputs, {"y", "state"}, "la");
    IntAttr(node, "q_num_heads", c.hq);
    IntAttr(node, "kv_num_heads", c.hkv);
    NewAttr(node, "update_rule", ::onnx::AttributeProto::STRING)->set_s(c.rule);
    m.Output("y", kFloat, {c.b, c.t, c.hq * c.dv});
    m.Output("state", kFloat, {c.b, c.hkv, c.dk, c.dv});
    const std::vector<HostTensor> out = ImportAndRun(m, feeds);
    ASSERT_EQ(out.size(), 2u);
    std::vector<float> y, state;
    Reference(c, q, k, v, past, decay, beta, &y, &state);
    ExpectFloats(out[0], y, {c.b, c.t, c.hq * c.dv}, 1e-5);
    ExpectFloats(out[1], state, {c.b, c.hkv, c.dk, c.dv}, 1e-5);
  }
}

TEST(OnnxLinearAttentionTest, RefusalsNameTheNode) {
  auto model = [](const std::string& rule, int64_t hq) {
    ModelBuilder m(27);
    m.Input("q", kFloat, {1, 2, 6});
    m.Input("k", kFloat, {1, 2, 6});
    m.Input("v", kFloat, {1, 2, 4});
    ::onnx::NodeProto* node = m.Node("LinearAttention", {"q", "k", "v"}, {"y"}, "la");
    IntAttr(node, "q_num_heads", hq);
    IntAttr(node, "kv_num_heads", 2);
    NewAttr(node, "update_rule", ::onnx::AttributeProto::STRING)->set_s(rule);
    m.Output("y", kFloat, {1, 2, 4});
    return m;
  };
  ExpectError(Import(model("gated", 2)), absl::StatusCode::kInvalidArgument,
              {"node 'la'", "takes a decay"});
  ExpectError(Import(model("linear", 3)), absl::StatusCode::kInvalidArgument,
              {"node 'la'", "multiple of kv_num_heads"});
  ExpectError(Import(model("softmax", 2)), absl::StatusCode::kInvalidArgument,
              {"node 'la'", "'softmax'"});
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_linear_attention_test
