// DependencyBuilder: the happens-before edges among a program's ops, from
// what each op reads and writes, in program order:
//   RAW  a reader depends on the variable's last writer;
//   WAR  a writer depends on every reader since the last write;
//   WAW  a writer depends on the last writer;
//   random ops keep their program order among themselves (a seed sequence must not be
//   reordered), as an implicit edge from the previous random op.
// Then the transitive-edge shrink: an edge a→b is dropped when b already depends on a
// through another kept edge. Reachability is answered by a depth-first walk over kept edges
// confined to indices between the lowest predecessor and b (edges point forward in program
// order), so memory stays linear in the edges — never Paddle's n×n matrix. A walk that
// exceeds `max_walk` nodes stops and keeps the remaining edges: a redundant edge costs a
// little scheduling, never correctness.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_DEPENDENCY_BUILDER_H_
#define SLUICE_FRAMEWORK_INTERPRETER_DEPENDENCY_BUILDER_H_

#include <cstdint>
#include <vector>

namespace sluice::framework {

// One op's accesses, by dense variable id. A variable in both lists is updated in place.
struct OpAccess {
  std::vector<int> reads;
  std::vector<int> writes;
  bool random = false;
};

struct DependencyStats {
  int64_t raw = 0;  // edges found per rule, before de-duplication and shrink
  int64_t war = 0;
  int64_t waw = 0;
  int64_t random = 0;
  int64_t unique = 0;  // distinct edges before the shrink
  int64_t shrunk = 0;  // dropped as implied by others
  int64_t kept = 0;
};

struct DependencyGraph {
  // predecessors[b]: the kept edges a→b, sorted ascending (every a < b).
  std::vector<std::vector<int>> predecessors;
  DependencyStats stats;
};

// Pure function; thread-safe. Variable ids must be in [0, num_vars).
DependencyGraph BuildDependencies(const std::vector<OpAccess>& ops, int num_vars,
                                  int max_walk = 4096);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_DEPENDENCY_BUILDER_H_
