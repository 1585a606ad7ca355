#include "framework/compiler/subgraph.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status.h"

namespace sluice::framework::compiler {
namespace {

struct OpInfo {
  const char* name;
  int arity;
};
constexpr OpInfo kOps[kNumExprOps] = {
    {"add", 2},        {"sub", 2},        {"mul", 2},        {"div", 2},          {"max", 2},
    {"min", 2},        {"relu", 1},       {"sigmoid", 1},    {"tanh", 1},         {"exp", 1},
    {"log", 1},        {"sqrt", 1},       {"square", 1},     {"neg", 1},          {"copy", 1},
    {"scale", 1},      {"cast", 1},       {"relu_grad", 2},  {"sigmoid_grad", 2}, {"tanh_grad", 2},
    {"exp_grad", 2},   {"log_grad", 2},   {"sqrt_grad", 2},  {"square_grad", 2},  {"div_grad_y", 3},
    {"max_grad_x", 3}, {"max_grad_y", 3}, {"min_grad_x", 3}, {"min_grad_y", 3},   {"sgd", 3},
};

std::string DimsText(const Shape& shape) {
  if (shape.rank() == 0) return "s";
  return absl::StrJoin(shape.dims(), "x");
}

absl::StatusOr<Shape> ParseDims(absl::string_view text) {
  if (text == "s") return Shape();
  std::vector<int64_t> dims;
  for (absl::string_view d : absl::StrSplit(text, 'x')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(d, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("bad dimensions '", text, "'"));
    }
    dims.push_back(v);
  }
  return Shape::Make(dims);
}

std::string DoubleText(double v) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.17g", v);
  return buffer;
}

std::string BodyText(const Subgraph& g) {
  std::vector<std::string> tokens = {"sg1", absl::StrCat("d:", DimsText(g.domain))};
  for (const SubgraphInput& in : g.inputs) {
    tokens.push_back(absl::StrCat("i:", DataTypeName(in.dtype), ":", DimsText(in.shape)));
  }
  for (const ExprNode& n : g.nodes) {
    std::string t = absl::StrCat("n:", ExprOpName(n.op), ":", DataTypeName(n.dtype));
    for (int a = 0; a < ExprOpArity(n.op); ++a) absl::StrAppend(&t, ":", n.args[a]);
    // Arguments past the arity (which Validate rejects) still show, so that an invalid
    // graph never shares a text (a cache key) with a valid one; Parse refuses such a text.
    for (int a = ExprOpArity(n.op); a < 3; ++a) {
      if (n.args[a] != -1) absl::StrAppend(&t, ":!", n.args[a]);
    }
    if (n.op == ExprOp::kScale) {
      absl::StrAppend(&t, ":", DoubleText(n.params[0]), ":", DoubleText(n.params[1]));
    }
    tokens.push_back(std::move(t));
  }
  for (int o : g.outputs) tokens.push_back(absl::StrCat("o:", o));
  return absl::StrJoin(tokens, "/");
}

}  // namespace

bool BroadcastsInto(const Shape& from, const Shape& to) {
  if (from.rank() > to.rank()) return false;
  const int shift = to.rank() - from.rank();
  for (int i = 0; i < from.rank(); ++i) {
    if (from.dim(i) != 1 && from.dim(i) != to.dim(i + shift)) return false;
  }
  return true;
}

absl::string_view ExprOpName(ExprOp op) { return kOps[static_cast<int>(op)].name; }
int ExprOpArity(ExprOp op) { return kOps[static_cast<int>(op)].arity; }

uint64_t ContentHash(absl::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string Subgraph::CacheText() const { return ToText(); }

std::string Subgraph::ComputationText() const { return BodyText(*this); }

std::string Subgraph::ToText() const {
  std::string text = BodyText(*this);
  if (!fused.empty()) absl::StrAppend(&text, "/f:", absl::StrJoin(fused, "+"));
  return text;
}

std::string Subgraph::KernelName() const {
  return absl::StrCat("fused[", absl::StrJoin(fused, "+"), "]");
}

absl::Status Subgraph::Validate() const {
  const int n_in = static_cast<int>(inputs.size());
  for (int i = 0; i < n_in; ++i) {
    if (!BroadcastsInto(inputs[i].shape, domain)) {
      return absl::InvalidArgumentError(
          absl::StrCat("subgraph input ", i, " of shape ", inputs[i].shape.ToString(),
                       " does not broadcast into the domain ", domain.ToString()));
    }
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    const ExprNode& n = nodes[k];
    const int self = n_in + static_cast<int>(k);
    const std::string where = absl::StrCat("subgraph node ", k, " (", ExprOpName(n.op), ")");
    if (!IsFloating(n.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dtype ", DataTypeName(n.dtype), " is not floating"));
    }
    const int arity = ExprOpArity(n.op);
    for (int a = 0; a < 3; ++a) {
      const int v = n.args[a];
      if (a >= arity) {
        if (v != -1) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": takes ", arity, " arguments"));
        }
        continue;
      }
      if (v < 0 || v >= self) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": argument ", a, " is value ", v, ", not an earlier value"));
      }
      const DataType want = n.op == ExprOp::kCast ? dtype_of(v) : n.dtype;
      if (dtype_of(v) != want || !IsFloating(dtype_of(v))) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": argument ", a, " is ",
                                                       DataTypeName(dtype_of(v)), ", not ",
                                                       DataTypeName(n.dtype)));
      }
    }
  }
  if (outputs.empty()) return absl::InvalidArgumentError("subgraph has no outputs");
  for (size_t o = 0; o < outputs.size(); ++o) {
    const int v = outputs[o];
    if (v < n_in || v >= num_values()) {
      return absl::InvalidArgumentError(
          absl::StrCat("subgraph output ", o, " is value ", v, ", not a node"));
    }
    for (size_t p = 0; p < o; ++p) {
      if (outputs[p] == v) {
        return absl::InvalidArgumentError(
            absl::StrCat("subgraph output ", o, " repeats value ", v));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Subgraph> Subgraph::Parse(absl::string_view text) {
  Subgraph g;
  std::vector<absl::string_view> tokens = absl::StrSplit(text, '/');
  if (tokens.empty() || tokens[0] != "sg1") {
    return absl::InvalidArgumentError("subgraph text does not start with 'sg1'");
  }
  bool have_domain = false;
  for (size_t t = 1; t < tokens.size(); ++t) {
    const absl::string_view token = tokens[t];
    std::vector<absl::string_view> f = absl::StrSplit(token, ':');
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("subgraph token ", t, " '", token, "': ", why));
    };
    if (f[0] == "d" && f.size() == 2) {
      absl::StatusOr<Shape> dims = ParseDims(f[1]);
      if (!dims.ok()) return bad(dims.status().message());
      g.domain = *dims;
      have_domain = true;
    } else if (f[0] == "i" && f.size() == 3) {
      absl::StatusOr<DataType> dtype = ParseDataType(f[1]);
      absl::StatusOr<Shape> dims = ParseDims(f[2]);
      if (!dtype.ok() || !dims.ok()) return bad("bad dtype or dimensions");
      if (!g.nodes.empty()) return bad("input after a node");
      g.inputs.push_back({*dtype, *dims});
    } else if (f[0] == "n" && f.size() >= 3) {
      ExprNode n;
      int op = 0;
      while (op < kNumExprOps && f[1] != kOps[op].name) ++op;
      if (op == kNumExprOps) return bad("unknown op");
      n.op = static_cast<ExprOp>(op);
      absl::StatusOr<DataType> dtype = ParseDataType(f[2]);
      if (!dtype.ok()) return bad("bad dtype");
      n.dtype = *dtype;
      const size_t arity = static_cast<size_t>(ExprOpArity(n.op));
      const size_t params = n.op == ExprOp::kScale ? 2 : 0;
      if (f.size() != 3 + arity + params) return bad("wrong number of fields");
      for (size_t a = 0; a < arity; ++a) {
        if (!absl::SimpleAtoi(f[3 + a], &n.args[a])) return bad("bad argument");
      }
      for (size_t p = 0; p < params; ++p) {
        if (!absl::SimpleAtod(f[3 + arity + p], &n.params[p])) return bad("bad constant");
      }
      g.nodes.push_back(n);
    } else if (f[0] == "o" && f.size() == 2) {
      int v = 0;
      if (!absl::SimpleAtoi(f[1], &v)) return bad("bad output");
      g.outputs.push_back(v);
    } else if (f[0] == "f" && f.size() == 2) {
      for (absl::string_view name : absl::StrSplit(f[1], '+')) g.fused.emplace_back(name);
    } else {
      return bad("unknown token");
    }
  }
  if (!have_domain) return absl::InvalidArgumentError("subgraph text has no domain ('d:')");
  SLUICE_RETURN_IF_ERROR(g.Validate());
  return g;
}

}  // namespace sluice::framework::compiler
