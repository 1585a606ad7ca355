// Value: what the functional front end (functional.h) takes and returns, either a static
// Var of a Program or an eager Tensor. Static operands append an op to their Program; eager
// ones run it at once through their eager::Context. A value type; thread-compatible.
#ifndef SLUICE_FRAMEWORK_BUILDER_VALUE_H_
#define SLUICE_FRAMEWORK_BUILDER_VALUE_H_

#include <utility>
#include <variant>

#include "framework/builder/program.h"
#include "framework/eager/tensor.h"

namespace sluice::framework {

// A static Var or an eager Tensor. Implicitly constructible from either, so that calls read
// the same in both modes.
class Value {
 public:
  Value(Var var) : value_(std::move(var)) {}                  // NOLINT: implicit by design
  Value(eager::Tensor tensor) : value_(std::move(tensor)) {}  // NOLINT: implicit by design

  bool is_static() const { return std::holds_alternative<Var>(value_); }
  // Require is_static() (resp. !is_static()).
  const Var& var() const;
  const eager::Tensor& tensor() const;

 private:
  std::variant<Var, eager::Tensor> value_;
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_BUILDER_VALUE_H_
