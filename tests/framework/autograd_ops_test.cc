// Eager autograd (framework/autograd/autograd.h) through every op of the standard registry
// that has a grad maker. A table gives each op inputs and attributes (after the op tests'
// gradient checks, tests/ops/*_test.cc: broadcasting pairs for the binary ops, every
// transpose flag of matmul, reduced axes with and without keepdim, split outputs and a
// cross-entropy output the loss leaves unused, one tensor in several slots). For each case
// the loss is the sum over the (used) outputs of reduce_sum(out * r), r fixed and seeded,
// and
//  1. the gradients eager autograd computes match central finite differences of the
//     forward op, in f64 on cpu;
//  2. they equal bit for bit the gradients static autodiff gives: the same one-op program
//     built with the program builder, the same loss ops, AppendBackward, run by an Executor
//     on the eager context's VM (same kernels), in f32 and in f64; and Grad (no
//     accumulation) gives the same bits as Backward.
// A coverage test enumerates the registry: an op with a grad maker that has no case here
// (and is not listed as unsupported, with the reason) fails it.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/autodiff/backward.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/scope.h"
#include "gtest/gtest.h"
#include "ops/op_registry.h"
#include "ops/op_schema.h"
#include "vm/attrs.h"
#include "vm/sync_checker.h"

namespace sluice::autograd::autograd_ops_test {
namespace {

using eager::Tensor;
using Ints = std::vector<int64_t>;

// Ops with a grad maker whose gradient eager autograd cannot compute, with the reason (none
// at present). The coverage test requires every other op with a grad maker to have cases
// below.
const std::map<std::string, std::string>& Unsupported() {
  static const auto* const ops = new std::map<std::string, std::string>{};
  return *ops;
}

// ---- Inputs ----

// Uniform values in [lo, hi) from a fixed seed.
std::vector<double> Uniform(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(static_cast<size_t>(n));
  for (double& v : values) v = dist(rng);
  return values;
}

// Magnitudes in [0.5, 2), random signs: safe divisors, no relu kink within a step.
std::vector<double> AwayFromZero(int64_t n, uint64_t seed) {
  std::vector<double> values = Uniform(n, seed, 0.5, 2.0);
  const std::vector<double> signs = Uniform(n, seed + 1000);
  for (size_t i = 0; i < values.size(); ++i) {
    if (signs[i] < 0) values[i] = -values[i];
  }
  return values;
}

// For max/min: X from odd and Y from even multiples of 0.1 (plus < 0.02), so X and Y differ
// by more than 0.08 everywhere: no ties, even after a finite-difference step.
std::vector<double> Separated(int64_t n, uint64_t seed, bool odd) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(-4, 4);
  std::uniform_real_distribution<double> jitter(0.0, 0.02);
  std::vector<double> values(static_cast<size_t>(n));
  for (double& v : values) v = 0.1 * (2 * k(rng) + (odd ? 1 : 0)) + jitter(rng);
  return values;
}

struct Input {
  Shape shape;
  std::vector<double> values;
  // A float input (kF64 here) takes the dtype under test and gets a gradient; an integer
  // one (a label) keeps its dtype and gets none.
  DataType dtype = DataType::kF64;
  // >= 0: not a tensor of its own but the same tensor as the case's flattened input
  // `same_as` (an op reading one tensor twice: its gradients meet). Its gradient is that
  // input's.
  int same_as = -1;
  bool differentiable() const { return IsFloating(dtype) && same_as < 0; }
};

Input In(const Shape& shape, std::vector<double> values) { return {shape, std::move(values)}; }
Input Random(const Shape& shape, uint64_t seed) {
  return {shape, Uniform(shape.NumElements(), seed)};
}
// The same tensor as flattened input `flat` (of shape `shape`).
Input Again(const Shape& shape, int flat) {
  Input in{shape, {}};
  in.same_as = flat;
  return in;
}

struct OpCase {
  std::string op;
  std::string what;                        // the case in failure messages
  std::vector<std::vector<Input>> inputs;  // per schema input slot
  vm::AttrMap attrs;
  // The flattened outputs the loss reads (empty: all). The others get no gradient: eager
  // autograd and static autodiff then feed their grad ops zeros, or nothing for an
  // optional slot.
  std::vector<int> used_outputs;
  // Off for a case whose output is f32 whatever the input: differences of an f32 loss
  // with an f64-sized step say nothing.
  bool finite_differences = true;
};

std::vector<OpCase> MakeCases() {
  std::vector<OpCase> cases;
  auto add = [&](std::string op, std::string what, std::vector<std::vector<Input>> inputs,
                 vm::AttrMap attrs = {}) -> OpCase& {
    cases.push_back({std::move(op), std::move(what), std::move(inputs), std::move(attrs)});
    return cases.back();
  };
  uint64_t seed = 1;

  // Binary elementwise ops, over the broadcasting pairs of the elementwise op tests.
  const std::vector<std::pair<Ints, Ints>> pairs = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}},    {{2, 3}, {1}},
      {{}, {2, 3}},     {{3, 1}, {1, 4}}, {{2, 1, 4}, {3, 1}},
  };
  for (const char* op : {"add", "sub", "mul", "div", "max", "min"}) {
    const std::string name = op;
    for (const auto& [x_dims, y_dims] : pairs) {
      const Shape xs(x_dims), ys(y_dims);
      const int64_t nx = xs.NumElements(), ny = ys.NumElements();
      std::vector<double> x, y;
      if (name == "div") {
        x = Uniform(nx, seed);
        y = AwayFromZero(ny, seed + 1);
      } else if (name == "max" || name == "min") {
        x = Separated(nx, seed, true);
        y = Separated(ny, seed + 1, false);
      } else {
        x = Uniform(nx, seed);
        y = Uniform(ny, seed + 1);
      }
      seed += 2;
      add(op, absl::StrCat(xs.ToString(), " and ", ys.ToString()), {{In(xs, x)}, {In(ys, y)}});
    }
  }

  // Unary elementwise ops, inside their domains and away from kinks.
  for (const char* op : {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square", "abs", "neg"}) {
    const std::string name = op;
    const Shape shape({2, 3});
    std::vector<double> x;
    if (name == "log" || name == "sqrt") {
      x = Uniform(6, seed++, 0.5, 2.0);
    } else if (name == "relu" || name == "abs") {
      x = AwayFromZero(6, seed++);
    } else {
      x = Uniform(6, seed++, -1.5, 1.5);
    }
    add(op, "[2, 3]", {{In(shape, x)}});
  }
  // clip: values at odd multiples of 0.1 (Separated), bounds at even ones, so some are
  // clipped on each side and none lies within a finite-difference step of a bound.
  add("clip", "[2, 3], bounds -0.4 and 0.4", {{In(Shape({2, 3}), Separated(6, seed++, true))}},
      vm::AttrMap().Set("min", -0.4).Set("max", 0.4));
  // pow: a fractional and a negative factor on positive bases, a whole one on any.
  add("pow", "[2, 3], factor 1.5", {{In(Shape({2, 3}), Uniform(6, seed++, 0.5, 2.0))}},
      vm::AttrMap().Set("factor", 1.5));
  add("pow", "[2, 3], factor -2", {{In(Shape({2, 3}), Uniform(6, seed++, 0.5, 2.0))}},
      vm::AttrMap().Set("factor", -2.0));
  add("pow", "[2, 3], factor 3", {{In(Shape({2, 3}), Uniform(6, seed++, -1.5, 1.5))}},
      vm::AttrMap().Set("factor", 3.0));

  // The basic family.
  add("assign", "[2, 3]", {{Random(Shape({2, 3}), seed++)}});
  add("scale", "scale -1.5, bias 3", {{Random(Shape({2, 3}), seed++)}},
      vm::AttrMap().Set("scale", -1.5).Set("bias", 3.0));
  add("sum", "three inputs",
      {{Random(Shape({2, 3}), seed), Random(Shape({2, 3}), seed + 1),
        Random(Shape({2, 3}), seed + 2)}});
  seed += 3;
  add("cast", "to f64", {{Random(Shape({2, 3}), seed++)}},
      vm::AttrMap().Set("dtype", std::string("f64")));
  add("cast", "to f32", {{Random(Shape({2, 3}), seed++)}},
      vm::AttrMap().Set("dtype", std::string("f32")))
      .finite_differences = false;
  add("increment", "value 1", {{Random(Shape({2, 3}), seed++)}}, vm::AttrMap().Set("value", 1.0));
  add("increment", "value -2.5", {{Random(Shape({2, 3}), seed++)}},
      vm::AttrMap().Set("value", -2.5));
  add("increment", "a scalar", {{In(Shape(), {3.0})}});

  // The nn family.
  for (int64_t tx = 0; tx < 2; ++tx) {
    for (int64_t ty = 0; ty < 2; ++ty) {
      const vm::AttrMap attrs = vm::AttrMap().Set("transpose_x", tx).Set("transpose_y", ty);
      const std::string flags = absl::StrCat("transpose_x ", tx, ", transpose_y ", ty);
      add("matmul", flags,
          {{Random(tx ? Shape({3, 2}) : Shape({2, 3}), seed)},
           {Random(ty ? Shape({4, 3}) : Shape({3, 4}), seed + 1)}},
          attrs);
      // Broadcast batches: X's [2, 1] and Y's [3] meet as [2, 3].
      add("matmul", absl::StrCat(flags, ", broadcast batches"),
          {{Random(tx ? Shape({2, 1, 3, 2}) : Shape({2, 1, 2, 3}), seed + 2)},
           {Random(ty ? Shape({3, 2, 3}) : Shape({3, 3, 2}), seed + 3)}},
          attrs);
      seed += 4;
    }
  }
  for (const char* op : {"reduce_sum", "reduce_mean"}) {
    for (const Ints& axes : std::vector<Ints>{{}, {1}, {0, -1}}) {
      for (int64_t keepdim : {0, 1}) {
        add(op, absl::StrCat("axes [", absl::StrJoin(axes, ", "), "], keepdim ", keepdim),
            {{Random(Shape({2, 3, 4}), seed++)}},
            vm::AttrMap().Set("axes", axes).Set("keepdim", keepdim));
      }
    }
  }
  for (const char* op : {"softmax", "log_softmax"}) {
    for (int64_t axis : {0, -1}) {
      add(op, absl::StrCat("[3, 4], axis ", axis), {{Random(Shape({3, 4}), seed++)}},
          vm::AttrMap().Set("axis", axis));
    }
    add(op, "[2, 3, 2], axis 1", {{Random(Shape({2, 3, 2}), seed++)}},
        vm::AttrMap().Set("axis", int64_t{1}));
  }
  const Input label{Shape({2, 2, 1}), {4, 0, 2, 3}, DataType::kI64};
  add("softmax_with_cross_entropy", "both outputs", {{Random(Shape({2, 2, 5}), seed++)}, {label}});
  // Loss alone: the optional SoftmaxGrad slot of the grad op stays empty.
  add("softmax_with_cross_entropy", "Loss only", {{Random(Shape({2, 2, 5}), seed++)}, {label}})
      .used_outputs = {1};
  // Softmax alone: LossGrad is zeros.
  add("softmax_with_cross_entropy", "Softmax only", {{Random(Shape({2, 2, 5}), seed++)}, {label}})
      .used_outputs = {0};

  // The norm family. layer_norm's Mean and InvStdDev pass no gradient back (ops/norm_ops.cc):
  // the loss reads Out alone.
  add("batch_norm_infer", "[2, 3, 2], epsilon 0.1",
      {{Random(Shape({2, 3, 2}), seed)},
       {Random(Shape({3}), seed + 1)},
       {Random(Shape({3}), seed + 2)},
       {Random(Shape({3}), seed + 3)},
       {In(Shape({3}), Uniform(3, seed + 4, 0.5, 1.5))}},
      vm::AttrMap().Set("epsilon", 0.1));
  add("layer_norm", "[2, 3, 4], axis 1",
      {{Random(Shape({2, 3, 4}), seed + 5)},
       {Random(Shape({3, 4}), seed + 6)},
       {Random(Shape({3, 4}), seed + 7)}},
      vm::AttrMap().Set("axis", int64_t{1}))
      .used_outputs = {0};
  add("layer_norm", "[3, 4], no Bias",
      {{Random(Shape({3, 4}), seed + 8)}, {Random(Shape({4}), seed + 9)}, {}})
      .used_outputs = {0};
  seed += 10;

  // The conv family: groups, strides, pads and dilations; pools with overlapping windows,
  // ceil_mode and count_include_pad (random values: no ties within a step).
  add("conv2d", "[2, 4, 5, 4] by [6, 2, 3, 2], groups 2, strides [2, 1], pads, dilations",
      {{Random(Shape({2, 4, 5, 4}), seed)}, {Random(Shape({6, 2, 3, 2}), seed + 1)}},
      vm::AttrMap()
          .Set("strides", Ints{2, 1})
          .Set("pads", Ints{1, 0, 2, 1})
          .Set("dilations", Ints{1, 2})
          .Set("groups", int64_t{2}));
  add("max_pool2d", "[1, 2, 5, 5], kernel [3, 3], strides [2, 2], pads 1, ceil_mode",
      {{Random(Shape({1, 2, 5, 5}), seed + 2)}},
      vm::AttrMap()
          .Set("kernel", Ints{3, 3})
          .Set("strides", Ints{2, 2})
          .Set("pads", Ints{1, 1, 1, 1})
          .Set("ceil_mode", int64_t{1}));
  add("avg_pool2d", "[1, 2, 5, 4], kernel [2, 3], pads, count_include_pad",
      {{Random(Shape({1, 2, 5, 4}), seed + 3)}},
      vm::AttrMap()
          .Set("kernel", Ints{2, 3})
          .Set("strides", Ints{1, 1})
          .Set("pads", Ints{1, 1, 0, 2})
          .Set("count_include_pad", int64_t{1}));
  seed += 4;

  // The shape family.
  add("reshape", "[2, 3, 4] to [0, -1]", {{Random(Shape({2, 3, 4}), seed++)}},
      vm::AttrMap().Set("shape", Ints{0, -1}));
  add("reshape", "[3, 4] to [2, -1, 3]", {{Random(Shape({3, 4}), seed++)}},
      vm::AttrMap().Set("shape", Ints{2, -1, 3}));
  add("transpose", "[2, 3, 4] by [2, 0, 1]", {{Random(Shape({2, 3, 4}), seed++)}},
      vm::AttrMap().Set("perm", Ints{2, 0, 1}));
  add("transpose", "[3, 5] by [1, 0]", {{Random(Shape({3, 5}), seed++)}},
      vm::AttrMap().Set("perm", Ints{1, 0}));
  add("concat", "axis 1, with an empty input",
      {{Random(Shape({2, 1, 3}), seed), Random(Shape({2, 2, 3}), seed + 1),
        Random(Shape({2, 0, 3}), seed + 2)}},
      vm::AttrMap().Set("axis", int64_t{1}));
  add("concat", "axis -2", {{Random(Shape({2, 3}), seed + 3), Random(Shape({1, 3}), seed + 4)}},
      vm::AttrMap().Set("axis", int64_t{-2}));
  seed += 5;
  add("split", "sections [1, -1]", {{Random(Shape({4, 3}), seed++)}},
      vm::AttrMap().Set("sections", Ints{1, -1}));
  add("split", "num 3, axis -1", {{Random(Shape({2, 6}), seed++)}},
      vm::AttrMap().Set("num", int64_t{3}).Set("axis", int64_t{-1}));
  // The middle output unused: its gradient is zeros in the concat of the grad maker.
  add("split", "num 3, axis -1, middle output unused", {{Random(Shape({2, 6}), seed++)}},
      vm::AttrMap().Set("num", int64_t{3}).Set("axis", int64_t{-1}))
      .used_outputs = {0, 2};

  // The index family: repeated and negative indices, a negative step, broadcasting.
  add("gather", "[4, 3] axis 0, repeated and negative indices",
      {{Random(Shape({4, 3}), seed++)}, {Input{Shape({3}), {1, -1, 1}, DataType::kI64}}});
  add("gather", "[2, 3, 2] axis 1, a scalar i32 index",
      {{Random(Shape({2, 3, 2}), seed++)}, {Input{Shape(), {-2}, DataType::kI32}}},
      vm::AttrMap().Set("axis", int64_t{1}));
  add("slice", "[4, 5], a negative step", {{Random(Shape({4, 5}), seed++)}},
      vm::AttrMap()
          .Set("starts", Ints{3, 1})
          .Set("ends", Ints{-100, 4})
          .Set("axes", Ints{0, -1})
          .Set("steps", Ints{-2, 1}));
  add("where", "Cond [2, 1, 3], X [3], Y [2, 2, 1]",
      {{Input{Shape({2, 1, 3}), {1, 0, 1, 0, 0, 1}, DataType::kBool}},
       {Random(Shape({3}), seed)},
       {Random(Shape({2, 2, 1}), seed + 1)}});
  seed += 2;
  add("erf", "[2, 3]", {{In(Shape({2, 3}), Uniform(6, seed++, -2.0, 2.0))}});
  // The unary math family, inside each domain; floor, ceil and round (gradient zero) away
  // from the integers and halves where they jump.
  struct Domain {
    const char* op;
    double lo, hi;
  };
  const Domain unary_math[] = {{"sin", -3, 3},      {"cos", -3, 3},       {"tan", -1.2, 1.2},
                               {"asin", -0.9, 0.9}, {"acos", -0.9, 0.9},  {"atan", -3, 3},
                               {"sinh", -2, 2},     {"cosh", -2, 2},      {"asinh", -3, 3},
                               {"acosh", 1.2, 3},   {"atanh", -0.9, 0.9}, {"floor", 0.1, 0.4},
                               {"ceil", 1.1, 1.4},  {"round", 2.1, 2.4}};
  for (const Domain& d : unary_math) {
    add(d.op, "[2, 3]", {{In(Shape({2, 3}), Uniform(6, seed++, d.lo, d.hi))}});
  }

  // One tensor read by several slots of an op: its gradients meet (eager autograd adds
  // them into the leaf; static autodiff sums renamed gradients).
  const Shape x23({2, 3});
  add("add", "x + x", {{Random(x23, seed++)}, {Again(x23, 0)}});
  add("sub", "x - x", {{Random(x23, seed++)}, {Again(x23, 0)}});
  add("mul", "x * x", {{Random(x23, seed++)}, {Again(x23, 0)}});
  add("div", "x / x", {{In(x23, AwayFromZero(6, seed++))}, {Again(x23, 0)}});
  // Ties everywhere: X takes the whole gradient, Y none.
  add("max", "max(x, x)", {{Random(x23, seed++)}, {Again(x23, 0)}});
  add("min", "min(x, x)", {{Random(x23, seed++)}, {Again(x23, 0)}});
  add("matmul", "x times x transposed", {{Random(x23, seed++)}, {Again(x23, 0)}},
      vm::AttrMap().Set("transpose_y", int64_t{1}));
  add("sum", "[x, x, x]", {{Random(x23, seed++), Again(x23, 0), Again(x23, 0)}});
  add("concat", "[x, x]", {{Random(x23, seed++), Again(x23, 0)}});

  // Collectives in a world of one rank (copies); across ranks: tests/ccl.
  add("all_reduce", "sum, one rank", {{Random(x23, seed++)}});
  add("all_reduce", "mean, a bucket of two, one rank",
      {{Random(x23, seed), Random(Shape({4}), seed + 1)}},
      vm::AttrMap().Set("reduce", std::string("mean")));
  seed += 2;
  add("all_gather", "one rank", {{Random(x23, seed++)}}, vm::AttrMap().Set("nranks", int64_t{1}));
  add("reduce_scatter", "sum, one rank", {{Random(x23, seed++)}},
      vm::AttrMap().Set("nranks", int64_t{1}));
  add("reduce_scatter", "mean, one rank", {{Random(x23, seed++)}},
      vm::AttrMap().Set("nranks", int64_t{1}).Set("reduce", std::string("mean")));
  add("broadcast", "root 0, one rank", {{Random(x23, seed++)}});
  add("reduce", "sum to root 0, one rank", {{Random(x23, seed++)}});
  return cases;
}

const std::vector<OpCase>& AllCases() {
  static const auto* const cases = new std::vector<OpCase>(MakeCases());
  return *cases;
}

// The ops of the table, once each, in table order.
std::vector<std::string> CoveredOps() {
  std::vector<std::string> ops;
  std::set<std::string> seen;
  for (const OpCase& c : AllCases()) {
    if (seen.insert(c.op).second) ops.push_back(c.op);
  }
  return ops;
}

std::vector<int> UsedOutputs(const OpCase& c, size_t outputs) {
  if (!c.used_outputs.empty()) return c.used_outputs;
  std::vector<int> all(outputs);
  for (size_t k = 0; k < outputs; ++k) all[k] = static_cast<int>(k);
  return all;
}

// ---- Bytes ----

std::vector<uint8_t> Encode(DataType dtype, const std::vector<double>& values) {
  std::vector<uint8_t> bytes(values.size() * SizeOf(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* at = bytes.data() + i * SizeOf(dtype);
    switch (dtype) {
      case DataType::kF32: {
        const float f = static_cast<float>(values[i]);
        std::memcpy(at, &f, sizeof(f));
        break;
      }
      case DataType::kF64:
        std::memcpy(at, &values[i], sizeof(double));
        break;
      case DataType::kI32: {
        const int32_t x = static_cast<int32_t>(values[i]);
        std::memcpy(at, &x, sizeof(x));
        break;
      }
      case DataType::kI64: {
        const int64_t x = static_cast<int64_t>(values[i]);
        std::memcpy(at, &x, sizeof(x));
        break;
      }
      case DataType::kBool:
        *at = values[i] != 0;
        break;
    }
  }
  return bytes;
}

// Float values only (what gradients and the forward outputs here are).
std::vector<double> Decode(DataType dtype, const std::vector<uint8_t>& bytes) {
  std::vector<double> values(bytes.size() / SizeOf(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DataType::kF32) {
      float f;
      std::memcpy(&f, bytes.data() + i * sizeof(float), sizeof(float));
      values[i] = f;
    } else {
      std::memcpy(&values[i], bytes.data() + i * sizeof(double), sizeof(double));
    }
  }
  return values;
}

// The dtype input `in` (not a repeat) has when the float dtype under test is `dtype`.
DataType DtypeOf(const Input& in, DataType dtype) {
  return IsFloating(in.dtype) ? dtype : in.dtype;
}

// The case's inputs, flattened over the slots.
std::vector<const Input*> Flat(const OpCase& c) {
  std::vector<const Input*> flat;
  for (const std::vector<Input>& slot : c.inputs) {
    for (const Input& in : slot) flat.push_back(&in);
  }
  return flat;
}

// Fixed weights r of output k (seeded by k), in the output's dtype when uploaded.
std::vector<double> Weights(int k, int64_t n) {
  return Uniform(n, 7000 + static_cast<uint64_t>(k));
}

// Gradients per flattened input (empty for an integer input), as bytes.
using Grads = std::vector<std::vector<uint8_t>>;

class AutogradOpsTest : public ::testing::TestWithParam<std::string> {
 protected:
  AutogradOpsTest() : context_(NewContext()) {}
  ~AutogradOpsTest() override {
    const absl::Status synced = context_.Sync();
    EXPECT_TRUE(synced.ok()) << synced;
    EXPECT_EQ(context_.vm()->sync_checker()->violation_count(), 0)
        << context_.vm()->sync_checker()->status().message();
  }

  static eager::Context NewContext() {
    eager::ContextOptions options;
    options.runtime.enable_cuda = false;
    options.vm.check_sync = true;
    return eager::Context::Create(options).value();
  }

  std::vector<OpCase> Cases() const {
    std::vector<OpCase> cases;
    for (const OpCase& c : AllCases()) {
      if (c.op == GetParam()) cases.push_back(c);
    }
    return cases;
  }

  Tensor Upload(DataType dtype, const Shape& shape, const std::vector<double>& values) {
    absl::StatusOr<Tensor> t =
        context_.FromBytes(dtype, shape, Encode(dtype, values), Device::Cpu());
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : Tensor();
  }

  // The case's inputs as eager tensors in `dtype`, per slot (a repeat is the handle of the
  // input it repeats); float ones require a gradient when `leaves`.
  std::vector<std::vector<Tensor>> Inputs(const OpCase& c, DataType dtype, bool leaves) {
    std::vector<std::vector<Tensor>> slots;
    std::vector<Tensor> flat;
    for (const std::vector<Input>& slot : c.inputs) {
      slots.emplace_back();
      for (const Input& in : slot) {
        Tensor t;
        if (in.same_as >= 0) {
          t = flat.at(static_cast<size_t>(in.same_as));
        } else {
          t = Upload(DtypeOf(in, dtype), in.shape, in.values);
          if (leaves && in.differentiable()) {
            const absl::Status marked = SetRequiresGrad(t);
            EXPECT_TRUE(marked.ok()) << marked;
          }
        }
        flat.push_back(t);
        slots.back().push_back(std::move(t));
      }
    }
    return slots;
  }

  // Eager autograd's gradients of the case in `dtype`: Backward from the loss, checked to
  // give the same bits as Grad of the same loss.
  void EagerGrads(const OpCase& c, DataType dtype, Grads* grads) {
    const std::vector<std::vector<Tensor>> inputs = Inputs(c, dtype, /*leaves=*/true);
    absl::StatusOr<std::vector<Tensor>> outputs = context_.Call(c.op, inputs, c.attrs);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    Tensor loss;
    for (int k : UsedOutputs(c, outputs->size())) {
      const Tensor& out = (*outputs)[static_cast<size_t>(k)];
      ASSERT_TRUE(RequiresGrad(out)) << "output " << k;
      const Tensor r = Upload(out.dtype(), out.shape(), Weights(k, out.num_elements()));
      absl::StatusOr<Tensor> product = fn::Mul(out, r);
      ASSERT_TRUE(product.ok()) << product.status();
      absl::StatusOr<Tensor> term = fn::ReduceSum(*product);
      ASSERT_TRUE(term.ok()) << term.status();
      if (!loss.valid()) {
        loss = *term;
      } else {
        absl::StatusOr<Tensor> sum = fn::Add(loss, *term);
        ASSERT_TRUE(sum.ok()) << sum.status();
        loss = *sum;
      }
    }
    const std::vector<const Input*> flat = Flat(c);
    std::vector<Tensor> leaves;
    for (size_t s = 0, k = 0; s < inputs.size(); ++s) {
      for (const Tensor& t : inputs[s]) {
        if (flat[k++]->differentiable()) leaves.push_back(t);
      }
    }
    BackwardOptions keep;
    keep.retain_graph = true;
    absl::StatusOr<std::vector<Tensor>> captured = Grad({loss}, leaves, {}, keep);
    ASSERT_TRUE(captured.ok()) << captured.status();
    const absl::Status backward = Backward(loss);
    ASSERT_TRUE(backward.ok()) << backward;
    size_t leaf = 0;
    for (const std::vector<Tensor>& slot : inputs) {
      for (const Tensor& t : slot) {
        grads->emplace_back();
        if (!flat[grads->size() - 1]->differentiable()) continue;
        const Tensor g = GradOf(t);
        ASSERT_TRUE(g.valid()) << "no gradient for flattened input " << grads->size() - 1;
        EXPECT_EQ(g.dtype(), t.dtype());
        EXPECT_EQ(g.shape(), t.shape());
        absl::StatusOr<std::vector<uint8_t>> bytes = g.ToBytes();
        ASSERT_TRUE(bytes.ok()) << bytes.status();
        EXPECT_EQ(bytes->size(), t.num_elements() * SizeOf(t.dtype()));
        absl::StatusOr<std::vector<uint8_t>> by_grad = (*captured)[leaf++].ToBytes();
        ASSERT_TRUE(by_grad.ok()) << by_grad.status();
        EXPECT_EQ(*by_grad, *bytes) << "Grad and Backward differ for input " << grads->size() - 1;
        grads->back() = std::move(*bytes);
      }
    }
  }

  // The loss of the case at `inputs` (no gradients recorded), in double on the host from
  // the forward op's outputs.
  double HostLoss(const OpCase& c, const std::vector<std::vector<Tensor>>& inputs) {
    absl::StatusOr<std::vector<Tensor>> outputs = context_.Call(c.op, inputs, c.attrs);
    EXPECT_TRUE(outputs.ok()) << outputs.status();
    if (!outputs.ok()) return std::nan("");
    double total = 0;
    for (int k : UsedOutputs(c, outputs->size())) {
      const Tensor& out = (*outputs)[static_cast<size_t>(k)];
      absl::StatusOr<std::vector<uint8_t>> bytes = out.ToBytes();
      EXPECT_TRUE(bytes.ok()) << bytes.status();
      if (!bytes.ok()) return std::nan("");
      const std::vector<double> values = Decode(out.dtype(), *bytes);
      const std::vector<double> r = Weights(k, out.num_elements());
      for (size_t i = 0; i < values.size(); ++i) total += r[i] * values[i];
    }
    return total;
  }

  // The same one-op program and loss built statically, AppendBackward, run by an Executor
  // on the context's VM: the gradients of the float inputs (empty for integer ones).
  void StaticGrads(const OpCase& c, DataType dtype, Grads* grads) {
    framework::Program main(&context_.registry());
    framework::Program startup(&context_.registry());
    framework::ProgramGuard guard(main, startup);
    framework::Feeds feeds;
    std::vector<std::string> fetches;
    std::vector<std::vector<framework::Var>> inputs;
    std::vector<framework::Var> flat;
    for (size_t s = 0; s < c.inputs.size(); ++s) {
      inputs.emplace_back();
      for (size_t i = 0; i < c.inputs[s].size(); ++i) {
        const Input& in = c.inputs[s][i];
        if (in.same_as >= 0) {
          flat.push_back(flat.at(static_cast<size_t>(in.same_as)));
          inputs.back().push_back(flat.back());
          continue;
        }
        const std::string name = absl::StrCat("in", s, "_", i);
        const DataType dt = DtypeOf(in, dtype);
        absl::StatusOr<framework::Var> var = framework::Data(name, in.shape, dt);
        ASSERT_TRUE(var.ok()) << var.status();
        if (in.differentiable()) {
          var->set_stop_gradient(false);  // data vars are stop_gradient by default
          fetches.push_back(ops::GradContext::GradName(name));
        }
        feeds.emplace_back(name, framework::HostTensor{dt, in.shape, Encode(dt, in.values)});
        flat.push_back(*var);
        inputs.back().push_back(*var);
      }
    }
    absl::StatusOr<std::vector<std::vector<framework::Var>>> slots =
        framework::AppendOp(main, c.op, inputs, c.attrs);
    ASSERT_TRUE(slots.ok()) << slots.status();
    std::vector<framework::Var> outputs;
    for (const std::vector<framework::Var>& slot : *slots) {
      outputs.insert(outputs.end(), slot.begin(), slot.end());
    }
    framework::Var loss;
    for (int k : UsedOutputs(c, outputs.size())) {
      const framework::Var& out = outputs[static_cast<size_t>(k)];
      const std::string name = absl::StrCat("r", k);
      absl::StatusOr<framework::Var> r = framework::Data(name, out.shape(), out.dtype());
      ASSERT_TRUE(r.ok()) << r.status();
      feeds.emplace_back(
          name, framework::HostTensor{out.dtype(), out.shape(),
                                      Encode(out.dtype(), Weights(k, out.shape().NumElements()))});
      absl::StatusOr<std::vector<std::vector<framework::Var>>> product =
          framework::AppendOp(main, "mul", {{out}, {*r}});
      ASSERT_TRUE(product.ok()) << product.status();
      absl::StatusOr<std::vector<std::vector<framework::Var>>> term =
          framework::AppendOp(main, "reduce_sum", {{(*product)[0][0]}});
      ASSERT_TRUE(term.ok()) << term.status();
      if (!loss.valid()) {
        loss = (*term)[0][0];
      } else {
        absl::StatusOr<std::vector<std::vector<framework::Var>>> sum =
            framework::AppendOp(main, "add", {{loss}, {(*term)[0][0]}});
        ASSERT_TRUE(sum.ok()) << sum.status();
        loss = (*sum)[0][0];
      }
    }
    absl::StatusOr<std::vector<std::pair<framework::Var, framework::Var>>> appended =
        framework::AppendBackward(loss);
    ASSERT_TRUE(appended.ok()) << appended.status();

    framework::Scope scope;  // outlives the executor's runs
    framework::Executor executor(&context_.registry(), context_.vm());
    absl::StatusOr<framework::RunResult> run = executor.Run(main.desc(), feeds, fetches, &scope);
    ASSERT_TRUE(run.ok()) << run.status();
    size_t fetched = 0;
    for (const std::vector<Input>& slot : c.inputs) {
      for (const Input& in : slot) {
        grads->emplace_back();
        if (!in.differentiable()) continue;
        const framework::HostTensor& g = run->fetches[fetched++];
        EXPECT_EQ(g.dtype, dtype);
        EXPECT_EQ(g.shape, in.shape);
        grads->back() = g.bytes;
      }
    }
  }

  eager::Context context_;
};

// 1. Eager gradients match central differences of the forward op, in f64.
TEST_P(AutogradOpsTest, EagerGradientsMatchFiniteDifferences) {
  constexpr double kStep = 1e-6, kAtol = 1e-6, kRtol = 1e-5;
  int checked = 0;
  for (const OpCase& c : Cases()) {
    if (!c.finite_differences) continue;
    SCOPED_TRACE(absl::StrCat(c.op, ": ", c.what));
    Grads grads;
    EagerGrads(c, DataType::kF64, &grads);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    std::vector<std::vector<Tensor>> inputs = Inputs(c, DataType::kF64, /*leaves=*/false);
    // Where each flattened input is read: its own position and those of its repeats.
    std::vector<std::vector<std::pair<size_t, size_t>>> reads;
    for (size_t s = 0; s < c.inputs.size(); ++s) {
      for (size_t i = 0; i < c.inputs[s].size(); ++i) {
        const int same_as = c.inputs[s][i].same_as;
        if (same_as < 0) {
          reads.push_back({{s, i}});
        } else {
          reads[static_cast<size_t>(same_as)].emplace_back(s, i);
          reads.emplace_back();
        }
      }
    }
    const std::vector<const Input*> flat = Flat(c);
    for (size_t f = 0; f < flat.size(); ++f) {
      const Input& in = *flat[f];
      if (!in.differentiable()) continue;
      const std::vector<double> analytic = Decode(DataType::kF64, grads[f]);
      ASSERT_EQ(analytic.size(), in.values.size());
      const Tensor base = inputs[reads[f][0].first][reads[f][0].second];
      for (size_t e = 0; e < in.values.size(); ++e) {
        double at[2];
        for (int side = 0; side < 2; ++side) {
          std::vector<double> moved = in.values;
          moved[e] += side == 0 ? kStep : -kStep;
          const Tensor t = Upload(DataType::kF64, in.shape, moved);
          for (const auto& [s, i] : reads[f]) inputs[s][i] = t;
          at[side] = HostLoss(c, inputs);
        }
        for (const auto& [s, i] : reads[f]) inputs[s][i] = base;
        const double numeric = (at[0] - at[1]) / (2 * kStep);
        EXPECT_NEAR(analytic[e], numeric, kAtol + kRtol * std::abs(numeric))
            << "d loss / d flattened input " << f << " element " << e;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0) << "no element checked";
}

// 2. Eager gradients equal static autodiff's bit for bit (same kernels on cpu), f32 and f64.
TEST_P(AutogradOpsTest, EagerGradientsEqualStaticBackwardBitwise) {
  for (const OpCase& c : Cases()) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      SCOPED_TRACE(absl::StrCat(c.op, ": ", c.what, ", ", DataTypeName(dtype)));
      Grads eager, stat;
      EagerGrads(c, dtype, &eager);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
      StaticGrads(c, dtype, &stat);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
      ASSERT_EQ(eager.size(), stat.size());
      for (size_t k = 0; k < eager.size(); ++k) {
        if (eager[k] == stat[k]) continue;
        ADD_FAILURE() << "flattened input " << k << ": eager and static gradients differ";
        if (eager[k].size() != stat[k].size()) continue;
        const std::vector<double> a = Decode(dtype, eager[k]), b = Decode(dtype, stat[k]);
        for (size_t e = 0; e < a.size(); ++e) {
          if (std::memcmp(&eager[k][e * SizeOf(dtype)], &stat[k][e * SizeOf(dtype)],
                          SizeOf(dtype)) != 0) {
            ADD_FAILURE() << "  element " << e << ": eager " << a[e] << ", static " << b[e];
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AutogradOps, AutogradOpsTest, ::testing::ValuesIn(CoveredOps()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Every op of the standard registry with a grad maker has cases above (or is listed as
// unsupported, with the reason); every op of the table has a grad maker.
TEST(AutogradOpsCoverageTest, EveryOpWithAGradMakerHasCases) {
  eager::ContextOptions options;
  options.runtime.enable_cuda = false;
  const eager::Context context = eager::Context::Create(options).value();
  const ops::OpRegistry& registry = context.registry();
  const std::vector<std::string> covered_list = CoveredOps();
  const std::set<std::string> covered(covered_list.begin(), covered_list.end());
  int with_grad = 0;
  for (const std::string& op : registry.op_names()) {
    const ops::OpSchema* schema = registry.FindSchema(op).value();
    if (!schema->has_grad()) {
      EXPECT_FALSE(covered.contains(op))
          << "the table has cases for '" << op << "', which has no grad maker";
      continue;
    }
    ++with_grad;
    EXPECT_TRUE(covered.contains(op) || Unsupported().contains(op))
        << "op '" << op
        << "' has a grad maker but no case in tests/framework/autograd_ops_test.cc: add its "
           "inputs and attributes to MakeCases (or, if eager autograd cannot differentiate "
           "it, list it in Unsupported with the reason)";
  }
  for (const auto& [op, reason] : Unsupported()) {
    absl::StatusOr<const ops::OpSchema*> schema = registry.FindSchema(op);
    ASSERT_TRUE(schema.ok()) << op;
    EXPECT_TRUE((*schema)->has_grad()) << op << " is listed as unsupported but has no grad maker";
    EXPECT_FALSE(covered.contains(op))
        << op << " is listed as unsupported (" << reason << ") but has cases";
  }
  for (const std::string& op : covered_list) {
    EXPECT_TRUE(registry.FindSchema(op).ok()) << "the table names unknown op '" << op << "'";
  }
  EXPECT_EQ(with_grad, static_cast<int>(covered.size() + Unsupported().size()));
}

}  // namespace
}  // namespace sluice::autograd::autograd_ops_test
