// DataType: the element types a tensor may hold, their sizes and names.
#ifndef SLUICE_CORE_DATA_TYPE_H_
#define SLUICE_CORE_DATA_TYPE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

enum class DataType : uint8_t { kF32, kF64, kI32, kI64, kBool };
inline constexpr int kNumDataTypes = 5;

// Bytes per element.
size_t SizeOf(DataType dtype);
// "f32", "f64", "i32", "i64", "bool".
absl::string_view DataTypeName(DataType dtype);
// Parses a name from DataTypeName (also accepts "float32", "float64", "int32", "int64").
absl::StatusOr<DataType> ParseDataType(absl::string_view name);
bool IsFloating(DataType dtype);

// Maps a C++ element type to its DataType: DataTypeOf<float>() == DataType::kF32.
template <typename T>
constexpr DataType DataTypeOf();
template <>
constexpr DataType DataTypeOf<float>() {
  return DataType::kF32;
}
template <>
constexpr DataType DataTypeOf<double>() {
  return DataType::kF64;
}
template <>
constexpr DataType DataTypeOf<int32_t>() {
  return DataType::kI32;
}
template <>
constexpr DataType DataTypeOf<int64_t>() {
  return DataType::kI64;
}
template <>
constexpr DataType DataTypeOf<bool>() {
  return DataType::kBool;
}

}  // namespace sluice

#endif  // SLUICE_CORE_DATA_TYPE_H_
