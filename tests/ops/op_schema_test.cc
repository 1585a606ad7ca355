// OpSchema's in-place pairs (OpSchema::InPlace): validated against the slots, handed by the
// registry to every kernel of the op as a vm::InPlaceContract, and read by operand position
// (variadic slots pair their k-th tensors; an empty optional slot makes positions ambiguous).
#include "ops/op_schema.h"

#include "gtest/gtest.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "vm/kernel.h"

namespace sluice::ops::op_schema_test {
namespace {

absl::StatusOr<std::vector<std::vector<TensorMeta>>> NoInfer(const InferContext&) {
  return std::vector<std::vector<TensorMeta>>{};
}

TEST(OpSchemaTest, InPlacePairMustNameKnownSlots) {
  OpSchema good = OpSchema("f").Input("X").Output("Out").Infer(NoInfer).InPlace("X", "Out");
  EXPECT_TRUE(good.Validate().ok());
  EXPECT_TRUE(good.InPlaceSafe(0, 0));
  OpSchema bad = OpSchema("g").Input("X").Output("Out").Infer(NoInfer).InPlace("X", "Y");
  const absl::Status status = bad.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("(X, Y)"), std::string::npos) << status;
}

TEST(OpSchemaTest, RegistryHandsTheContractToKernels) {
  OpRegistry registry;
  ASSERT_TRUE(RegisterStandardOps(&registry).ok());
  auto contract = [&](const char* op) {
    return registry.FindKernel(op, DeviceType::kSim, DataType::kF32).value()->in_place();
  };
  const vm::InPlaceContract matmul = contract("matmul");
  EXPECT_TRUE(matmul.declared);
  EXPECT_FALSE(matmul.Allows(0, 0, 2, 1));
  EXPECT_FALSE(matmul.Allows(1, 0, 2, 1));
  const vm::InPlaceContract add = contract("add");
  EXPECT_TRUE(add.Allows(0, 0, 2, 1));
  EXPECT_TRUE(add.Allows(1, 0, 2, 1));
  for (const char* op : {"transpose", "softmax", "reduce_sum", "concat"}) {
    EXPECT_FALSE(contract(op).OutputMayAlias(0, 1, 1)) << op;
  }
  // adam: Moment1 (input 3) into Moment1Out (output 1), not into ParamOut.
  const vm::InPlaceContract adam = contract("adam");
  EXPECT_TRUE(adam.Allows(0, 0, 7, 5));
  EXPECT_TRUE(adam.Allows(3, 1, 7, 5));
  EXPECT_FALSE(adam.Allows(3, 0, 7, 5));
  // sum: X is variadic, Out plain: only the first X pairs with Out.
  const vm::InPlaceContract sum = contract("sum");
  EXPECT_TRUE(sum.Allows(0, 0, 3, 1));
  EXPECT_FALSE(sum.Allows(2, 0, 3, 1));
  // A kernel outside a registry declares nothing: everything is allowed.
  EXPECT_TRUE(vm::InPlaceContract().Allows(0, 0, 1, 1));
}

TEST(OpSchemaTest, EmptyOptionalSlotMakesPositionsAmbiguous) {
  OpRegistry registry;
  ASSERT_TRUE(registry
                  .RegisterSchema(OpSchema("h")
                                      .Input("A", /*variadic=*/false, /*optional=*/true)
                                      .Input("X")
                                      .Output("Out")
                                      .Infer(NoInfer)
                                      .InPlace("X", "Out"))
                  .ok());
  vm::InPlaceContract c = registry.FindSchema("h").value()->InPlaceContractOf();
  EXPECT_TRUE(c.Allows(1, 0, 2, 1));
  EXPECT_FALSE(c.Allows(0, 0, 1, 1));  // A empty: X is operand 0, but that cannot be told
}

}  // namespace
}  // namespace sluice::ops::op_schema_test
