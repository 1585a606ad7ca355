#include "core/data_type.h"

#include "absl/strings/str_cat.h"

namespace sluice {

size_t SizeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return 4;
    case DataType::kF64:
      return 8;
    case DataType::kI32:
      return 4;
    case DataType::kI64:
      return 8;
    case DataType::kBool:
      return 1;
  }
  return 0;
}

absl::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return "f32";
    case DataType::kF64:
      return "f64";
    case DataType::kI32:
      return "i32";
    case DataType::kI64:
      return "i64";
    case DataType::kBool:
      return "bool";
  }
  return "invalid";
}

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  if (name == "f32" || name == "float32") return DataType::kF32;
  if (name == "f64" || name == "float64") return DataType::kF64;
  if (name == "i32" || name == "int32") return DataType::kI32;
  if (name == "i64" || name == "int64") return DataType::kI64;
  if (name == "bool") return DataType::kBool;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown data type '", name, "' (expected f32, f64, i32, i64 or bool)"));
}

bool IsFloating(DataType dtype) { return dtype == DataType::kF32 || dtype == DataType::kF64; }

}  // namespace sluice
