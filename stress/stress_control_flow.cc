#include "stress/stress_control_flow.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"

namespace sluice::stress {
namespace {

using framework::HostTensor;
using framework::Program;
using framework::Value;
using framework::Var;

// The values a block can read: its own so far, and its ancestors'. Vectors are f32
// [elements], scalars f32 []. Loop counters are kept out (they are not in [-1, 1]).
struct Pool {
  std::vector<Value> vectors;
  std::vector<Value> scalars;
  std::vector<Value>& Of(bool vector) { return vector ? vectors : scalars; }
  const std::vector<Value>& Of(bool vector) const { return vector ? vectors : scalars; }
};

// Builds one program into the current ProgramGuard's main program, drawing every choice
// from one seeded engine in a fixed order. Thread-compatible; one per program.
class Generator {
 public:
  Generator(const ControlFlowShape& shape, uint64_t seed) : shape_(shape), rng_(seed) {}

  int Uniform(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool Chance(int percent) { return Uniform(100) < percent; }
  // A multiple of 1/8 in [-limit, limit] (limit a multiple of 1/8).
  float Eighths(float limit) {
    const int m = static_cast<int>(limit * 8);
    return static_cast<float>(Uniform(2 * m + 1) - m) / 8.0f;
  }

  // `count` statements into the current block.
  absl::Status Statements(Pool& pool, int count, int depth) {
    for (int i = 0; i < count; ++i) SLUICE_RETURN_IF_ERROR(Statement(pool, depth));
    return absl::OkStatus();
  }

  // A while in the current block; its results join `pool`.
  absl::Status While(Pool& pool, int depth);

  int conds = 0;
  int whiles = 0;
  std::vector<Value> counters;  // block 0's loop counters (fetched, never operands)

 private:
  const Value& Pick(const std::vector<Value>& values) {
    return values[Uniform(static_cast<int>(values.size()))];
  }
  // Mostly one of the values added since `since` (the block's own), else any.
  const Value& PickRecent(const std::vector<Value>& values, size_t since) {
    if (since < values.size() && Chance(80)) {
      return values[since + Uniform(static_cast<int>(values.size() - since))];
    }
    return Pick(values);
  }

  absl::Status Statement(Pool& pool, int depth);
  absl::StatusOr<Value> ElementOp(const Pool& pool, bool vector);
  absl::StatusOr<Value> Binary(const Value& a, const Value& b);
  absl::StatusOr<Value> ElementOf(const Value& vector);
  absl::StatusOr<Value> Compare(const Value& a, const Value& b);
  absl::StatusOr<Value> Predicate(const Pool& pool);
  absl::Status Cond(Pool& pool, int depth);
  int SubBlockOps() { return 1 + Uniform(std::max(1, shape_.ops / 3)); }

  const ControlFlowShape& shape_;
  std::mt19937_64 rng_;
};

// An op with X and Y slots that fn:: has no function for.
absl::StatusOr<Value> AppendBinary(absl::string_view type, const Value& x, const Value& y) {
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::vector<Var>> outs,
      framework::AppendOp(*framework::CurrentMainProgram(), type, {{x.var()}, {y.var()}}));
  return Value(outs[0][0]);
}

// A binary op keeping [-1, 1]; a scalar operand broadcasts.
absl::StatusOr<Value> Generator::Binary(const Value& a, const Value& b) {
  switch (Uniform(5)) {
    case 0:
      return fn::Mul(a, b);
    case 1: {
      SLUICE_ASSIGN_OR_RETURN(Value sum, fn::Add(a, b));
      return fn::Scale(sum, 0.5);
    }
    case 2: {
      SLUICE_ASSIGN_OR_RETURN(Value difference, fn::Sub(a, b));
      return fn::Scale(difference, 0.5);
    }
    case 3:
      return AppendBinary("max", a, b);
    default:
      return AppendBinary("min", a, b);
  }
}

absl::StatusOr<Value> Generator::ElementOp(const Pool& pool, bool vector) {
  const Value& a = Pick(pool.Of(vector));
  switch (Uniform(4)) {
    case 0: {
      static constexpr float kScales[] = {-1.0f, -0.75f, -0.5f, 0.5f, 0.75f, 1.0f};
      const float scale = kScales[Uniform(6)];
      return fn::Scale(a, scale, Eighths(1.0f - std::abs(scale)));
    }
    case 1:
      return fn::Relu(a);
    default: {
      // A vector result may take a scalar operand, on either side.
      const Value& b = Pick(pool.Of(vector && Chance(60)));
      return Chance(50) ? Binary(a, b) : Binary(b, a);
    }
  }
}

// Element k of a vector as a scalar: split into [k, 1, rest] pieces, reshape the middle one.
absl::StatusOr<Value> Generator::ElementOf(const Value& vector) {
  const int64_t n = shape_.elements;
  const int64_t k = Uniform(static_cast<int>(n));
  Value piece = vector;
  if (n > 1) {
    std::vector<int64_t> sections;
    if (k > 0) sections.push_back(k);
    const int index = static_cast<int>(sections.size());
    sections.push_back(1);
    if (k + 1 < n) sections.push_back(n - k - 1);
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<std::vector<Var>> outs,
        framework::AppendOp(*framework::CurrentMainProgram(), "split", {{vector.var()}},
                            vm::AttrMap().Set("axis", int64_t{0}).Set("sections", sections),
                            {static_cast<int>(sections.size())}));
    piece = outs[0][index];
  }
  return fn::Reshape(piece, {});
}

absl::StatusOr<Value> Generator::Compare(const Value& a, const Value& b) {
  switch (Uniform(4)) {
    case 0:
      return fn::LessThan(a, b);
    case 1:
      return fn::LessEqual(a, b);
    case 2:
      return fn::GreaterThan(a, b);
    default:
      return fn::GreaterEqual(a, b);
  }
}

// A bool scalar from earlier values: a comparison of two scalars (an element of a vector,
// or a constant threshold on one side), sometimes two of them combined.
absl::StatusOr<Value> Generator::Predicate(const Pool& pool) {
  auto comparison = [&]() -> absl::StatusOr<Value> {
    absl::StatusOr<Value> a = Chance(50) ? ElementOf(Pick(pool.vectors)) : Pick(pool.scalars);
    SLUICE_RETURN_IF_ERROR(a.status());
    absl::StatusOr<Value> b =
        Chance(30) ? fn::FillConstant(Shape(), Eighths(1.0f)) : Pick(pool.scalars);
    SLUICE_RETURN_IF_ERROR(b.status());
    return Compare(*a, *b);
  };
  SLUICE_ASSIGN_OR_RETURN(Value p, comparison());
  if (!Chance(20)) return p;
  SLUICE_ASSIGN_OR_RETURN(Value q, comparison());
  switch (Uniform(3)) {
    case 0:
      return fn::LogicalAnd(p, q);
    case 1:
      return fn::LogicalOr(p, q);
    default:
      return fn::LogicalNot(p);
  }
}

absl::Status Generator::Statement(Pool& pool, int depth) {
  const int r = Uniform(100);
  if (depth < shape_.depth && r < 15) return Cond(pool, depth);
  if (depth < shape_.depth && r < 30) return While(pool, depth);
  if (r < 40) {
    SLUICE_ASSIGN_OR_RETURN(Value element, ElementOf(Pick(pool.vectors)));
    pool.scalars.push_back(std::move(element));
    return absl::OkStatus();
  }
  const bool vector = Chance(70);
  SLUICE_ASSIGN_OR_RETURN(Value value, ElementOp(pool, vector));
  pool.Of(vector).push_back(std::move(value));
  return absl::OkStatus();
}

absl::Status Generator::Cond(Pool& pool, int depth) {
  SLUICE_ASSIGN_OR_RETURN(Value pred, Predicate(pool));
  std::vector<bool> kinds(1 + Uniform(2));
  for (size_t i = 0; i < kinds.size(); ++i) kinds[i] = Chance(65);
  auto branch = [&]() -> absl::StatusOr<std::vector<Value>> {
    Pool inner = pool;
    SLUICE_RETURN_IF_ERROR(Statements(inner, SubBlockOps(), depth + 1));
    std::vector<Value> results;
    for (bool vector : kinds) {
      // Sometimes an outer value, unchanged.
      results.push_back(Chance(15) ? Pick(pool.Of(vector))
                                   : PickRecent(inner.Of(vector), pool.Of(vector).size()));
    }
    return results;
  };
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> outs, fn::Cond(pred, branch, branch));
  ++conds;
  for (size_t i = 0; i < outs.size(); ++i) pool.Of(kinds[i]).push_back(outs[i]);
  return absl::OkStatus();
}

absl::Status Generator::While(Pool& pool, int depth) {
  const int trips = Uniform(shape_.max_trips + 1);
  SLUICE_ASSIGN_OR_RETURN(Value bound, fn::FillConstant(Shape(), trips));
  SLUICE_ASSIGN_OR_RETURN(Value start, fn::FillConstant(Shape(), 0.0));
  std::vector<Value> initial = {start};
  std::vector<bool> kinds(1 + Uniform(2));
  for (size_t i = 0; i < kinds.size(); ++i) {
    kinds[i] = Chance(60);
    Value value = Pick(pool.Of(kinds[i]));
    // A loop takes each variable once: a second pick of one value carries a copy.
    if (i > 0 && kinds[0] == kinds[i] && value.var() == initial[1].var()) {
      SLUICE_ASSIGN_OR_RETURN(value, fn::Scale(value, 1.0));
    }
    initial.push_back(std::move(value));
  }
  // Sometimes the loop also stops on the data: element or value of its first carried value
  // against an outer scalar.
  const bool data_stop = Chance(25);
  auto cond = [&](const std::vector<Value>& vars) -> absl::StatusOr<Value> {
    SLUICE_ASSIGN_OR_RETURN(Value counting, fn::LessThan(vars[0], bound));
    if (!data_stop) return counting;
    absl::StatusOr<Value> a = kinds[0] ? ElementOf(vars[1]) : vars[1];
    SLUICE_RETURN_IF_ERROR(a.status());
    SLUICE_ASSIGN_OR_RETURN(Value more, Compare(*a, Pick(pool.scalars)));
    return fn::LogicalAnd(counting, more);
  };
  auto body = [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
    Pool inner = pool;
    const size_t vectors_before = inner.vectors.size();
    const size_t scalars_before = inner.scalars.size();
    for (size_t i = 0; i < kinds.size(); ++i) inner.Of(kinds[i]).push_back(vars[i + 1]);
    SLUICE_ASSIGN_OR_RETURN(Value next_counter, fn::Increment(vars[0]));
    SLUICE_RETURN_IF_ERROR(Statements(inner, SubBlockOps(), depth + 1));
    std::vector<Value> next = {next_counter};
    for (size_t i = 0; i < kinds.size(); ++i) {
      const int r = Uniform(100);
      if (r < 10) {
        next.push_back(vars[i + 1]);  // unchanged
      } else if (r < 20) {
        next.push_back(Pick(pool.Of(kinds[i])));  // an outer value
      } else {
        // The current value combined with one of the body's (or a scalar).
        const bool vector = kinds[i] && Chance(70);
        const Value& other = PickRecent(inner.Of(vector), vector ? vectors_before : scalars_before);
        SLUICE_ASSIGN_OR_RETURN(Value v, Binary(vars[i + 1], other));
        next.push_back(std::move(v));
      }
    }
    return next;
  };
  fn::WhileOptions options;
  if (Chance(25)) options.max_iterations = std::max(1, shape_.max_trips);
  if (Chance(15)) options.parallel_iterations = 2 + Uniform(2);
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> outs, fn::WhileLoop(cond, body, initial, options));
  ++whiles;
  if (depth == 0) counters.push_back(outs[0]);
  for (size_t i = 0; i < kinds.size(); ++i) pool.Of(kinds[i]).push_back(outs[i + 1]);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ControlFlowProgram> GenerateControlFlowProgram(const ops::OpRegistry& registry,
                                                              const ControlFlowShape& shape,
                                                              uint64_t seed) {
  Generator generator(shape, seed);
  Program main(&registry), startup(&registry);
  ControlFlowProgram out;
  Pool pool;
  size_t fed_vectors = 0, fed_scalars = 0;
  {
    framework::ProgramGuard guard(main, startup);
    for (int i = 0; i < shape.inputs; ++i) {
      SLUICE_ASSIGN_OR_RETURN(Var x,
                              framework::Data(absl::StrCat("x", i), Shape({shape.elements})));
      pool.vectors.push_back(x);
    }
    for (int i = 0; i < 2; ++i) {
      SLUICE_ASSIGN_OR_RETURN(Var s, framework::Data(absl::StrCat("s", i), Shape()));
      pool.scalars.push_back(s);
    }
    fed_vectors = pool.vectors.size();
    fed_scalars = pool.scalars.size();
    SLUICE_RETURN_IF_ERROR(generator.Statements(pool, shape.ops, 0));
    if (generator.whiles == 0 && shape.depth > 0) {
      SLUICE_RETURN_IF_ERROR(generator.While(pool, 0));
    }
  }
  out.program = main.desc();
  out.conds = generator.conds;
  out.whiles = generator.whiles;

  // Pin about half of block 0's ops, control-flow ops included, to random streams.
  if (shape.streams > 1) {
    for (framework::ir::OpDesc& op : out.program.mutable_block(0).mutable_ops()) {
      if (generator.Chance(50)) continue;
      op.attrs.Set(std::string(framework::ir::kStreamAttr),
                   absl::StrCat("compute:", generator.Uniform(shape.streams)));
    }
  }

  absl::flat_hash_set<std::string> fetched;
  auto fetch = [&](const Value& v) {
    if (fetched.insert(v.var().name()).second) out.fetches.push_back(v.var().name());
  };
  for (size_t i = fed_vectors; i < pool.vectors.size(); ++i) fetch(pool.vectors[i]);
  for (size_t i = fed_scalars; i < pool.scalars.size(); ++i) fetch(pool.scalars[i]);
  for (const Value& v : generator.counters) fetch(v);

  for (int set = 0; set < shape.feed_sets; ++set) {
    framework::Feeds feeds;
    for (int i = 0; i < shape.inputs; ++i) {
      std::vector<float> values(static_cast<size_t>(shape.elements));
      for (float& v : values) v = generator.Eighths(1.0f);
      feeds.emplace_back(absl::StrCat("x", i),
                         HostTensor::FromVector(values, Shape({shape.elements})));
    }
    for (int i = 0; i < 2; ++i) {
      feeds.emplace_back(
          absl::StrCat("s", i),
          HostTensor::FromVector(std::vector<float>{generator.Eighths(1.0f)}, Shape()));
    }
    out.feed_sets.push_back(std::move(feeds));
  }
  return out;
}

}  // namespace sluice::stress
