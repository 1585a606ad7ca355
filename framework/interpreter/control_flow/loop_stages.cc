#include "framework/interpreter/control_flow/loop_stages.h"

#include <cstddef>

#include "absl/container/flat_hash_map.h"

namespace sluice::framework::control_flow {

LoopStages SplitLoopBody(const std::vector<StageCall>& calls, const std::vector<vm::Blob*>& current,
                         const std::vector<vm::Blob*>& next, const std::vector<bool>& check_reads) {
  LoopStages out;
  const size_t n = calls.size();
  absl::flat_hash_map<const vm::Blob*, int> writer;  // blob -> its one writing call
  for (size_t c = 0; c < n; ++c) {
    if (calls[c].random) {
      out.why = "the body draws random numbers, in iteration order";
      return out;
    }
    for (vm::Blob* blob : calls[c].writes) {
      if (!writer.emplace(blob, static_cast<int>(c)).second) {
        out.why = "a variable of the body is written twice";
        return out;
      }
    }
  }
  absl::flat_hash_map<const vm::Blob*, int> var_of;  // current value -> loop variable
  for (size_t i = 0; i < current.size(); ++i) var_of.emplace(current[i], static_cast<int>(i));
  // The call that wrote what call c reads (-1: from outside the iteration), per read.
  std::vector<std::vector<int>> producer(n);
  for (size_t c = 0; c < n; ++c) {
    for (vm::Blob* blob : calls[c].reads) {
      auto it = writer.find(blob);
      producer[c].push_back(it != writer.end() && it->second < static_cast<int>(c) ? it->second
                                                                                   : -1);
    }
  }
  // Stage 0: the closure of the driver variables' next values, to a fixed point.
  std::vector<bool> driver(check_reads);
  driver.resize(current.size(), false);
  std::vector<int> stage(n, -1);
  for (bool grew = true; grew;) {
    grew = false;
    std::vector<int> work;
    for (size_t i = 0; i < next.size(); ++i) {
      if (!driver[i]) continue;
      auto it = writer.find(next[i]);
      if (it != writer.end() && stage[it->second] != 0) {
        stage[it->second] = 0;
        work.push_back(it->second);
      }
    }
    while (!work.empty()) {
      const int c = work.back();
      work.pop_back();
      for (size_t r = 0; r < calls[c].reads.size(); ++r) {
        const int p = producer[c][r];
        if (p >= 0) {
          if (stage[p] != 0) {
            stage[p] = 0;
            work.push_back(p);
          }
          continue;
        }
        auto var = var_of.find(calls[c].reads[r]);
        if (var != var_of.end() && !driver[var->second]) {
          driver[var->second] = true;
          grew = true;
        }
      }
    }
  }
  // Stages 1 and 2, in program order (a producer is decided before its readers).
  for (size_t c = 0; c < n; ++c) {
    if (stage[c] == 0) continue;
    bool independent = true;
    for (size_t r = 0; r < calls[c].reads.size() && independent; ++r) {
      const int p = producer[c][r];
      if (p >= 0) {
        independent = stage[p] <= 1;
        continue;
      }
      auto var = var_of.find(calls[c].reads[r]);
      independent = var == var_of.end() || driver[var->second];
    }
    stage[c] = independent ? 1 : 2;
    if (independent) ++out.independent_calls;
  }
  if (out.independent_calls == 0) {
    out.why = "no call of the body is independent of the previous iteration";
    return out;
  }
  out.stage = std::move(stage);
  return out;
}

}  // namespace sluice::framework::control_flow
