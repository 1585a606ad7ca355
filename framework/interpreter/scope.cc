#include "framework/interpreter/scope.h"

namespace sluice::framework {

Scope& Scope::NewChild() {
  children_.push_back(std::make_unique<Scope>());
  children_.back()->parent_ = this;
  return *children_.back();
}

const vm::BlobRef* Scope::FindLocal(absl::string_view name) const {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : &it->second;
}

const vm::BlobRef* Scope::Find(absl::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_) {
    if (const vm::BlobRef* found = s->FindLocal(name)) return found;
  }
  return nullptr;
}

bool Scope::Erase(absl::string_view name) {
  auto it = vars_.find(name);
  if (it == vars_.end()) return false;
  vars_.erase(it);
  return true;
}

std::vector<std::string> Scope::LocalNames() const {
  std::vector<std::string> names;
  names.reserve(vars_.size());
  for (const auto& [name, blob] : vars_) names.push_back(name);
  return names;
}

}  // namespace sluice::framework
