// Tests for core/data_type.h: sizes, names, parsing and the C++ type mapping.
#include "core/data_type.h"

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::data_type_test {
namespace {

using ::testing::HasSubstr;

DataType AllTypes(int i) { return static_cast<DataType>(i); }

TEST(DataTypeTest, SizeOfMatchesTheCppType) {
  EXPECT_EQ(SizeOf(DataType::kF32), sizeof(float));
  EXPECT_EQ(SizeOf(DataType::kF64), sizeof(double));
  EXPECT_EQ(SizeOf(DataType::kI32), sizeof(int32_t));
  EXPECT_EQ(SizeOf(DataType::kI64), sizeof(int64_t));
  EXPECT_EQ(SizeOf(DataType::kBool), sizeof(bool));
}

TEST(DataTypeTest, NamesAreTheDocumentedOnes) {
  EXPECT_EQ(DataTypeName(DataType::kF32), "f32");
  EXPECT_EQ(DataTypeName(DataType::kF64), "f64");
  EXPECT_EQ(DataTypeName(DataType::kI32), "i32");
  EXPECT_EQ(DataTypeName(DataType::kI64), "i64");
  EXPECT_EQ(DataTypeName(DataType::kBool), "bool");
}

TEST(DataTypeTest, EveryTypeHasADistinctNameThatParsesBack) {
  std::set<std::string> names;
  for (int i = 0; i < kNumDataTypes; ++i) {
    const DataType dtype = AllTypes(i);
    const std::string name(DataTypeName(dtype));
    EXPECT_NE(name, "invalid") << i;
    EXPECT_GT(SizeOf(dtype), 0u) << name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    absl::StatusOr<DataType> parsed = ParseDataType(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, dtype) << name;
  }
}

TEST(DataTypeTest, ParseAcceptsLongAliases) {
  EXPECT_EQ(ParseDataType("float32").value(), DataType::kF32);
  EXPECT_EQ(ParseDataType("float64").value(), DataType::kF64);
  EXPECT_EQ(ParseDataType("int32").value(), DataType::kI32);
  EXPECT_EQ(ParseDataType("int64").value(), DataType::kI64);
}

TEST(DataTypeTest, ParseRejectsUnknownNamesAndNamesThem) {
  for (const char* bad : {"f16", "F32", "float", "i32 ", "boolean", "int8"}) {
    absl::StatusOr<DataType> parsed = ParseDataType(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr(absl::StrCat("'", bad, "'")));
    EXPECT_THAT(parsed.status().message(), HasSubstr("f32, f64, i32, i64 or bool"));
  }
  absl::StatusOr<DataType> empty = ParseDataType("");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("''"));
}

TEST(DataTypeTest, IsFloatingOnlyForF32AndF64) {
  EXPECT_TRUE(IsFloating(DataType::kF32));
  EXPECT_TRUE(IsFloating(DataType::kF64));
  EXPECT_FALSE(IsFloating(DataType::kI32));
  EXPECT_FALSE(IsFloating(DataType::kI64));
  EXPECT_FALSE(IsFloating(DataType::kBool));
}

TEST(DataTypeTest, DataTypeOfMapsCppTypesAtCompileTime) {
  static_assert(DataTypeOf<float>() == DataType::kF32);
  static_assert(DataTypeOf<double>() == DataType::kF64);
  static_assert(DataTypeOf<int32_t>() == DataType::kI32);
  static_assert(DataTypeOf<int64_t>() == DataType::kI64);
  static_assert(DataTypeOf<bool>() == DataType::kBool);
  EXPECT_EQ(SizeOf(DataTypeOf<double>()), sizeof(double));
}

}  // namespace
}  // namespace sluice::data_type_test
