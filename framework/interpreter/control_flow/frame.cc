#include "framework/interpreter/control_flow/frame.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/tensor_storage.h"

namespace sluice::framework::control_flow {

std::optional<bool> ReadPredicate(const vm::Blob* pred) {
  if (pred->poisoned() || pred->raw_storage() == nullptr) return std::nullopt;
  uint8_t byte = 0;
  std::memcpy(&byte, pred->raw_storage()->data(), 1);
  return byte != 0;
}

void PoisonAll(absl::Span<vm::Blob* const> blobs, const absl::Status& cause) {
  for (vm::Blob* blob : blobs) blob->Poison(cause);
}

std::string LoopIteration::Describe() const {
  std::string text =
      absl::StrCat("iteration ", value_.load(std::memory_order_relaxed), " of ", where_);
  if (parent_ != nullptr) absl::StrAppend(&text, ", ", parent_->Describe());
  return text;
}

std::string StepOrigin::Describe() const {
  if (loop_ == nullptr) return where_;
  return absl::StrCat(where_, ", ", loop_->Describe());
}

}  // namespace sluice::framework::control_flow
