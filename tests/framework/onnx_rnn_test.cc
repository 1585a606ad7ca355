// ONNX RNN, GRU and LSTM through the importer (framework/onnx/internal/rnn_mappers.cc), run and
// checked against a reference written out as loops in double here: forward, reverse and
// bidirectional, initial states, Y_h and Y_c, GRU's linear_before_reset 0 and 1, LSTM's
// peepholes and input_forget, layout 1, clip, activations with alphas and betas, and
// sequence_lens (fed at run time, and a constant). The refusals name the node.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "framework/onnx/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/onnx_test_util.h"

namespace sluice::framework::onnx::onnx_rnn_test {
namespace {

using namespace ::sluice::framework::onnx::onnx_test;  // NOLINT(build/namespaces)

// One recurrent node and its inputs; the weights are made from `Mixed`, scaled small.
struct Case {
  std::string op = "RNN";  // RNN, GRU or LSTM
  int64_t seq = 3, batch = 2, input = 3, hidden = 4;
  std::string direction = "forward";
  bool batch_first = false;  // layout 1
  bool bias = true, initial_h = false, initial_c = false, peepholes = false;
  bool linear_before_reset = false, input_forget = false;
  float clip = 0.0f;  // 0: none
  std::vector<std::string> activations;
  std::vector<float> alphas, betas;
  std::vector<int32_t> sequence_lens;  // empty: none
  bool constant_sequence_lens = false;
  bool weights_as_inputs = false;  // W, R, B, P and the states fed, not initializers
  bool y = true, y_h = true, y_c = true;

  int64_t directions() const { return direction == "bidirectional" ? 2 : 1; }
  int64_t gates() const { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }
};

std::vector<float> Scaled(std::vector<float> v, float s) {
  for (float& x : v) x *= s;
  return v;
}

struct Data {
  std::vector<float> x, w, r, b, p, h0, c0;  // x, h0 and c0 in the case's layout
};

Data MakeData(const Case& c) {
  const int64_t nd = c.directions(), gh = c.gates() * c.hidden;
  Data d;
  d.x = Scaled(Mixed(c.seq * c.batch * c.input, 1), 0.5f);
  d.w = Scaled(Mixed(nd * gh * c.input, 2), 0.3f);
  d.r = Scaled(Mixed(nd * gh * c.hidden, 3), 0.3f);
  d.b = Scaled(Mixed(nd * 2 * gh, 4), 0.2f);
  d.p = Scaled(Mixed(nd * 3 * c.hidden, 5), 0.3f);
  d.h0 = Scaled(Mixed(nd * c.batch * c.hidden, 6), 0.4f);
  d.c0 = Scaled(Mixed(nd * c.batch * c.hidden, 7), 0.4f);
  return d;
}

double Act(const std::string& name, double alpha, double beta, double x) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "tanh") return std::tanh(x);
  if (n == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (n == "relu") return std::max(x, 0.0);
  if (n == "affine") return alpha * x + beta;
  if (n == "leakyrelu") return x >= 0 ? x : alpha * x;
  if (n == "hardsigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
  if (n == "scaledtanh") return alpha * std::tanh(beta * x);
  if (n == "elu") return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
  if (n == "softsign") return x / (1.0 + std::fabs(x));
  if (n == "softplus") return std::log1p(std::exp(x));
  if (n == "thresholdedrelu") return x > alpha ? x : 0.0;
  ADD_FAILURE() << "no reference for " << name;
  return 0.0;
}

struct Outputs {
  std::vector<float> y, y_h, y_c;  // in the case's layout
};

// The node's outputs computed with plain loops, following ONNX's equations.
Outputs Reference(const Case& c, const Data& d) {
  const int64_t nd = c.directions(), gates = c.gates(), hs = c.hidden, gh = gates * hs;
  const int64_t functions = c.op == "RNN" ? 1 : c.op == "GRU" ? 2 : 3;
  // Activations per direction with alpha and beta, consumed in order by those that take them.
  std::vector<std::string> names = c.activations;
  if (names.empty()) {
    for (int64_t k = 0; k < nd; ++k) {
      if (c.op == "RNN") names.insert(names.end(), {"Tanh"});
      if (c.op == "GRU") names.insert(names.end(), {"Sigmoid", "Tanh"});
      if (c.op == "LSTM") names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
    }
  }
  std::vector<double> alpha(names.size()), beta(names.size());
  size_t ai = 0, bi = 0;
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string n = absl::AsciiStrToLower(names[k]);
    const bool takes_alpha = n == "affine" || n == "leakyrelu" || n == "thresholdedrelu" ||
                             n == "scaledtanh" || n == "hardsigmoid" || n == "elu";
    const bool takes_beta = n == "affine" || n == "scaledtanh" || n == "hardsigmoid";
    alpha[k] = n == "leakyrelu" ? 0.01 : n == "hardsigmoid" ? 0.2 : n == "elu" ? 1.0 : 0.0;
    beta[k] = n == "hardsigmoid" ? 0.5 : 0.0;
    if (takes_alpha && ai < c.alphas.size()) alpha[k] = c.alphas[ai++];
    if (takes_beta && bi < c.betas.size()) beta[k] = c.betas[bi++];
  }
  auto clip = [&](double v) { return c.clip > 0 ? std::clamp(v, -1.0 * c.clip, 1.0 * c.clip) : v; };
  auto x_at = [&](int64_t t, int64_t b, int64_t i) {
    return c.batch_first ? d.x[(b * c.seq + t) * c.input + i]
                         : d.x[(t * c.batch + b) * c.input + i];
  };
  auto state_at = [&](const std::vector<float>& s, int64_t dir, int64_t b, int64_t j) {
    return c.batch_first ? s[(b * nd + dir) * hs + j] : s[(dir * c.batch + b) * hs + j];
  };
  std::vector<double> y(c.seq * nd * c.batch * hs, 0.0), y_h(nd * c.batch * hs),
      y_c(nd * c.batch * hs);  // layout 0
  for (int64_t dir = 0; dir < nd; ++dir) {
    const bool backwards = c.direction == "reverse" || dir == 1;
    const int64_t f0 = dir * functions;
    auto f = [&](int k, double v) {
      return Act(names[f0 + k], alpha[f0 + k], beta[f0 + k], clip(v));
    };
    auto W = [&](int64_t row, int64_t i) { return d.w[(dir * gh + row) * c.input + i]; };
    auto R = [&](int64_t row, int64_t k) { return d.r[(dir * gh + row) * hs + k]; };
    auto Wb = [&](int64_t row) { return c.bias ? d.b[dir * 2 * gh + row] : 0.0; };
    auto Rb = [&](int64_t row) { return c.bias ? d.b[dir * 2 * gh + gh + row] : 0.0; };
    auto P = [&](int64_t g, int64_t j) {
      return c.peepholes ? d.p[dir * 3 * hs + g * hs + j] : 0.0;
    };
    for (int64_t b = 0; b < c.batch; ++b) {
      std::vector<double> h(hs), cs(hs);
      for (int64_t j = 0; j < hs; ++j) {
        h[j] = c.initial_h ? state_at(d.h0, dir, b, j) : 0.0;
        cs[j] = c.initial_c ? state_at(d.c0, dir, b, j) : 0.0;
      }
      const int64_t len = c.sequence_lens.empty() ? c.seq : c.sequence_lens[b];
      for (int64_t k = 0; k < c.seq; ++k) {
        const int64_t t = backwards ? c.seq - 1 - k : k;
        if (t >= len) continue;  // Y stays 0, the state as it was
        std::vector<double> xw(gh), hr(gh);
        for (int64_t row = 0; row < gh; ++row) {
          xw[row] = Wb(row);
          for (int64_t i = 0; i < c.input; ++i) xw[row] += x_at(t, b, i) * W(row, i);
          hr[row] = Rb(row);
          for (int64_t m = 0; m < hs; ++m) hr[row] += h[m] * R(row, m);
        }
        std::vector<double> hn(hs), cn(hs);
        for (int64_t j = 0; j < hs; ++j) {
          if (c.op == "RNN") {
            hn[j] = f(0, xw[j] + hr[j]);
          } else if (c.op == "GRU") {
            const double z = f(0, xw[j] + hr[j]);
            const double r = f(0, xw[hs + j] + hr[hs + j]);
            double cand = 0.0;
            if (c.linear_before_reset) {
              cand = f(1, xw[2 * hs + j] + r * hr[2 * hs + j]);
            } else {
              double rh = Rb(2 * hs + j);
              for (int64_t m = 0; m < hs; ++m) {
                // r at unit m gates H's unit m
                const double rm = f(0, xw[hs + m] + hr[hs + m]);
                rh += rm * h[m] * R(2 * hs + j, m);
              }
              cand = f(1, xw[2 * hs + j] + rh);
            }
            hn[j] = (1.0 - z) * cand + z * h[j];
          } else {
            const double i = f(0, xw[j] + hr[j] + P(0, j) * cs[j]);
            const double fg =
                c.input_forget ? 1.0 - i : f(0, xw[2 * hs + j] + hr[2 * hs + j] + P(2, j) * cs[j]);
            const double g = f(1, xw[3 * hs + j] + hr[3 * hs + j]);
            cn[j] = fg * cs[j] + i * g;
            const double o = f(0, xw[hs + j] + hr[hs + j] + P(1, j) * cn[j]);
            hn[j] = o * f(2, cn[j]);
          }
        }
        h = hn;
        if (c.op == "LSTM") cs = cn;
        for (int64_t j = 0; j < hs; ++j) y[((t * nd + dir) * c.batch + b) * hs + j] = h[j];
      }
      for (int64_t j = 0; j < hs; ++j) {
        y_h[(dir * c.batch + b) * hs + j] = h[j];
        y_c[(dir * c.batch + b) * hs + j] = cs[j];
      }
    }
  }
  Outputs out;
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) out.y.push_back(0.0f);
  out.y_h.resize(y_h.size());
  out.y_c.resize(y_c.size());
  for (int64_t t = 0; t < c.seq; ++t) {
    for (int64_t dir = 0; dir < nd; ++dir) {
      for (int64_t b = 0; b < c.batch; ++b) {
        for (int64_t j = 0; j < hs; ++j) {
          const int64_t to = c.batch_first ? ((b * c.seq + t) * nd + dir) * hs + j
                                           : ((t * nd + dir) * c.batch + b) * hs + j;
          out.y[to] = static_cast<float>(y[((t * nd + dir) * c.batch + b) * hs + j]);
        }
      }
    }
  }
  for (int64_t dir = 0; dir < nd; ++dir) {
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t j = 0; j < hs; ++j) {
        const int64_t to = c.batch_first ? (b * nd + dir) * hs + j : (dir * c.batch + b) * hs + j;
        out.y_h[to] = static_cast<float>(y_h[(dir * c.batch + b) * hs + j]);
        out.y_c[to] = static_cast<float>(y_c[(dir * c.batch + b) * hs + j]);
      }
    }
  }
  return out;
}

Dims XDims(const Case& c) {
  return c.batch_first ? Dims{c.batch, c.seq, c.input} : Dims{c.seq, c.batch, c.input};
}
Dims StateDims(const Case& c) {
  return c.batch_first ? Dims{c.batch, c.directions(), c.hidden}
                       : Dims{c.directions(), c.batch, c.hidden};
}
Dims YDims(const Case& c) {
  return c.batch_first ? Dims{c.batch, c.seq, c.directions(), c.hidden}
                       : Dims{c.seq, c.directions(), c.batch, c.hidden};
}

std::vector<Dim> AsDims(const Dims& d) { return std::vector<Dim>(d.begin(), d.end()); }

// The model of one node; the feeds it needs go to `feeds`.
ModelBuilder Build(const Case& c, const Data& d,
                   absl::flat_hash_map<std::string, HostTensor>* feeds) {
  ModelBuilder m(14);
  const int64_t nd = c.directions(), gh = c.gates() * c.hidden;
  m.Input("X", kFloat, AsDims(XDims(c)));
  (*feeds)["X"] = F32(d.x, XDims(c));
  auto add = [&](const std::string& name, const Dims& dims, const std::vector<float>& v) {
    if (c.weights_as_inputs) {
      m.Input(name, kFloat, AsDims(dims));
      (*feeds)[name] = F32(v, dims);
    } else {
      m.Initializer(FloatTensor(name, dims, v));
    }
  };
  add("W", {nd, gh, c.input}, d.w);
  add("R", {nd, gh, c.hidden}, d.r);
  std::vector<std::string> inputs = {"X", "W", "R", "", "", "", "", ""};
  if (c.bias) {
    add("B", {nd, 2 * gh}, d.b);
    inputs[3] = "B";
  }
  if (!c.sequence_lens.empty()) {
    inputs[4] = "sequence_lens";
    const Dims dims = {c.batch};
    if (c.constant_sequence_lens) {
      ::onnx::TensorProto t;
      t.set_name("sequence_lens");
      t.set_data_type(kInt32);
      t.add_dims(c.batch);
      for (int32_t v : c.sequence_lens) t.add_int32_data(v);
      m.Initializer(t);
    } else {
      m.Input("sequence_lens", kInt32, {c.batch});
      (*feeds)["sequence_lens"] = HostTensor::FromVector(c.sequence_lens, Shape(dims));
    }
  }
  if (c.initial_h) {
    add("initial_h", StateDims(c), d.h0);
    inputs[5] = "initial_h";
  }
  if (c.initial_c) {
    add("initial_c", StateDims(c), d.c0);
    inputs[6] = "initial_c";
  }
  if (c.peepholes) {
    add("P", {nd, 3 * c.hidden}, d.p);
    inputs[7] = "P";
  }
  const size_t arity = c.op == "LSTM" ? 8 : 6;
  inputs.resize(arity);
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  std::vector<std::string> outputs = {c.y ? "Y" : "", c.y_h ? "Y_h" : ""};
  if (c.op == "LSTM" && c.y_c) outputs.push_back("Y_c");
  while (!outputs.empty() && outputs.back().empty()) outputs.pop_back();
  auto* node = m.Node(c.op, inputs, outputs, "cell");
  IntAttr(node, "hidden_size", c.hidden);
  if (c.direction != "forward") {
    NewAttr(node, "direction", ::onnx::AttributeProto::STRING)->set_s(c.direction);
  }
  if (c.batch_first) IntAttr(node, "layout", 1);
  if (c.linear_before_reset) IntAttr(node, "linear_before_reset", 1);
  if (c.input_forget) IntAttr(node, "input_forget", 1);
  if (c.clip > 0) FloatAttr(node, "clip", c.clip);
  if (!c.activations.empty()) {
    auto* attr = NewAttr(node, "activations", ::onnx::AttributeProto::STRINGS);
    for (const std::string& a : c.activations) attr->add_strings(a);
  }
  if (!c.alphas.empty()) {
    auto* attr = NewAttr(node, "activation_alpha", ::onnx::AttributeProto::FLOATS);
    for (float a : c.alphas) attr->add_floats(a);
  }
  if (!c.betas.empty()) {
    auto* attr = NewAttr(node, "activation_beta", ::onnx::AttributeProto::FLOATS);
    for (float b : c.betas) attr->add_floats(b);
  }
  if (c.y) m.Output("Y", kFloat, AsDims(YDims(c)));
  if (c.y_h) m.Output("Y_h", kFloat, AsDims(StateDims(c)));
  if (c.op == "LSTM" && c.y_c) m.Output("Y_c", kFloat, AsDims(StateDims(c)));
  return m;
}

// Imports and runs the case's node and compares every output it asks for with Reference.
void Check(const Case& c) {
  const Data d = MakeData(c);
  absl::flat_hash_map<std::string, HostTensor> feeds;
  const ModelBuilder m = Build(c, d, &feeds);
  const std::vector<HostTensor> got = ImportAndRun(m, feeds);
  const Outputs want = Reference(c, d);
  size_t next = 0;
  if (c.y) {
    ASSERT_GT(got.size(), next);
    SCOPED_TRACE("Y");
    ExpectFloats(got[next++], want.y, YDims(c), 1e-5);
  }
  if (c.y_h) {
    ASSERT_GT(got.size(), next);
    SCOPED_TRACE("Y_h");
    ExpectFloats(got[next++], want.y_h, StateDims(c), 1e-5);
  }
  if (c.op == "LSTM" && c.y_c) {
    ASSERT_GT(got.size(), next);
    SCOPED_TRACE("Y_c");
    ExpectFloats(got[next++], want.y_c, StateDims(c), 1e-5);
  }
}

TEST(OnnxRnnTest, RnnForward) {
  Case c;
  Check(c);
}

TEST(OnnxRnnTest, RnnReverseWithInitialStateNoBias) {
  Case c;
  c.direction = "reverse";
  c.initial_h = true;
  c.bias = false;
  Check(c);
}

TEST(OnnxRnnTest, RnnBidirectionalActivationsWithAlphaAndBeta) {
  Case c;
  c.direction = "bidirectional";
  c.initial_h = true;
  // LeakyRelu takes alpha 0.1; HardSigmoid the next alpha and the first beta.
  c.activations = {"LeakyRelu", "hardsigmoid"};
  c.alphas = {0.1f, 0.3f};
  c.betas = {0.4f};
  Check(c);
}

TEST(OnnxRnnTest, RnnLayoutOneWithClip) {
  Case c;
  c.batch_first = true;
  c.direction = "bidirectional";
  c.initial_h = true;
  c.clip = 0.3f;
  Check(c);
}

TEST(OnnxRnnTest, RnnOtherActivations) {
  for (const char* name : {"Relu", "Sigmoid", "Affine", "ThresholdedRelu", "ScaledTanh", "Elu",
                           "Softsign", "Softplus"}) {
    SCOPED_TRACE(name);
    Case c;
    c.activations = {name};
    c.alphas = {0.7f};
    c.betas = {0.6f};
    Check(c);
  }
}

TEST(OnnxRnnTest, GruForwardResetBeforeLinear) {
  Case c;
  c.op = "GRU";
  Check(c);
}

TEST(OnnxRnnTest, GruLinearBeforeResetBidirectional) {
  Case c;
  c.op = "GRU";
  c.linear_before_reset = true;
  c.direction = "bidirectional";
  c.initial_h = true;
  Check(c);
}

TEST(OnnxRnnTest, GruReverseLayoutOne) {
  for (bool lbr : {false, true}) {
    SCOPED_TRACE(lbr);
    Case c;
    c.op = "GRU";
    c.linear_before_reset = lbr;
    c.direction = "reverse";
    c.batch_first = true;
    c.initial_h = true;
    Check(c);
  }
}

TEST(OnnxRnnTest, GruNoBiasOnlyYh) {
  Case c;
  c.op = "GRU";
  c.linear_before_reset = true;
  c.bias = false;
  c.y = false;
  Check(c);
}

TEST(OnnxRnnTest, LstmForwardPeepholesAndInitialStates) {
  Case c;
  c.op = "LSTM";
  c.initial_h = true;
  c.initial_c = true;
  c.peepholes = true;
  Check(c);
}

TEST(OnnxRnnTest, LstmBidirectionalDefaults) {
  Case c;
  c.op = "LSTM";
  c.direction = "bidirectional";
  Check(c);
}

TEST(OnnxRnnTest, LstmReverseLayoutOneClipInputForget) {
  Case c;
  c.op = "LSTM";
  c.direction = "reverse";
  c.batch_first = true;
  c.initial_h = true;
  c.initial_c = true;
  c.peepholes = true;
  c.input_forget = true;
  c.clip = 0.4f;
  Check(c);
}

TEST(OnnxRnnTest, LstmWeightsFedAtRunTimeOnlyYc) {
  Case c;
  c.op = "LSTM";
  c.weights_as_inputs = true;
  c.initial_h = true;
  c.initial_c = true;
  c.peepholes = true;
  c.y = false;
  c.y_h = false;
  Check(c);
}

TEST(OnnxRnnTest, SequenceLensMaskEachDirection) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    SCOPED_TRACE(op);
    Case c;
    c.op = op;
    c.seq = 4;
    c.batch = 3;
    c.direction = "bidirectional";
    c.initial_h = true;
    c.initial_c = c.op == "LSTM";
    c.sequence_lens = {4, 1, 2};
    Check(c);
  }
}

TEST(OnnxRnnTest, ConstantSequenceLens) {
  for (std::vector<int32_t> lens : {std::vector<int32_t>{3, 3}, std::vector<int32_t>{2, 3}}) {
    Case c;
    c.op = "GRU";
    c.direction = "reverse";
    c.sequence_lens = lens;
    c.constant_sequence_lens = true;
    Check(c);
  }
}

TEST(OnnxRnnTest, RefusesAnActivationSluiceDoesNotCompose) {
  Case c;
  c.op = "LSTM";
  c.activations = {"Sigmoid", "Gelu", "Tanh"};
  absl::flat_hash_map<std::string, HostTensor> feeds;
  ExpectError(Import(Build(c, MakeData(c), &feeds)), absl::StatusCode::kInvalidArgument,
              {"node 'cell' (LSTM, opset 14)", "activation 'Gelu'"});
}

TEST(OnnxRnnTest, RefusesAWrongNumberOfActivations) {
  Case c;
  c.op = "GRU";
  c.activations = {"Sigmoid", "Tanh", "Tanh"};
  absl::flat_hash_map<std::string, HostTensor> feeds;
  ExpectError(Import(Build(c, MakeData(c), &feeds)), absl::StatusCode::kInvalidArgument,
              {"node 'cell' (GRU, opset 14)", "activations has 3 names"});
}

TEST(OnnxRnnTest, RefusesAConstantSequenceLengthBeyondX) {
  Case c;
  c.sequence_lens = {3, 4};
  c.constant_sequence_lens = true;
  absl::flat_hash_map<std::string, HostTensor> feeds;
  ExpectError(Import(Build(c, MakeData(c), &feeds)), absl::StatusCode::kInvalidArgument,
              {"node 'cell' (RNN, opset 14)", "sequence_lens holds 4"});
}

TEST(OnnxRnnTest, RefusesHiddenSizeOtherThanR) {
  Case c;
  c.op = "GRU";
  absl::flat_hash_map<std::string, HostTensor> feeds;
  ModelBuilder m = Build(c, MakeData(c), &feeds);
  m.graph().mutable_node(0)->mutable_attribute(0)->set_i(5);  // hidden_size
  // ONNX's shape inference would flag the outputs first; the model declares none.
  m.graph().clear_output();
  m.Output("Y", kFloat, {});
  m.Output("Y_h", kFloat, {});
  ExpectError(Import(m), absl::StatusCode::kInvalidArgument,
              {"node 'cell' (GRU, opset 14)", "hidden_size is 5"});
}

TEST(OnnxRnnTest, RefusesASequenceLongerThanTheUnrollLimit) {
  Case c;
  c.seq = 8193;
  c.batch = 1;
  c.input = 1;
  absl::flat_hash_map<std::string, HostTensor> feeds;
  ExpectError(Import(Build(c, MakeData(c), &feeds)), absl::StatusCode::kInvalidArgument,
              {"node 'cell' (RNN, opset 14)", "X has 8193 time steps", "at most 8192"});
}

TEST(OnnxRnnTest, RefusesAnUnknownDirection) {
  Case c;
  c.direction = "sideways";
  absl::flat_hash_map<std::string, HostTensor> feeds;
  ExpectError(Import(Build(c, MakeData(c), &feeds)), absl::StatusCode::kInvalidArgument,
              {"node 'cell' (RNN, opset 14)", "direction 'sideways'"});
}

}  // namespace
}  // namespace sluice::framework::onnx::onnx_rnn_test
