#include "framework/interpreter/control_flow/control_step.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/tensor_storage.h"

namespace sluice::framework::control_flow {
namespace {

// The predicate's value; nullopt when it has no value to read (poisoned, or never written
// because a cancel skipped its producer).
std::optional<bool> ReadPredicate(const vm::Blob* pred) {
  if (pred->poisoned() || pred->raw_storage() == nullptr) return std::nullopt;
  uint8_t byte = 0;
  std::memcpy(&byte, pred->raw_storage()->data(), 1);
  return byte != 0;
}

}  // namespace

std::unique_ptr<ControlStep> ControlStep::Cond(std::string where, vm::Blob* pred, Frame on_true,
                                               Frame on_false) {
  std::unique_ptr<ControlStep> step(new ControlStep());
  step->where_ = std::move(where);
  step->pred_ = pred;
  step->branches_[0] = std::move(on_true);
  step->branches_[1] = std::move(on_false);
  return step;
}

std::unique_ptr<ControlStep> ControlStep::While(std::string where, Loop loop) {
  std::unique_ptr<ControlStep> step(new ControlStep());
  step->where_ = std::move(where);
  step->is_loop_ = true;
  step->loop_ = std::move(loop);
  return step;
}

absl::Status ControlStep::Launch(vm::KernelContext& ctx) const {
  if (is_loop_) return RunLoop(ctx);
  const std::optional<bool> taken = ReadPredicate(pred_);
  // The executor skips a step whose input is poisoned: only a cancel leaves no value.
  if (!taken.has_value()) return absl::OkStatus();
  return branches_[*taken ? 0 : 1].steps->Launch(ctx);
}

absl::Status ControlStep::RunLoop(vm::KernelContext& ctx) const {
  SLUICE_RETURN_IF_ERROR(loop_.entry.steps->Launch(ctx));
  int parity = 0;
  for (int64_t done = 0;; ++done) {
    if (loop_.cancel != nullptr && loop_.cancel->load(std::memory_order_relaxed)) break;
    SLUICE_RETURN_IF_ERROR(loop_.check[parity].steps->Launch(ctx));
    const std::optional<bool> again = ReadPredicate(loop_.check[parity].results[0]);
    if (!again.has_value() || !*again) break;
    if (loop_.max_iterations.has_value() && done >= *loop_.max_iterations) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": more than ", *loop_.max_iterations,
                                                     " iterations (max_iterations)"));
    }
    SLUICE_RETURN_IF_ERROR(loop_.body[parity].steps->Launch(ctx));
    parity ^= 1;
  }
  return loop_.exit[parity].steps->Launch(ctx);
}

}  // namespace sluice::framework::control_flow
