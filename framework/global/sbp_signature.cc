#include "framework/global/sbp_signature.h"

#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"

namespace sluice::global {

namespace {

struct AxisChoice {
  std::vector<Sbp> inputs;
  Sbp output;
};

bool Binary(absl::string_view op) {
  static const auto* const ops =
      new absl::flat_hash_set<std::string>{"add", "sub", "mul", "div", "max", "min"};
  return ops->contains(op);
}
bool Unary(absl::string_view op) {
  static const auto* const ops = new absl::flat_hash_set<std::string>{
      "relu", "sigmoid", "tanh", "exp",  "log",    "sqrt", "square",
      "abs",  "neg",     "pow",  "cast", "assign", "scale"};
  return ops->contains(op);
}
// Ops that commute with a sum of parts. Not cast: rounding to an integer or to bool does
// not (0.5 + 0.5 casts to 1, each part to 0).
bool Linear(absl::string_view op, const vm::AttrMap& attrs) {
  if (op == "assign" || op == "neg") return true;
  if (op != "scale") return false;
  absl::StatusOr<double> bias = attrs.GetFloat("bias");
  return !bias.ok() || *bias == 0.0;
}

std::optional<AxisChoice> BinaryRule(absl::string_view op, const Sbp& x, const Sbp& y) {
  if (x == y && !x.is_partial_sum()) return AxisChoice{{x, y}, x};
  if (x.is_partial_sum() && y.is_partial_sum() && (op == "add" || op == "sub")) {
    return AxisChoice{{x, y}, x};
  }
  if (x.is_partial_sum() && y.is_broadcast() && (op == "mul" || op == "div")) {
    return AxisChoice{{x, y}, x};
  }
  if (x.is_broadcast() && y.is_partial_sum() && op == "mul") return AxisChoice{{x, y}, y};
  return std::nullopt;
}

std::optional<AxisChoice> MatmulRule(const Sbp& x, const Sbp& w) {
  const Sbp b = Sbp::Broadcast(), p = Sbp::PartialSum();
  if (x.is_split() && x.axis == 0 && w.is_broadcast()) return AxisChoice{{x, w}, x};
  if (x.is_broadcast() && w.is_split() && w.axis == 1) return AxisChoice{{x, w}, w};
  if (x.is_split() && x.axis == 1 && w.is_split() && w.axis == 0) return AxisChoice{{x, w}, p};
  if (x.is_broadcast() && w.is_broadcast()) return AxisChoice{{x, w}, b};
  if ((x.is_partial_sum() && w.is_broadcast()) || (x.is_broadcast() && w.is_partial_sum())) {
    return AxisChoice{{x, w}, p};
  }
  // Keep the larger side's split and replicate the other.
  if (x.is_split() && x.axis == 0) return AxisChoice{{x, b}, x};
  if (w.is_split() && w.axis == 1) return AxisChoice{{b, w}, w};
  return std::nullopt;
}

std::optional<AxisChoice> ReduceSumRule(const Sbp& x, const Shape& shape,
                                        const vm::AttrMap& attrs) {
  if (!x.is_split()) return AxisChoice{{x}, x};
  std::vector<int64_t> axes = attrs.GetInts("axes").value_or(std::vector<int64_t>{});
  const bool keepdim = attrs.GetInt("keepdim").value_or(0) != 0;
  const int rank = shape.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    const int64_t axis = a < 0 ? a + rank : a;
    if (axis >= 0 && axis < rank) reduced[static_cast<size_t>(axis)] = true;
  }
  if (x.axis >= rank) return std::nullopt;
  if (reduced[static_cast<size_t>(x.axis)]) return AxisChoice{{x}, Sbp::PartialSum()};
  int kept = x.axis;
  if (!keepdim) {
    kept = 0;
    for (int a = 0; a < x.axis; ++a) kept += reduced[static_cast<size_t>(a)] ? 0 : 1;
  }
  return AxisChoice{{x}, Sbp::Split(kept)};
}

std::optional<AxisChoice> AxisRule(absl::string_view op, const std::vector<Sbp>& in,
                                   const std::vector<Shape>& shapes, const vm::AttrMap& attrs) {
  if (Binary(op) && in.size() == 2 && shapes[0] == shapes[1]) return BinaryRule(op, in[0], in[1]);
  if (Unary(op) && in.size() == 1) {
    if (!in[0].is_partial_sum() || Linear(op, attrs)) return AxisChoice{{in[0]}, in[0]};
    return std::nullopt;
  }
  if (op == "matmul" && in.size() == 2 && shapes[0].rank() == 2 && shapes[1].rank() == 2 &&
      attrs.GetInt("transpose_x").value_or(0) == 0 &&
      attrs.GetInt("transpose_y").value_or(0) == 0) {
    return MatmulRule(in[0], in[1]);
  }
  if (op == "reduce_sum" && in.size() == 1) return ReduceSumRule(in[0], shapes[0], attrs);
  return std::nullopt;
}

}  // namespace

SbpSignature InferSbpSignature(absl::string_view op, const std::vector<NdSbp>& inputs,
                               const std::vector<Shape>& shapes, const vm::AttrMap& attrs,
                               int mesh_axes) {
  const size_t axes = static_cast<size_t>(mesh_axes);
  SbpSignature signature;
  signature.inputs.assign(inputs.size(), NdSbp(axes));
  signature.output.assign(axes, Sbp::Broadcast());
  for (size_t d = 0; d < axes; ++d) {
    std::vector<Sbp> in;
    for (const NdSbp& sbp : inputs) in.push_back(sbp[d]);
    std::optional<AxisChoice> choice = AxisRule(op, in, shapes, attrs);
    if (!choice.has_value()) {
      // No rule fits: replicate every input along this axis; the op then sees whole values.
      choice = AxisChoice{std::vector<Sbp>(in.size(), Sbp::Broadcast()), Sbp::Broadcast()};
    }
    for (size_t i = 0; i < inputs.size(); ++i) signature.inputs[i][d] = choice->inputs[i];
    signature.output[d] = choice->output;
  }
  return signature;
}

}  // namespace sluice::global
