// Test-only: random chains of eager ops and graph calls on two compute streams of sim:0
// (graphs on its launcher stream), each checked against the same ops run eagerly on one
// stream. A graph that updates an eager parameter in place is among them, and eager ops on
// the other stream read that parameter, so reads after writes, writes after reads and
// writes after writes all cross streams. Shared by the quick run (framework_tests) and
// the 10^3-repetition run (framework_long_tests).
#ifndef SLUICE_TESTS_FRAMEWORK_GRAPH_CHAIN_TEST_UTIL_H_
#define SLUICE_TESTS_FRAMEWORK_GRAPH_CHAIN_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/eager/stream_scope.h"
#include "framework/graph/graph.h"
#include "vm/sync_checker.h"

namespace sluice::framework::graph::testing {

struct ChainOutcome {
  int64_t repetitions = 0;
  int64_t mismatches = 0;  // values that differ from the eager reference by more than 1e-6
  int64_t errors = 0;      // calls or reads that failed
  int64_t violations = 0;  // the sync checker's count
  std::string first_mismatch;
};

// exp(-x * x) + x.
inline absl::StatusOr<Value> Bump(const Value& x) {
  SLUICE_ASSIGN_OR_RETURN(Value sq, fn::Mul(x, x));
  SLUICE_ASSIGN_OR_RETURN(Value neg, fn::Scale(sq, -1.0));
  SLUICE_ASSIGN_OR_RETURN(Value e, fn::Exp(neg));
  return fn::Add(e, x);
}
// The parameter's next value 0.9 p + 0.1 x, and the step's output x + p_next.
inline absl::StatusOr<std::pair<Value, Value>> Blend(const Value& x, const Value& p) {
  SLUICE_ASSIGN_OR_RETURN(Value a, fn::Scale(p, 0.9));
  SLUICE_ASSIGN_OR_RETURN(Value b, fn::Scale(x, 0.1));
  SLUICE_ASSIGN_OR_RETURN(Value next, fn::Add(a, b));
  SLUICE_ASSIGN_OR_RETURN(Value y, fn::Add(x, next));
  return std::make_pair(next, y);
}

// `repetitions` chains of `length` links from seed `seed`, with the checker on and sim
// jitter; `soft_sync` off shows what the checker catches without it.
inline ChainOutcome RunGraphChains(int repetitions, int length, uint64_t seed,
                                   bool soft_sync = true) {
  eager::ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.sim.max_jitter_us = 20;
  options.runtime.sim.seed = seed;
  options.runtime.enable_cuda = false;
  options.vm.check_sync = true;
  options.soft_sync = soft_sync;
  eager::Context ctx = eager::Context::Create(options).value();
  const Device sim = Device::Parse("sim:0").value();
  const StreamKey streams[2] = {StreamKey{sim, StreamType::kCompute, 0},
                                StreamKey{sim, StreamType::kCompute, 1}};
  constexpr int64_t kN = 8;
  auto upload = [&](const std::vector<float>& v) {
    return ctx.FromVector(v, Shape({kN}), sim).value();
  };
  eager::Tensor param = upload(std::vector<float>(kN, 0.5f));
  eager::Tensor param_ref = upload(std::vector<float>(kN, 0.5f));
  Graph bump =
      Graph::Create(ctx,
                    [](Trace&, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_ASSIGN_OR_RETURN(Value y, Bump(in[0]));
                      return std::vector<Value>{y};
                    },
                    {.name = "bump"})
          .value();
  Graph blend =
      Graph::Create(
          ctx,
          [&](Trace& t, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
            SLUICE_ASSIGN_OR_RETURN(Var p, t.Param(param));
            SLUICE_ASSIGN_OR_RETURN(auto out, Blend(in[0], p));
            SLUICE_RETURN_IF_ERROR(AppendOpInto(t.main(), "assign", {{out.first.var()}}, {{p}}));
            return std::vector<Value>{out.second};
          },
          {.name = "blend"})
          .value();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  ChainOutcome outcome;
  auto compare = [&](const eager::Tensor& got, const eager::Tensor& want, int rep,
                     const std::string& what) {
    absl::StatusOr<std::vector<float>> a = got.ToVector<float>();
    absl::StatusOr<std::vector<float>> b = want.ToVector<float>();
    if (!a.ok() || !b.ok()) {
      ++outcome.errors;
      return;
    }
    for (size_t i = 0; i < a->size(); ++i) {
      if (std::fabs((*a)[i] - (*b)[i]) > 1e-6f) {
        if (outcome.mismatches++ == 0) {
          outcome.first_mismatch =
              absl::StrCat("repetition ", rep, " ", what, "[", i, "]: ", (*a)[i], " vs ", (*b)[i]);
        }
        return;
      }
    }
  };
  for (int rep = 0; rep < repetitions; ++rep) {
    std::vector<float> start(kN);
    for (float& v : start) v = value(rng);
    eager::Tensor x = upload(start);
    eager::Tensor x_ref = x;
    std::vector<eager::Tensor> reads, reads_ref;  // eager reads of the parameter
    for (int link = 0; link < length; ++link) {
      const int kind = static_cast<int>(rng() % 4);
      const StreamKey& on = streams[rng() % 2];
      absl::StatusOr<Value> next;
      if (kind == 0) {  // an eager op on a random stream
        eager::StreamScope scope(on);
        next = fn::Scale(Value(x), 1.5, -0.25);
        if (next.ok()) x = next->tensor();
        x_ref = fn::Scale(Value(x_ref), 1.5, -0.25).value().tensor();
      } else if (kind == 1) {  // bump as a graph
        absl::StatusOr<std::vector<eager::Tensor>> y = bump({x});
        if (!y.ok()) {
          ++outcome.errors;
          break;
        }
        x = (*y)[0];
        x_ref = Bump(Value(x_ref)).value().tensor();
      } else if (kind == 2) {  // blend as a graph: updates the parameter in place
        absl::StatusOr<std::vector<eager::Tensor>> y = blend({x});
        if (!y.ok()) {
          ++outcome.errors;
          break;
        }
        x = (*y)[0];
        auto out = Blend(Value(x_ref), Value(param_ref)).value();
        param_ref = out.first.tensor();
        x_ref = out.second.tensor();
      } else {  // an eager read of the parameter on a random stream
        eager::StreamScope scope(on);
        reads.push_back(fn::Scale(Value(param), 2.0).value().tensor());
        reads_ref.push_back(fn::Scale(Value(param_ref), 2.0).value().tensor());
      }
    }
    compare(x, x_ref, rep, "x");
    compare(param, param_ref, rep, "param");
    for (size_t i = 0; i < reads.size(); ++i) {
      compare(reads[i], reads_ref[i], rep, absl::StrCat("read ", i));
    }
    ++outcome.repetitions;
  }
  if (!ctx.Sync().ok()) ++outcome.errors;
  outcome.violations = ctx.vm()->sync_checker()->violation_count();
  return outcome;
}

}  // namespace sluice::framework::graph::testing

#endif  // SLUICE_TESTS_FRAMEWORK_GRAPH_CHAIN_TEST_UTIL_H_
