// GradPlan: an op's gradient as eager autograd runs it, compiled once per op kind from the
// grad maker in its schema (the same one static autodiff uses). The grad maker names
// variables; the plan replaces each name by where its tensor comes from at backward time:
// a forward input, a forward output, or the gradient of a forward output. Each grad op
// writes gradients of forward inputs (a grad maker writes nothing else).
//
// GradPlanCache compiles and keeps plans by (op, attributes, slot sizes): a grad maker may
// read attributes (matmul's transposes) and slot sizes (sum's inputs), never dtypes or
// shapes. Thread-safe; plans are immutable and live as long as the cache.
#ifndef SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_GRAD_PLAN_H_
#define SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_GRAD_PLAN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/plain_mutex.h"
#include "ops/op_registry.h"
#include "ops/op_schema.h"
#include "vm/attrs.h"

namespace sluice::autograd::internal {

// Where a grad op's input comes from; `index` counts flattened forward inputs or outputs.
struct GradRef {
  enum class Kind : uint8_t { kInput, kOutput, kOutputGrad };
  Kind kind = Kind::kInput;
  int index = 0;
};

struct GradStep {
  std::string type;
  vm::AttrMap attrs;
  // Per input slot of the grad op's schema, in schema order.
  std::vector<std::vector<GradRef>> inputs;
  std::vector<bool> optional;  // per input slot: may be left empty
  // The grad op's outputs, flattened in schema order: the forward input each is the
  // gradient of (-1: an output the grad maker left unnamed, dropped).
  std::vector<int> writes;
  std::vector<int> output_slots;  // outputs per output slot of the grad op's schema
};

struct GradPlan {
  std::string op;  // the forward op's name
  // Set when the op has no gradient (no grad maker, or one that does not compile): backward
  // through it fails with this error, naming the op.
  absl::Status error;
  std::vector<GradStep> steps;
  std::vector<bool> reads_input;   // per forward input: a step reads its value
  std::vector<bool> reads_output;  // per forward output
};

class GradPlanCache {
 public:
  explicit GradPlanCache(const ops::OpRegistry* registry) : registry_(registry) {}

  // The plan of `op` called with `attrs` (as given: defaults are applied here) on inputs
  // and outputs of `input_slots` / `output_slots` tensors per schema slot. Never null.
  const GradPlan* Get(absl::string_view op, const vm::AttrMap& attrs,
                      absl::Span<const int> input_slots, absl::Span<const int> output_slots)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    vm::AttrMap attrs;
    std::vector<int> input_slots, output_slots;
    std::unique_ptr<GradPlan> plan;
  };
  GradPlan Compile(absl::string_view op, const vm::AttrMap& attrs,
                   absl::Span<const int> input_slots, absl::Span<const int> output_slots) const;

  const ops::OpRegistry* const registry_;
  PlainMutex mu_;
  absl::flat_hash_map<std::string, std::vector<Entry>> plans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::autograd::internal

#endif  // SLUICE_FRAMEWORK_AUTOGRAD_INTERNAL_GRAD_PLAN_H_
