// The op table (framework/builder/op_api.toml, as fn::OpApiRows()) against the registered
// schemas: every row names a schema whose operands, attributes (name and type) and outputs
// are what the generated functions send, and every attribute the schema requires is a
// parameter. CheckRow is shown to fail on rows doctored one way each, so a drift between the
// table and an op cannot pass.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "framework/builder/functional.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/op_registry.h"
#include "ops/op_schema.h"
#include "ops/standard_ops.h"

namespace sluice::framework::op_api_test {
namespace {

using ::testing::HasSubstr;

ops::AttrType SchemaTypeOf(const std::string& type) {
  if (type == "f64") return ops::AttrType::kFloat;
  if (type == "dtype") return ops::AttrType::kString;
  if (type == "ints" || type == "axes" || type == "shape") return ops::AttrType::kInts;
  return ops::AttrType::kInt;  // i64, bool, seed
}

absl::Status CheckRow(const fn::OpApiRow& row, const ops::OpRegistry& registry) {
  absl::StatusOr<const ops::OpSchema*> found = registry.FindSchema(row.op);
  if (!found.ok()) return found.status();
  const ops::OpSchema* schema = *found;
  const std::string who = absl::StrCat("fn::", row.cpp, " (op '", row.op, "')");
  const auto& inputs = schema->inputs();
  const size_t want_inputs = row.variadic ? 1 : row.inputs.size();
  if (inputs.size() != want_inputs) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, ": the table has ", want_inputs, " operand slots, the schema ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].variadic != row.variadic) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, ": operand ", i, " is variadic in one and not the other"));
    }
  }
  const auto& outputs = schema->outputs();
  const bool variadic_out = row.outputs < 0;
  const size_t want_outputs = variadic_out ? 1 : static_cast<size_t>(row.outputs);
  if (outputs.size() != want_outputs || (variadic_out && !outputs[0].variadic)) {
    return absl::FailedPreconditionError(absl::StrCat(who, ": the table has ", row.outputs,
                                                      " outputs, the schema ", outputs.size()));
  }
  for (const fn::OpApiAttr& a : row.attrs) {
    const ops::AttrDef* def = nullptr;
    for (const ops::AttrDef& d : schema->attrs()) {
      if (d.name == a.attr) def = &d;
    }
    if (def == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, ": attribute '", a.attr, "' is not in the schema"));
    }
    if (def->type != SchemaTypeOf(a.type)) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, ": attribute '", a.attr, "' is ", a.type, " in the table but ",
                       ops::AttrTypeName(def->type), " in the schema"));
    }
  }
  for (const ops::AttrDef& d : schema->attrs()) {
    if (d.default_value.has_value() || d.type == ops::AttrType::kBlock) continue;
    bool given = false;
    for (const fn::OpApiAttr& a : row.attrs) given = given || d.name == a.attr;
    if (!given) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, ": the schema requires attribute '", d.name, "'"));
    }
  }
  if (row.in_place && !schema->InPlaceSafe(0, 0)) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, ": the table writes it in place, but the schema does not declare (",
                     inputs[0].name, ", ", outputs[0].name, ") in place"));
  }
  return absl::OkStatus();
}

class OpApiTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(ops::RegisterStandardOps(&registry_).ok()); }
  ops::OpRegistry registry_;
};

TEST_F(OpApiTest, EveryRowMatchesItsSchema) {
  ASSERT_GE(fn::OpApiRows().size(), 40u);
  for (const fn::OpApiRow& row : fn::OpApiRows()) {
    const absl::Status status = CheckRow(row, registry_);
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST_F(OpApiTest, TheNewOpsAreInTheTable) {
  std::vector<std::string> names;
  for (const fn::OpApiRow& row : fn::OpApiRows()) names.push_back(row.op);
  for (const char* op : {"abs", "neg", "pow", "max", "min", "clip"}) {
    EXPECT_THAT(names, ::testing::Contains(op));
  }
}

// Each doctored row fails with a message naming what drifted.
TEST_F(OpApiTest, CheckRowFailsOnEachKindOfDrift) {
  const fn::OpApiRow* clip = nullptr;
  for (const fn::OpApiRow& row : fn::OpApiRows()) {
    if (std::string(row.op) == "clip") clip = &row;
  }
  ASSERT_NE(clip, nullptr);
  ASSERT_TRUE(CheckRow(*clip, registry_).ok());

  fn::OpApiRow unknown = *clip;
  unknown.op = "no_such_op";
  EXPECT_EQ(CheckRow(unknown, registry_).code(), absl::StatusCode::kNotFound);

  fn::OpApiRow operands = *clip;
  operands.inputs.push_back("y");
  EXPECT_THAT(CheckRow(operands, registry_).message(), HasSubstr("operand slots"));

  fn::OpApiRow variadic = *clip;
  variadic.variadic = true;
  EXPECT_THAT(CheckRow(variadic, registry_).message(), HasSubstr("variadic"));

  fn::OpApiRow outputs = *clip;
  outputs.outputs = 2;
  EXPECT_THAT(CheckRow(outputs, registry_).message(), HasSubstr("outputs"));

  fn::OpApiRow renamed = *clip;
  renamed.attrs[0].attr = "lower";
  EXPECT_THAT(CheckRow(renamed, registry_).message(), HasSubstr("'lower' is not in the schema"));

  fn::OpApiRow retyped = *clip;
  retyped.attrs[0].type = "i64";
  EXPECT_THAT(CheckRow(retyped, registry_).message(), HasSubstr("is i64 in the table"));

  fn::OpApiRow missing = *clip;
  missing.attrs.pop_back();
  EXPECT_THAT(CheckRow(missing, registry_).message(), HasSubstr("requires attribute 'max'"));

  // matmul's schema declares no pair in place: a row that writes it in place is refused.
  const fn::OpApiRow* matmul = nullptr;
  for (const fn::OpApiRow& row : fn::OpApiRows()) {
    if (std::string(row.op) == "matmul") matmul = &row;
  }
  ASSERT_NE(matmul, nullptr);
  ASSERT_TRUE(CheckRow(*matmul, registry_).ok());
  fn::OpApiRow in_place = *matmul;
  in_place.in_place = true;
  EXPECT_THAT(CheckRow(in_place, registry_).message(), HasSubstr("does not declare (X, Out)"));
}

}  // namespace
}  // namespace sluice::framework::op_api_test
