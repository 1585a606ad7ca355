#include "framework/compiler/cuda/cuda_source.h"

#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/compiler/domain_indexing.h"

namespace sluice::framework::compiler {
namespace {

const char* TypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return "float";
    case DataType::kF64:
      return "double";
    case DataType::kI32:
      return "int";
    case DataType::kI64:
      return "long long";
    case DataType::kBool:
      return "bool";
  }
  return "void";
}

// A small constant of a floating dtype: "1.0f" or "1.0" (`decimal` must be exact).
std::string Small(DataType dtype, absl::string_view decimal) {
  return absl::StrCat(decimal, dtype == DataType::kF32 ? "f" : "");
}

// `v` rounded to `dtype` (as static_cast does), as an exact literal of that type: hex-float
// when finite, the bit pattern otherwise.
std::string ExactLiteral(DataType dtype, double v) {
  char buffer[64];
  if (dtype == DataType::kF32) {
    const float f = static_cast<float>(v);
    if (std::isfinite(f)) {
      std::snprintf(buffer, sizeof(buffer), "%af", static_cast<double>(f));
    } else {
      std::snprintf(buffer, sizeof(buffer), "__int_as_float(0x%08" PRIx32 ")",
                    std::bit_cast<uint32_t>(f));
    }
  } else if (std::isfinite(v)) {
    std::snprintf(buffer, sizeof(buffer), "%a", v);
  } else {
    std::snprintf(buffer, sizeof(buffer), "__longlong_as_double((long long)0x%016" PRIx64 "ull)",
                  std::bit_cast<uint64_t>(v));
  }
  return buffer[0] == '-' ? absl::StrCat("(", buffer, ")") : std::string(buffer);
}

std::string Decimal(double v) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.17g", v);
  return buffer;
}

std::string Value(int id) { return absl::StrCat("v", id); }

// The right-hand side of node `n`: the uncompiled kernel's formula, operand for operand.
std::string Expression(const ExprNode& n) {
  const DataType t = n.dtype;
  const bool f32 = t == DataType::kF32;
  const std::string a = Value(n.args[0]);
  const std::string b = n.args[1] >= 0 ? Value(n.args[1]) : "";
  const std::string c = n.args[2] >= 0 ? Value(n.args[2]) : "";
  const std::string zero = Small(t, "0.0");
  const std::string one = Small(t, "1.0");
  switch (n.op) {
    case ExprOp::kAdd:
      return absl::StrCat(a, " + ", b);
    case ExprOp::kSub:
      return absl::StrCat(a, " - ", b);
    case ExprOp::kMul:
      return absl::StrCat(a, " * ", b);
    case ExprOp::kDiv:
      return absl::StrCat(a, " / ", b);
    // max and min return a on a tie and when a is NaN, else b: NaN propagates whatever the
    // order (MaxTakesX / MinTakesX of ops/cpu/elementwise_functions.h).
    case ExprOp::kMax:
      return absl::StrCat("(", a, " >= ", b, " || ", a, " != ", a, ") ? ", a, " : ", b);
    case ExprOp::kMin:
      return absl::StrCat("(", a, " <= ", b, " || ", a, " != ", a, ") ? ", a, " : ", b);
    case ExprOp::kRelu:  // NaN stays NaN
      return absl::StrCat(a, " < ", zero, " ? ", zero, " : ", a);
    case ExprOp::kSigmoid:
      return absl::StrCat("SluiceSigmoid(", a, ")");
    case ExprOp::kTanh:
      return absl::StrCat(f32 ? "tanhf(" : "tanh(", a, ")");
    case ExprOp::kExp:
      return absl::StrCat(f32 ? "expf(" : "exp(", a, ")");
    case ExprOp::kLog:
      return absl::StrCat(f32 ? "logf(" : "log(", a, ")");
    case ExprOp::kSqrt:
      return absl::StrCat(f32 ? "sqrtf(" : "sqrt(", a, ")");
    case ExprOp::kSquare:
      return absl::StrCat(a, " * ", a);
    case ExprOp::kNeg:
      return absl::StrCat("-", a);
    case ExprOp::kCopy:
      return a;
    case ExprOp::kScale:
      return absl::StrCat(ExactLiteral(t, n.params[0]), " * ", a, " + ",
                          ExactLiteral(t, n.params[1]));
    case ExprOp::kCast:
      return absl::StrCat("static_cast<", TypeName(t), ">(", a, ")");
    // Unary gradients: a is Out (or X for log and square), b the output's gradient.
    case ExprOp::kReluGrad:
      return absl::StrCat(a, " > ", zero, " ? ", b, " : ", zero);
    case ExprOp::kSigmoidGrad:
      return absl::StrCat(b, " * ", a, " * (", one, " - ", a, ")");
    case ExprOp::kTanhGrad:
      return absl::StrCat(b, " * (", one, " - ", a, " * ", a, ")");
    case ExprOp::kExpGrad:
      return absl::StrCat(b, " * ", a);
    case ExprOp::kLogGrad:
      return absl::StrCat(b, " / ", a);
    case ExprOp::kSqrtGrad:
      return absl::StrCat(Small(t, "0.5"), " * ", b, " / ", a);
    case ExprOp::kSquareGrad:
      return absl::StrCat(Small(t, "2.0"), " * ", a, " * ", b);
    // Binary gradient parts: a = x, b = y, c = the output's gradient.
    case ExprOp::kDivGradY:
      return absl::StrCat("-(", c, " / ", b, ") * (", a, " / ", b, ")");
    // max and min's parts: c goes to the argument the forward op returned (kMax, kMin).
    case ExprOp::kMaxGradX:
      return absl::StrCat("(", a, " >= ", b, " || ", a, " != ", a, ") ? ", c, " : ", zero);
    case ExprOp::kMaxGradY:
      return absl::StrCat("(", a, " >= ", b, " || ", a, " != ", a, ") ? ", zero, " : ", c);
    case ExprOp::kMinGradX:
      return absl::StrCat("(", a, " <= ", b, " || ", a, " != ", a, ") ? ", c, " : ", zero);
    case ExprOp::kMinGradY:
      return absl::StrCat("(", a, " <= ", b, " || ", a, " != ", a, ") ? ", zero, " : ", c);
    // p, g, lr: lr is one element (an input of one element is read at 0).
    case ExprOp::kSgd:
      return absl::StrCat(a, " - ", c, " * ", b);
  }
  return "";
}

// The host kernels' sigmoid (elementwise_loops.h): e / (1 + e) with e = e^-|x|, exact for
// x >= 0 as 1 / (1 + e).
constexpr absl::string_view kSigmoidF32 =
    "__device__ __forceinline__ float SluiceSigmoid(float x) {\n"
    "  const float e = expf(-fabsf(x));\n"
    "  return (x >= 0.0f ? 1.0f : e) / (1.0f + e);\n"
    "}\n";
constexpr absl::string_view kSigmoidF64 =
    "__device__ __forceinline__ double SluiceSigmoid(double x) {\n"
    "  const double e = exp(-fabs(x));\n"
    "  return (x >= 0.0 ? 1.0 : e) / (1.0 + e);\n"
    "}\n";

std::string EntryName(const Subgraph& g) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "sluice_fused_%016" PRIx64,
                ContentHash(g.ComputationText()));
  return buffer;
}

}  // namespace

absl::StatusOr<CudaSource> GenerateCudaSource(const Subgraph& g) {
  SLUICE_RETURN_IF_ERROR(g.Validate());
  const int n_in = static_cast<int>(g.inputs.size());
  CudaSource out;
  out.entry = EntryName(g);
  const DomainIndexing indexing = MakeDomainIndexing(g);

  std::vector<bool> used(static_cast<size_t>(g.num_values()), false);
  bool sigmoid[2] = {false, false};  // f32, f64
  for (const ExprNode& n : g.nodes) {
    for (int a = 0; a < ExprOpArity(n.op); ++a) used[n.args[a]] = true;
    if (n.op == ExprOp::kSigmoid) sigmoid[n.dtype == DataType::kF64] = true;
  }

  std::string& s = out.source;
  // Only the cache text: subgraphs that share a cache entry share their source too.
  absl::StrAppend(&s, "// Generated by Sluice's subgraph compiler from\n// ", g.ComputationText(),
                  "\n");
  if (sigmoid[0]) absl::StrAppend(&s, kSigmoidF32);
  if (sigmoid[1]) absl::StrAppend(&s, kSigmoidF64);

  absl::StrAppend(&s, "extern \"C\" __global__ void ", out.entry, "(");
  for (int k = 0; k < n_in; ++k) {
    absl::StrAppend(&s, "const ", TypeName(g.inputs[k].dtype), "* in", k, ", ");
  }
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    absl::StrAppend(&s, TypeName(g.dtype_of(g.outputs[o])), "* out", o, ", ");
  }
  absl::StrAppend(&s, "long long n) {\n",
                  "  const long long step = (long long)gridDim.x * blockDim.x;\n",
                  "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
                  " i += step) {\n");

  // Coordinates of the collapsed domain that some loaded input steps along.
  std::vector<bool> coordinate(indexing.dims.size(), false);
  for (int k = 0; k < n_in; ++k) {
    if (!used[k] || indexing.access[k] != DomainIndexing::Access::kStrided) continue;
    for (size_t d = 0; d < indexing.dims.size(); ++d) {
      if (indexing.strides[k][d] != 0) coordinate[d] = true;
    }
  }
  for (size_t d = 0; d < indexing.dims.size(); ++d) {
    if (!coordinate[d]) continue;
    std::string expr = "i";
    if (indexing.divisors[d] != 1) absl::StrAppend(&expr, " / ", indexing.divisors[d]);
    if (d != 0) absl::StrAppend(&expr, " % ", indexing.dims[d]);
    absl::StrAppend(&s, "    const long long c", d, " = ", expr, ";\n");
  }

  for (int k = 0; k < n_in; ++k) {
    if (!used[k]) continue;
    std::string offset;
    switch (indexing.access[k]) {
      case DomainIndexing::Access::kScalar:
        offset = "0";
        break;
      case DomainIndexing::Access::kFlat:
        offset = "i";
        break;
      case DomainIndexing::Access::kStrided:
        for (size_t d = 0; d < indexing.dims.size(); ++d) {
          const int64_t stride = indexing.strides[k][d];
          if (stride == 0) continue;
          if (!offset.empty()) offset += " + ";
          absl::StrAppend(&offset, "c", d);
          if (stride != 1) absl::StrAppend(&offset, " * ", stride);
        }
        break;
    }
    absl::StrAppend(&s, "    const ", TypeName(g.inputs[k].dtype), " ", Value(k), " = in", k, "[",
                    offset, "];\n");
  }

  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const ExprNode& n = g.nodes[k];
    absl::StrAppend(&s, "    const ", TypeName(n.dtype), " ", Value(n_in + static_cast<int>(k)),
                    " = ", Expression(n), ";  // ", ExprOpName(n.op));
    if (n.op == ExprOp::kScale) {
      absl::StrAppend(&s, " ", Decimal(n.params[0]), " ", Decimal(n.params[1]));
    }
    absl::StrAppend(&s, "\n");
  }
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    absl::StrAppend(&s, "    out", o, "[i] = ", Value(g.outputs[o]), ";\n");
  }
  absl::StrAppend(&s, "  }\n}\n");
  return out;
}

}  // namespace sluice::framework::compiler
