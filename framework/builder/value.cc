#include "framework/builder/value.h"

#include "core/status.h"

namespace sluice::framework {

const Var& Value::var() const {
  SLUICE_CHECK(is_static());
  return std::get<Var>(value_);
}

const eager::Tensor& Value::tensor() const {
  SLUICE_CHECK(!is_static());
  return std::get<eager::Tensor>(value_);
}

}  // namespace sluice::framework
