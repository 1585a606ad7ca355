// Programs with control flow, written once over fn:: Values (framework/builder/control_flow.h)
// so that a test can run them eagerly, build them into a Program, and compare.
#ifndef SLUICE_TESTS_FRAMEWORK_CONTROL_FLOW_PROGRAMS_H_
#define SLUICE_TESTS_FRAMEWORK_CONTROL_FLOW_PROGRAMS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/status.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/functional.h"

namespace sluice::framework::control_flow_programs {

// half = n / 2 (made before the loop, read only inside it: an ordering the loop's node
// must carry on two streams); while i < n { i += 1; x = i < half ? 1.5 x + 0.25 :
// tanh(x) + x }, then y = x * w.
inline absl::StatusOr<std::vector<Value>> LoopWithCond(const Value& i, const Value& n,
                                                       const Value& x, const Value& w) {
  SLUICE_ASSIGN_OR_RETURN(Value half, fn::Scale(n, 0.5));
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<Value> loop,
      fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                    [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                      SLUICE_ASSIGN_OR_RETURN(Value early, fn::LessThan(vars[0], half));
                      SLUICE_ASSIGN_OR_RETURN(
                          std::vector<Value> next_x,
                          fn::Cond(
                              early,
                              [&]() -> absl::StatusOr<std::vector<Value>> {
                                SLUICE_ASSIGN_OR_RETURN(Value y, fn::Scale(vars[1], 1.5, 0.25));
                                return std::vector<Value>{y};
                              },
                              [&]() -> absl::StatusOr<std::vector<Value>> {
                                SLUICE_ASSIGN_OR_RETURN(Value t, fn::Tanh(vars[1]));
                                SLUICE_ASSIGN_OR_RETURN(Value z, fn::Add(t, vars[1]));
                                return std::vector<Value>{z};
                              }));
                      return std::vector<Value>{next_i, next_x[0]};
                    },
                    {i, x}));
  SLUICE_ASSIGN_OR_RETURN(Value y, fn::Mul(loop[1], w));
  return std::vector<Value>{loop[0], y};
}

// Outer: while i < 3 { y = x; inner: while j < 2 { y = y + x + base; j++ }; x = y; i++ },
// where x inside the inner loop is the outer loop's current value: each outer iteration
// maps x to 3x + 2 base, so three give 27x + 26 base.
inline absl::StatusOr<std::vector<Value>> Nested(const Value& i0, const Value& j0, const Value& x0,
                                                 const Value& base) {
  auto below = [](double n) {
    return [n](const std::vector<Value>& vars) -> absl::StatusOr<Value> {
      SLUICE_ASSIGN_OR_RETURN(Value bound, fn::Scale(vars[0], 0.0, n));
      return fn::LessThan(vars[0], bound);
    };
  };
  return fn::WhileLoop(
      below(3),
      [&](const std::vector<Value>& outer) -> absl::StatusOr<std::vector<Value>> {
        SLUICE_ASSIGN_OR_RETURN(
            std::vector<Value> inner,
            fn::WhileLoop(
                below(2),
                [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                  SLUICE_ASSIGN_OR_RETURN(Value j, fn::Increment(vars[0]));
                  SLUICE_ASSIGN_OR_RETURN(Value y, fn::Add(vars[1], outer[1]));
                  SLUICE_ASSIGN_OR_RETURN(Value z, fn::Add(y, base));
                  return std::vector<Value>{j, z};
                },
                {j0, outer[1]}));
        SLUICE_ASSIGN_OR_RETURN(Value i, fn::Increment(outer[0]));
        return std::vector<Value>{i, inner[1]};
      },
      {i0, x0});
}

// The benchmark's loop: while i < n { i += 1; x = x * 1.0001 + 0.5 }; returns (i, x).
inline absl::StatusOr<std::vector<Value>> CountingLoop(const Value& i, const Value& n,
                                                       const Value& x) {
  return fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                       [](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                         SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                         SLUICE_ASSIGN_OR_RETURN(Value next_x, fn::Scale(vars[1], 1.0001, 0.5));
                         return std::vector<Value>{next_i, next_x};
                       },
                       {i, x});
}

}  // namespace sluice::framework::control_flow_programs

#endif  // SLUICE_TESTS_FRAMEWORK_CONTROL_FLOW_PROGRAMS_H_
