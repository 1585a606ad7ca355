// Scope: where a program's variables live between and during runs — a
// tree. Persistable variables (parameters, optimizer state) live in the root scope and
// outlive every run; an interpreter's temporaries live in blobs it owns (a child scope per
// interpreter in Paddle's terms, here the interpreter itself), so a failed or cancelled run
// never leaves half-made variables in the caller's scope.
//
// A variable is a vm::BlobRef: device, dtype, shape and storage. Values are written and read
// through the Executor (which orders them against running work).
#ifndef SLUICE_FRAMEWORK_INTERPRETER_SCOPE_H_
#define SLUICE_FRAMEWORK_INTERPRETER_SCOPE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "vm/blob.h"

namespace sluice::framework {

// Thread-compatible. Children are owned by their parent; a child must not be used after its
// parent is destroyed.
class Scope {
 public:
  Scope() = default;
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  Scope* parent() const { return parent_; }
  // A new child scope, owned by this one.
  Scope& NewChild();

  // The variable in this scope or the nearest ancestor that has it; null when none does.
  const vm::BlobRef* Find(absl::string_view name) const;
  const vm::BlobRef* FindLocal(absl::string_view name) const;
  // Adds or replaces a variable of this scope.
  void Set(const std::string& name, vm::BlobRef blob) { vars_[name] = std::move(blob); }
  bool Erase(absl::string_view name);
  // This scope's variable names, sorted.
  std::vector<std::string> LocalNames() const;

 private:
  Scope* parent_ = nullptr;
  std::map<std::string, vm::BlobRef, std::less<>> vars_;
  std::vector<std::unique_ptr<Scope>> children_;
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_SCOPE_H_
