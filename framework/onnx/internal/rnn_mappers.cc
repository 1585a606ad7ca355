// ONNX's recurrent ops, RNN, GRU and LSTM (opsets 7 on), as compositions of Sluice ops
// (node_table.h). Shapes are static, so the recurrence is unrolled at import, one group of ops
// per time step and direction:
//
//   XW      = X W^T + bias, for every step at once ([seq * batch, gates * hidden])
//   RNN     H = f(XW[t] + H R^T)
//   GRU     z = f(XWz[t] + H Rz^T), r = f(XWr[t] + H Rr^T)
//           h = g(XWh[t] + (r H) Rh^T + Rbh)            linear_before_reset 0
//           h = g(XWh[t] + r (H Rh^T + Rbh))            linear_before_reset 1
//           H = h + z (H - h)                           ((1 - z) h + z H)
//   LSTM    i = f(XWi[t] + H Ri^T + Pi C), f = f(XWf[t] + H Rf^T + Pf C) (1 - i with
//           input_forget), c = g(XWc[t] + H Rc^T), C = f C + i c,
//           o = f(XWo[t] + H Ro^T + Po C), H = o h(C)
//
// with ONNX's gate orders (GRU z, r, h; LSTM i, o, f, c); bias is Wb + Rb, except Rbh of a GRU
// with linear_before_reset 1, which the reset gate scales. clip bounds every activation's
// input. The reverse direction walks the steps from the last; a bidirectional node runs both
// and stacks them on Y's num_directions axis. With sequence_lens (not all seq_length), a batch
// entry's steps from its length on leave H and C as they were and give Y zeros, so that the
// reverse direction starts at the entry's last valid step, as ONNX Runtime's does.
//
// activations, activation_alpha and activation_beta follow ONNX Runtime: names in any case,
// and the alphas and betas consumed in order by the functions that take them (LeakyRelu 0.01,
// HardSigmoid 0.2 and 0.5, Elu 1 when the list runs out). Refused, naming the node: types
// other than FLOAT and DOUBLE, an activation Sluice does not compose, shapes that disagree, a
// sequence longer than kMaxSteps.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
// File-local helpers, in a namespace of their own: a unity build compiles this file with the
// other mappers.
namespace rnn_mapping {

constexpr int kX = 0, kW = 1, kR = 2, kB = 3, kSequenceLens = 4, kInitialH = 5, kInitialC = 6,
              kP = 7;

// The longest sequence unrolled: each step is up to about 25 ops per direction.
constexpr int64_t kMaxSteps = 8192;

enum class Cell { kRnn, kGru, kLstm };

struct Activation {
  std::string name;  // lower case
  double alpha = 0.0;
  double beta = 0.0;
};

// The node's attributes and static sizes, read and checked once.
struct RnnSpec {
  Cell cell = Cell::kRnn;
  int64_t gates = 1;         // gates per direction: RNN 1, GRU 3, LSTM 4
  int64_t functions = 1;     // activations per direction: RNN 1, GRU 2, LSTM 3
  int64_t directions = 1;    // 2 when bidirectional
  bool reverse = false;      // direction "reverse" (one direction, walked backwards)
  bool batch_first = false;  // layout 1
  bool linear_before_reset = false;
  bool input_forget = false;
  std::optional<double> clip;
  std::vector<Activation> activations;  // functions per direction, forward first
  DataType dtype = DataType::kF32;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
};

std::vector<int64_t> DimsOf(const Value& x) {
  const Shape shape = x.var().shape();
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

std::string DimsText(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// The value of input `i` (`what` names it), checked to hold `dtype` and `dims`.
absl::StatusOr<Value> CheckedInput(NodeContext& ctx, int i, absl::string_view what, DataType dtype,
                                   const std::vector<int64_t>& dims) {
  SLUICE_ASSIGN_OR_RETURN(Value v, ctx.Input(i));
  if (v.var().dtype() != dtype) {
    return ctx.Error(
        absl::StrCat(what, " is ", DataTypeName(v.var().dtype()), "; X is ", DataTypeName(dtype)));
  }
  if (DimsOf(v) != dims) {
    return ctx.Error(
        absl::StrCat(what, " has shape ", DimsText(DimsOf(v)), "; expected ", DimsText(dims)));
  }
  return v;
}

struct ActivationKind {
  absl::string_view name;  // lower case
  bool takes_alpha;
  bool takes_beta;
  double default_alpha;
  double default_beta;
};
constexpr ActivationKind kActivationKinds[] = {
    {"relu", false, false, 0.0, 0.0},      {"tanh", false, false, 0.0, 0.0},
    {"sigmoid", false, false, 0.0, 0.0},   {"affine", true, true, 0.0, 0.0},
    {"leakyrelu", true, false, 0.01, 0.0}, {"thresholdedrelu", true, false, 0.0, 0.0},
    {"scaledtanh", true, true, 0.0, 0.0},  {"hardsigmoid", true, true, 0.2, 0.5},
    {"elu", true, false, 1.0, 0.0},        {"softsign", false, false, 0.0, 0.0},
    {"softplus", false, false, 0.0, 0.0},
};

// The FLOATS attribute `name`, empty when absent.
absl::StatusOr<std::vector<double>> FloatsAttr(const NodeContext& ctx, absl::string_view name) {
  std::vector<double> values;
  const ::onnx::AttributeProto* attr = ctx.FindAttr(name);
  if (attr == nullptr) return values;
  if (attr->type() != ::onnx::AttributeProto::FLOATS) {
    return ctx.Error(absl::StrCat("attribute ", name, " is not FLOATS"));
  }
  for (float f : attr->floats()) values.push_back(f);
  return values;
}

// The activations of every direction (spec.functions per direction), with their alphas and
// betas.
absl::StatusOr<std::vector<Activation>> ReadActivations(const NodeContext& ctx,
                                                        const RnnSpec& spec) {
  std::vector<std::string> names;
  if (const ::onnx::AttributeProto* attr = ctx.FindAttr("activations")) {
    if (attr->type() != ::onnx::AttributeProto::STRINGS) {
      return ctx.Error("attribute activations is not STRINGS");
    }
    names.assign(attr->strings().begin(), attr->strings().end());
    // One direction's list for a bidirectional node serves both (as ONNX Runtime reads it).
    if (spec.directions == 2 && static_cast<int64_t>(names.size()) == spec.functions) {
      const std::vector<std::string> once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    if (static_cast<int64_t>(names.size()) != spec.functions * spec.directions) {
      return ctx.Error(absl::StrCat("attribute activations has ", names.size(), " names; ",
                                    ctx.node().op_type(), " with ", spec.directions,
                                    " direction(s) takes ", spec.functions * spec.directions));
    }
  } else {
    const std::vector<std::string> defaults =
        spec.cell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
        : spec.cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                  : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < spec.directions; ++d) {
      names.insert(names.end(), defaults.begin(), defaults.end());
    }
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<double> alphas, FloatsAttr(ctx, "activation_alpha"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<double> betas, FloatsAttr(ctx, "activation_beta"));
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const std::string lower = absl::AsciiStrToLower(name);
    const ActivationKind* kind = nullptr;
    for (const ActivationKind& k : kActivationKinds) {
      if (k.name == lower) kind = &k;
    }
    if (kind == nullptr) {
      return ctx.Error(
          absl::StrCat("activation '", name,
                       "' is not one Sluice composes (Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
                       "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)"));
    }
    Activation a{lower, kind->default_alpha, kind->default_beta};
    if (kind->takes_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (kind->takes_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    out.push_back(std::move(a));
  }
  return out;
}

absl::StatusOr<RnnSpec> ReadSpec(NodeContext& ctx, Cell cell) {
  RnnSpec spec;
  spec.cell = cell;
  switch (cell) {
    case Cell::kRnn:
      SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"activation_alpha", "activation_beta", "activations",
                                            "clip", "direction", "hidden_size", "layout"}));
      break;
    case Cell::kGru: {
      spec.gates = 3;
      spec.functions = 2;
      SLUICE_RETURN_IF_ERROR(
          ctx.OnlyAttrs({"activation_alpha", "activation_beta", "activations", "clip", "direction",
                         "hidden_size", "layout", "linear_before_reset"}));
      SLUICE_ASSIGN_OR_RETURN(spec.linear_before_reset, ctx.FlagAttr("linear_before_reset", false));
      break;
    }
    case Cell::kLstm: {
      spec.gates = 4;
      spec.functions = 3;
      SLUICE_RETURN_IF_ERROR(
          ctx.OnlyAttrs({"activation_alpha", "activation_beta", "activations", "clip", "direction",
                         "hidden_size", "layout", "input_forget"}));
      SLUICE_ASSIGN_OR_RETURN(spec.input_forget, ctx.FlagAttr("input_forget", false));
      break;
    }
  }
  SLUICE_ASSIGN_OR_RETURN(std::string direction, ctx.StringAttr("direction", "forward"));
  if (direction == "bidirectional") {
    spec.directions = 2;
  } else if (direction == "reverse") {
    spec.reverse = true;
  } else if (direction != "forward") {
    return ctx.Error(
        absl::StrCat("direction '", direction, "' is not 'forward', 'reverse' or 'bidirectional'"));
  }
  SLUICE_ASSIGN_OR_RETURN(spec.batch_first, ctx.FlagAttr("layout", false));
  if (ctx.HasAttr("clip")) {
    SLUICE_ASSIGN_OR_RETURN(double clip, ctx.FloatAttr("clip", 0.0));
    if (!(clip > 0.0)) return ctx.Error(absl::StrCat("clip is ", clip, "; it must be positive"));
    spec.clip = clip;
  }
  SLUICE_ASSIGN_OR_RETURN(spec.activations, ReadActivations(ctx, spec));
  if (ctx.num_outputs() > (cell == Cell::kLstm ? 3 : 2)) {
    return ctx.Error(absl::StrCat(ctx.node().op_type(), " has ", cell == Cell::kLstm ? 3 : 2,
                                  " outputs; the node names ", ctx.num_outputs()));
  }

  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(kX));
  SLUICE_ASSIGN_OR_RETURN(Value r, ctx.Input(kR));
  spec.dtype = x.var().dtype();
  if (spec.dtype != DataType::kF32 && spec.dtype != DataType::kF64) {
    return ctx.Error(absl::StrCat("X is ", DataTypeName(spec.dtype), "; FLOAT and DOUBLE only"));
  }
  const std::vector<int64_t> xd = DimsOf(x);
  const std::vector<int64_t> rd = DimsOf(r);
  if (xd.size() != 3) return ctx.Error(absl::StrCat("X must be 3-D; it is ", DimsText(xd)));
  if (rd.size() != 3) return ctx.Error(absl::StrCat("R must be 3-D; it is ", DimsText(rd)));
  spec.seq = spec.batch_first ? xd[1] : xd[0];
  spec.batch = spec.batch_first ? xd[0] : xd[1];
  spec.input = xd[2];
  spec.hidden = rd[2];
  SLUICE_ASSIGN_OR_RETURN(int64_t hidden_size, ctx.IntAttr("hidden_size", spec.hidden));
  if (hidden_size != spec.hidden) {
    return ctx.Error(
        absl::StrCat("hidden_size is ", hidden_size, "; R's last dimension is ", spec.hidden));
  }
  if (spec.seq <= 0 || spec.batch <= 0 || spec.input <= 0 || spec.hidden <= 0) {
    return ctx.Error(absl::StrCat("X ", DimsText(xd), " and R ", DimsText(rd),
                                  " leave no time step, batch entry, input or hidden unit"));
  }
  if (spec.seq > kMaxSteps) {
    return ctx.Error(
        absl::StrCat("X has ", spec.seq, " time steps; the importer unrolls at most ", kMaxSteps));
  }
  // R's rows are checked by division first: the products below then cannot overflow (R's
  // element count, gates * hidden^2 at least, fits).
  if (rd[1] % spec.gates != 0 || rd[1] / spec.gates != spec.hidden) {
    return ctx.Error(absl::StrCat("R has shape ", DimsText(rd), "; ", ctx.node().op_type(),
                                  " needs ", spec.gates, " * hidden_size rows"));
  }
  return spec;
}

// Input `i` ([directions, ...] in layout 0, [batch, directions, hidden] for the states in
// layout 1) split into one value per direction, each reshaped to `dims`.
absl::StatusOr<std::vector<Value>> PerDirection(const NodeContext& ctx, const RnnSpec& spec,
                                                const Value& v, bool batch_first_state,
                                                const std::vector<int64_t>& dims) {
  Value in = v;
  if (batch_first_state) {
    SLUICE_ASSIGN_OR_RETURN(in, Built(ctx, fn::Transpose(v, {1, 0, 2})));
  }
  std::vector<Value> parts = {in};
  if (spec.directions > 1) {
    SLUICE_ASSIGN_OR_RETURN(parts, Built(ctx, fn::Split(in, spec.directions, 0)));
  }
  for (Value& part : parts) {
    SLUICE_ASSIGN_OR_RETURN(part, Built(ctx, fn::Reshape(part, dims)));
  }
  return parts;
}

// f(x) for one of the activations, its input clipped first when the node has clip.
absl::StatusOr<Value> Activate(const NodeContext& ctx, const RnnSpec& spec, const Activation& a,
                               const Value& in) {
  Value x = in;
  if (spec.clip.has_value()) {
    SLUICE_ASSIGN_OR_RETURN(x, Built(ctx, fn::Clip(x, -*spec.clip, *spec.clip)));
  }
  const DataType dtype = spec.dtype;
  if (a.name == "relu") return Built(ctx, fn::Relu(x));
  if (a.name == "tanh") return Built(ctx, fn::Tanh(x));
  if (a.name == "sigmoid") return Built(ctx, fn::Sigmoid(x));
  if (a.name == "affine") return Built(ctx, fn::Scale(x, a.alpha, a.beta));
  if (a.name == "leakyrelu") {  // relu(x) - alpha relu(-x)
    SLUICE_ASSIGN_OR_RETURN(Value neg, Built(ctx, fn::Neg(x)));
    SLUICE_ASSIGN_OR_RETURN(Value neg_part, Built(ctx, fn::Relu(neg)));
    SLUICE_ASSIGN_OR_RETURN(Value scaled, Built(ctx, fn::Scale(neg_part, -a.alpha)));
    SLUICE_ASSIGN_OR_RETURN(Value pos_part, Built(ctx, fn::Relu(x)));
    return Built(ctx, fn::Add(pos_part, scaled));
  }
  if (a.name == "thresholdedrelu") {  // x where x > alpha, else 0
    SLUICE_ASSIGN_OR_RETURN(Value threshold, ScalarConstant(ctx, a.alpha, dtype));
    SLUICE_ASSIGN_OR_RETURN(Value above, Built(ctx, fn::GreaterThan(x, threshold)));
    SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, dtype));
    return Built(ctx, fn::Where(above, x, zero));
  }
  if (a.name == "scaledtanh") {  // alpha tanh(beta x)
    SLUICE_ASSIGN_OR_RETURN(Value scaled, Built(ctx, fn::Scale(x, a.beta)));
    SLUICE_ASSIGN_OR_RETURN(Value t, Built(ctx, fn::Tanh(scaled)));
    return Built(ctx, fn::Scale(t, a.alpha));
  }
  if (a.name == "hardsigmoid") {  // clip(alpha x + beta, 0, 1)
    SLUICE_ASSIGN_OR_RETURN(Value linear, Built(ctx, fn::Scale(x, a.alpha, a.beta)));
    return Built(ctx, fn::Clip(linear, 0.0, 1.0));
  }
  if (a.name == "elu") {  // relu(x) + alpha (min(exp(x), 1) - 1)
    SLUICE_ASSIGN_OR_RETURN(Value e, Built(ctx, fn::Exp(x)));
    SLUICE_ASSIGN_OR_RETURN(Value one, ScalarConstant(ctx, 1.0, dtype));
    SLUICE_ASSIGN_OR_RETURN(Value capped, Built(ctx, fn::Minimum(e, one)));
    SLUICE_ASSIGN_OR_RETURN(Value neg_part, Built(ctx, fn::Scale(capped, a.alpha, -a.alpha)));
    SLUICE_ASSIGN_OR_RETURN(Value relu, Built(ctx, fn::Relu(x)));
    return Built(ctx, fn::Add(relu, neg_part));
  }
  if (a.name == "softsign") {  // x / (1 + |x|)
    SLUICE_ASSIGN_OR_RETURN(Value abs, Built(ctx, fn::Abs(x)));
    SLUICE_ASSIGN_OR_RETURN(Value denominator, Built(ctx, fn::Scale(abs, 1.0, 1.0)));
    return Built(ctx, fn::Div(x, denominator));
  }
  return StableSoftplus(ctx, x);  // softplus
}

// One direction's weights, [rows, cols] each; the optional ones absent when the node has none.
struct DirectionWeights {
  Value w;                         // [gates * hidden, input]
  Value r;                         // [gates * hidden, hidden]
  std::optional<Value> r_zr, r_h;  // R's z and r rows, and its h rows: GRU without
                                   // linear_before_reset only
  std::optional<Value> xw_bias;    // [gates * hidden]: Wb + Rb (GRU linear_before_reset: no Rbh)
  std::optional<Value> rbh;        // [hidden]: GRU linear_before_reset only
  std::optional<Value> p_i, p_o, p_f;  // [hidden]: LSTM peepholes
};

// The states a step reads and writes; c only for an LSTM.
struct State {
  Value h;
  std::optional<Value> c;
};

// One step of the cell: the new state from the old one and this step's XW row block.
absl::StatusOr<State> Step(const NodeContext& ctx, const RnnSpec& spec, const DirectionWeights& w,
                           const Activation* act, const Value& xw, const State& prev) {
  if (spec.cell == Cell::kRnn) {
    SLUICE_ASSIGN_OR_RETURN(Value hr, Built(ctx, fn::Matmul(prev.h, w.r, false, true)));
    SLUICE_ASSIGN_OR_RETURN(Value sum, Built(ctx, fn::Add(xw, hr)));
    SLUICE_ASSIGN_OR_RETURN(Value h, Activate(ctx, spec, act[0], sum));
    return State{h, std::nullopt};
  }
  if (spec.cell == Cell::kGru) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<Value> x, Built(ctx, fn::Split(xw, 3, 1)));
    Value hz = prev.h, hr = prev.h, candidate_in = prev.h;
    if (spec.linear_before_reset) {
      SLUICE_ASSIGN_OR_RETURN(Value all, Built(ctx, fn::Matmul(prev.h, w.r, false, true)));
      SLUICE_ASSIGN_OR_RETURN(std::vector<Value> parts, Built(ctx, fn::Split(all, 3, 1)));
      hz = parts[0];
      hr = parts[1];
      candidate_in = parts[2];
      if (w.rbh.has_value()) {
        SLUICE_ASSIGN_OR_RETURN(candidate_in, Built(ctx, fn::Add(candidate_in, *w.rbh)));
      }
    } else {
      SLUICE_ASSIGN_OR_RETURN(Value zr, Built(ctx, fn::Matmul(prev.h, *w.r_zr, false, true)));
      SLUICE_ASSIGN_OR_RETURN(std::vector<Value> parts, Built(ctx, fn::Split(zr, 2, 1)));
      hz = parts[0];
      hr = parts[1];
    }
    SLUICE_ASSIGN_OR_RETURN(Value z_in, Built(ctx, fn::Add(x[0], hz)));
    SLUICE_ASSIGN_OR_RETURN(Value z, Activate(ctx, spec, act[0], z_in));
    SLUICE_ASSIGN_OR_RETURN(Value r_in, Built(ctx, fn::Add(x[1], hr)));
    SLUICE_ASSIGN_OR_RETURN(Value r, Activate(ctx, spec, act[0], r_in));
    Value h_in = x[2];
    if (spec.linear_before_reset) {
      SLUICE_ASSIGN_OR_RETURN(Value gated, Built(ctx, fn::Mul(r, candidate_in)));
      SLUICE_ASSIGN_OR_RETURN(h_in, Built(ctx, fn::Add(x[2], gated)));
    } else {
      SLUICE_ASSIGN_OR_RETURN(Value reset, Built(ctx, fn::Mul(r, prev.h)));
      SLUICE_ASSIGN_OR_RETURN(Value rh, Built(ctx, fn::Matmul(reset, *w.r_h, false, true)));
      SLUICE_ASSIGN_OR_RETURN(h_in, Built(ctx, fn::Add(x[2], rh)));
    }
    SLUICE_ASSIGN_OR_RETURN(Value h_new, Activate(ctx, spec, act[1], h_in));
    SLUICE_ASSIGN_OR_RETURN(Value diff, Built(ctx, fn::Sub(prev.h, h_new)));
    SLUICE_ASSIGN_OR_RETURN(Value kept, Built(ctx, fn::Mul(z, diff)));
    SLUICE_ASSIGN_OR_RETURN(Value h, Built(ctx, fn::Add(h_new, kept)));
    return State{h, std::nullopt};
  }
  // LSTM: gates i, o, f, c.
  SLUICE_ASSIGN_OR_RETURN(Value hr, Built(ctx, fn::Matmul(prev.h, w.r, false, true)));
  SLUICE_ASSIGN_OR_RETURN(Value sum, Built(ctx, fn::Add(xw, hr)));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> g, Built(ctx, fn::Split(sum, 4, 1)));
  const Value& c_prev = *prev.c;
  Value i_in = g[0], o_in = g[1], f_in = g[2];
  if (w.p_i.has_value()) {
    SLUICE_ASSIGN_OR_RETURN(Value pi, Built(ctx, fn::Mul(*w.p_i, c_prev)));
    SLUICE_ASSIGN_OR_RETURN(i_in, Built(ctx, fn::Add(i_in, pi)));
    SLUICE_ASSIGN_OR_RETURN(Value pf, Built(ctx, fn::Mul(*w.p_f, c_prev)));
    SLUICE_ASSIGN_OR_RETURN(f_in, Built(ctx, fn::Add(f_in, pf)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value i, Activate(ctx, spec, act[0], i_in));
  Value f = i;
  if (spec.input_forget) {
    SLUICE_ASSIGN_OR_RETURN(f, Built(ctx, fn::Scale(i, -1.0, 1.0)));
  } else {
    SLUICE_ASSIGN_OR_RETURN(f, Activate(ctx, spec, act[0], f_in));
  }
  SLUICE_ASSIGN_OR_RETURN(Value cell, Activate(ctx, spec, act[1], g[3]));
  SLUICE_ASSIGN_OR_RETURN(Value forgotten, Built(ctx, fn::Mul(f, c_prev)));
  SLUICE_ASSIGN_OR_RETURN(Value written, Built(ctx, fn::Mul(i, cell)));
  SLUICE_ASSIGN_OR_RETURN(Value c, Built(ctx, fn::Add(forgotten, written)));
  if (w.p_o.has_value()) {
    SLUICE_ASSIGN_OR_RETURN(Value po, Built(ctx, fn::Mul(*w.p_o, c)));
    SLUICE_ASSIGN_OR_RETURN(o_in, Built(ctx, fn::Add(o_in, po)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value o, Activate(ctx, spec, act[0], o_in));
  SLUICE_ASSIGN_OR_RETURN(Value hc, Activate(ctx, spec, act[2], c));
  SLUICE_ASSIGN_OR_RETURN(Value h, Built(ctx, fn::Mul(o, hc)));
  return State{h, c};
}

// One direction's outputs: Y's rows in time order ([batch, hidden] each) and the last state.
struct DirectionOutputs {
  std::vector<Value> ys;
  State last;
};

// Runs direction d (walked backwards when `backwards`) over x ([seq * batch, input]).
// `masks[t]`, when given, holds [batch, 1] booleans: whether step t lies within each entry's
// sequence length.
absl::StatusOr<DirectionOutputs> RunDirection(const NodeContext& ctx, const RnnSpec& spec,
                                              const DirectionWeights& w, const Activation* act,
                                              const Value& x, State state, bool backwards,
                                              const std::vector<Value>& masks) {
  SLUICE_ASSIGN_OR_RETURN(Value xw, Built(ctx, fn::Matmul(x, w.w, false, true)));
  if (w.xw_bias.has_value()) {
    SLUICE_ASSIGN_OR_RETURN(xw, Built(ctx, fn::Add(xw, *w.xw_bias)));
  }
  std::vector<Value> rows = {xw};
  if (spec.seq > 1) {
    SLUICE_ASSIGN_OR_RETURN(rows, Built(ctx, fn::Split(xw, spec.seq, 0)));
  }
  std::optional<Value> zero;
  if (!masks.empty()) {
    SLUICE_ASSIGN_OR_RETURN(zero, ScalarConstant(ctx, 0.0, spec.dtype));
  }
  std::vector<Value> ys(spec.seq, xw);
  for (int64_t k = 0; k < spec.seq; ++k) {
    const int64_t t = backwards ? spec.seq - 1 - k : k;
    SLUICE_ASSIGN_OR_RETURN(State next, Step(ctx, spec, w, act, rows[t], state));
    Value y = next.h;
    if (!masks.empty()) {
      SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Where(masks[t], next.h, *zero)));
      SLUICE_ASSIGN_OR_RETURN(next.h, Built(ctx, fn::Where(masks[t], next.h, state.h)));
      if (next.c.has_value()) {
        SLUICE_ASSIGN_OR_RETURN(next.c, Built(ctx, fn::Where(masks[t], *next.c, *state.c)));
      }
    }
    ys[t] = y;
    state = std::move(next);
  }
  return DirectionOutputs{std::move(ys), std::move(state)};
}

// Per step, whether it lies within each batch entry's length ([batch, 1] booleans); empty when
// every entry runs the whole sequence (no sequence_lens, or a constant one of seq_length only).
absl::StatusOr<std::vector<Value>> SequenceMasks(NodeContext& ctx, const RnnSpec& spec) {
  std::vector<Value> masks;
  if (!ctx.HasInput(kSequenceLens)) return masks;
  if (ctx.state().Constant(ctx.node().input(kSequenceLens)) != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> lens,
                            ctx.ConstantInts(kSequenceLens, "sequence_lens"));
    bool full = true;
    for (int64_t len : lens) {
      if (len < 0 || len > spec.seq) {
        return ctx.Error(
            absl::StrCat("sequence_lens holds ", len, "; X has ", spec.seq, " time steps"));
      }
      full = full && len == spec.seq;
    }
    if (full) return masks;
  }
  SLUICE_ASSIGN_OR_RETURN(Value lens, ctx.Input(kSequenceLens));
  const DataType dtype = lens.var().dtype();
  if ((dtype != DataType::kI32 && dtype != DataType::kI64) ||
      DimsOf(lens) != std::vector<int64_t>{spec.batch}) {
    return ctx.Error(absl::StrCat("sequence_lens is ", DataTypeName(dtype), " ",
                                  DimsText(DimsOf(lens)), "; expected INT32 [", spec.batch, "]"));
  }
  SLUICE_ASSIGN_OR_RETURN(Value column, Built(ctx, fn::Reshape(lens, {spec.batch, 1})));
  for (int64_t t = 0; t < spec.seq; ++t) {
    SLUICE_ASSIGN_OR_RETURN(Value step, ScalarConstant(ctx, static_cast<double>(t), dtype));
    SLUICE_ASSIGN_OR_RETURN(Value mask, Built(ctx, fn::LessThan(step, column)));
    masks.push_back(std::move(mask));
  }
  return masks;
}

// Direction d's weights from W, R, B and P.
absl::StatusOr<std::vector<DirectionWeights>> ReadWeights(NodeContext& ctx, const RnnSpec& spec) {
  const int64_t nd = spec.directions, gh = spec.gates * spec.hidden, hidden = spec.hidden;
  SLUICE_ASSIGN_OR_RETURN(Value w_all,
                          CheckedInput(ctx, kW, "W", spec.dtype, {nd, gh, spec.input}));
  SLUICE_ASSIGN_OR_RETURN(Value r_all, CheckedInput(ctx, kR, "R", spec.dtype, {nd, gh, hidden}));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> ws,
                          PerDirection(ctx, spec, w_all, false, {gh, spec.input}));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> rs,
                          PerDirection(ctx, spec, r_all, false, {gh, hidden}));
  std::vector<DirectionWeights> weights;
  for (int64_t d = 0; d < nd; ++d) {
    DirectionWeights dw{ws[d], rs[d]};
    if (spec.cell == Cell::kGru && !spec.linear_before_reset) {
      SLUICE_ASSIGN_OR_RETURN(dw.r_zr, Built(ctx, fn::Slice(rs[d], {0}, {2 * hidden}, {0})));
      SLUICE_ASSIGN_OR_RETURN(dw.r_h,
                              Built(ctx, fn::Slice(rs[d], {2 * hidden}, {3 * hidden}, {0})));
    }
    weights.push_back(std::move(dw));
  }
  if (ctx.HasInput(kB)) {
    SLUICE_ASSIGN_OR_RETURN(Value b_all, CheckedInput(ctx, kB, "B", spec.dtype, {nd, 2 * gh}));
    SLUICE_ASSIGN_OR_RETURN(std::vector<Value> bs, PerDirection(ctx, spec, b_all, false, {2 * gh}));
    for (int64_t d = 0; d < nd; ++d) {
      SLUICE_ASSIGN_OR_RETURN(std::vector<Value> wb_rb, Built(ctx, fn::Split(bs[d], 2, 0)));
      Value rb = wb_rb[1];
      if (spec.cell == Cell::kGru && spec.linear_before_reset) {
        // Rbh joins H Rh^T under the reset gate; the rest of Rb adds to XW.
        SLUICE_ASSIGN_OR_RETURN(weights[d].rbh,
                                Built(ctx, fn::Slice(rb, {2 * hidden}, {3 * hidden}, {0})));
        SLUICE_ASSIGN_OR_RETURN(Value rb_zr, Built(ctx, fn::Slice(rb, {0}, {2 * hidden}, {0})));
        SLUICE_ASSIGN_OR_RETURN(Value none,
                                Built(ctx, fn::FillConstant(Shape({hidden}), 0.0, spec.dtype)));
        SLUICE_ASSIGN_OR_RETURN(rb, Built(ctx, fn::Concat({rb_zr, none}, 0)));
      }
      SLUICE_ASSIGN_OR_RETURN(weights[d].xw_bias, Built(ctx, fn::Add(wb_rb[0], rb)));
    }
  }
  if (spec.cell == Cell::kLstm && ctx.HasInput(kP)) {
    SLUICE_ASSIGN_OR_RETURN(Value p_all, CheckedInput(ctx, kP, "P", spec.dtype, {nd, 3 * hidden}));
    SLUICE_ASSIGN_OR_RETURN(std::vector<Value> ps,
                            PerDirection(ctx, spec, p_all, false, {3 * hidden}));
    for (int64_t d = 0; d < nd; ++d) {
      SLUICE_ASSIGN_OR_RETURN(std::vector<Value> iof, Built(ctx, fn::Split(ps[d], 3, 0)));
      weights[d].p_i = iof[0];
      weights[d].p_o = iof[1];
      weights[d].p_f = iof[2];
    }
  }
  return weights;
}

// The initial state input `i` per direction ([batch, hidden] each), zeros when absent.
absl::StatusOr<std::vector<Value>> InitialStates(NodeContext& ctx, const RnnSpec& spec, int i,
                                                 absl::string_view what) {
  const int64_t nd = spec.directions;
  if (!ctx.HasInput(i)) {
    SLUICE_ASSIGN_OR_RETURN(
        Value zeros,
        Built(ctx, fn::FillConstant(Shape({spec.batch, spec.hidden}), 0.0, spec.dtype)));
    return std::vector<Value>(nd, zeros);
  }
  const std::vector<int64_t> dims = spec.batch_first
                                        ? std::vector<int64_t>{spec.batch, nd, spec.hidden}
                                        : std::vector<int64_t>{nd, spec.batch, spec.hidden};
  SLUICE_ASSIGN_OR_RETURN(Value v, CheckedInput(ctx, i, what, spec.dtype, dims));
  return PerDirection(ctx, spec, v, spec.batch_first, {spec.batch, spec.hidden});
}

// [directions, batch, hidden] (layout 1: [batch, directions, hidden]) of the last states.
absl::StatusOr<Value> StackStates(const NodeContext& ctx, const RnnSpec& spec,
                                  const std::vector<Value>& states) {
  std::vector<Value> parts;
  for (const Value& s : states) {
    SLUICE_ASSIGN_OR_RETURN(Value part, Built(ctx, fn::Reshape(s, {1, spec.batch, spec.hidden})));
    parts.push_back(std::move(part));
  }
  SLUICE_ASSIGN_OR_RETURN(Value stacked, Built(ctx, fn::Concat(parts, 0)));
  if (spec.batch_first) return Built(ctx, fn::Transpose(stacked, {1, 0, 2}));
  return stacked;
}

absl::Status MapRecurrent(NodeContext& ctx, Cell cell) {
  SLUICE_ASSIGN_OR_RETURN(const RnnSpec spec, ReadSpec(ctx, cell));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(kX));
  if (spec.batch_first) {
    SLUICE_ASSIGN_OR_RETURN(x, Built(ctx, fn::Transpose(x, {1, 0, 2})));
  }
  SLUICE_ASSIGN_OR_RETURN(x, Built(ctx, fn::Reshape(x, {spec.seq * spec.batch, spec.input})));
  SLUICE_ASSIGN_OR_RETURN(std::vector<DirectionWeights> weights, ReadWeights(ctx, spec));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> h0, InitialStates(ctx, spec, kInitialH, "initial_h"));
  std::vector<Value> c0;
  if (cell == Cell::kLstm) {
    SLUICE_ASSIGN_OR_RETURN(c0, InitialStates(ctx, spec, kInitialC, "initial_c"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> masks, SequenceMasks(ctx, spec));

  std::vector<Value> y_parts, last_h, last_c;
  for (int64_t d = 0; d < spec.directions; ++d) {
    State state{h0[d], cell == Cell::kLstm ? std::optional<Value>(c0[d]) : std::nullopt};
    const bool backwards = spec.reverse || d == 1;
    SLUICE_ASSIGN_OR_RETURN(
        DirectionOutputs out,
        RunDirection(ctx, spec, weights[d], &spec.activations[d * spec.functions], x,
                     std::move(state), backwards, masks));
    last_h.push_back(out.last.h);
    if (out.last.c.has_value()) last_c.push_back(*out.last.c);
    if (!ctx.WantsOutput(0)) continue;
    std::vector<Value> steps;
    for (const Value& y : out.ys) {
      SLUICE_ASSIGN_OR_RETURN(Value step,
                              Built(ctx, fn::Reshape(y, {1, 1, spec.batch, spec.hidden})));
      steps.push_back(std::move(step));
    }
    SLUICE_ASSIGN_OR_RETURN(Value part, Built(ctx, fn::Concat(steps, 0)));
    y_parts.push_back(std::move(part));
  }
  std::optional<Value> y, y_h, y_c;
  if (ctx.WantsOutput(0)) {
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Concat(y_parts, 1)));
    if (spec.batch_first) {
      SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Transpose(*y, {2, 0, 1, 3})));
    }
  }
  if (ctx.WantsOutput(1)) {
    SLUICE_ASSIGN_OR_RETURN(y_h, StackStates(ctx, spec, last_h));
  }
  if (cell == Cell::kLstm && ctx.WantsOutput(2)) {
    SLUICE_ASSIGN_OR_RETURN(y_c, StackStates(ctx, spec, last_c));
  }
  // Last: an output takes its ONNX name, which the Values above would no longer find.
  if (y.has_value()) SLUICE_RETURN_IF_ERROR(ctx.SetOutput(0, *y));
  if (y_h.has_value()) SLUICE_RETURN_IF_ERROR(ctx.SetOutput(1, *y_h));
  if (y_c.has_value()) SLUICE_RETURN_IF_ERROR(ctx.SetOutput(2, *y_c));
  return absl::OkStatus();
}

}  // namespace rnn_mapping

absl::Status MapRnn(NodeContext& ctx) {
  return rnn_mapping::MapRecurrent(ctx, rnn_mapping::Cell::kRnn);
}

absl::Status MapGru(NodeContext& ctx) {
  return rnn_mapping::MapRecurrent(ctx, rnn_mapping::Cell::kGru);
}

absl::Status MapLstm(NodeContext& ctx) {
  return rnn_mapping::MapRecurrent(ctx, rnn_mapping::Cell::kLstm);
}

}  // namespace sluice::framework::onnx::internal
