// The row family (ops/row_ops.cc, ops/cpu/row_kernels.cc) on cpu and sim: write_row then
// read_row round-trips every dtype with i32 and i64 indices and leaves the other rows as
// they were; an index outside the buffer fails at sync, naming the op, and the VM stays
// usable; inference rejects a bad buffer, index or row before anything is enqueued.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::row_ops_test {
namespace {

using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;

class RowOpsTest : public ::testing::TestWithParam<Device> {
 protected:
  OpsHarness h;
};

TEST_P(RowOpsTest, WriteThenReadEveryDtype) {
  const Device device = GetParam();
  for (DataType dtype :
       {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64, DataType::kBool}) {
    for (DataType index_dtype : {DataType::kI32, DataType::kI64}) {
      SCOPED_TRACE(absl::StrCat(DataTypeName(dtype), " rows, ", DataTypeName(index_dtype),
                                " index, ", device.ToString()));
      const bool is_bool = dtype == DataType::kBool;
      // Buffer [4, 2, 3]: row r holds r * 10 + element (bool: element parity).
      std::vector<double> buffer_values;
      for (int r = 0; r < 4; ++r) {
        for (int e = 0; e < 6; ++e) buffer_values.push_back(is_bool ? e % 2 : r * 10 + e);
      }
      std::vector<double> row_values;
      for (int e = 0; e < 6; ++e) row_values.push_back(is_bool ? (e + 1) % 2 : 100 + e);
      vm::BlobRef buffer = h.Upload(device, dtype, Shape({4, 2, 3}), buffer_values);
      vm::BlobRef index = h.Upload(device, index_dtype, Shape(), {2});
      vm::BlobRef row = h.Upload(device, dtype, Shape({2, 3}), row_values);
      absl::StatusOr<SlotBlobs> written =
          h.Run("write_row", {{buffer}, {index}, {row}}, {}, device);
      ASSERT_TRUE(written.ok()) << written.status();
      std::vector<double> want = buffer_values;
      for (int e = 0; e < 6; ++e) want[2 * 6 + e] = row_values[e];
      EXPECT_EQ(h.Download((*written)[0][0]), want);
      EXPECT_EQ(h.Download(buffer), buffer_values) << "write_row changed its input";
      for (int r : {0, 2, 3}) {
        vm::BlobRef at = h.Upload(device, index_dtype, Shape(), {static_cast<double>(r)});
        absl::StatusOr<SlotBlobs> read = h.Run("read_row", {{(*written)[0][0]}, {at}}, {}, device);
        ASSERT_TRUE(read.ok()) << read.status();
        EXPECT_EQ((*read)[0][0]->shape(), Shape({2, 3}));
        EXPECT_EQ(h.Download((*read)[0][0]),
                  std::vector<double>(want.begin() + r * 6, want.begin() + (r + 1) * 6))
            << "row " << r;
      }
    }
  }
}

TEST_P(RowOpsTest, IndexOutsideTheBufferFailsAtSync) {
  const Device device = GetParam();
  vm::BlobRef buffer = h.Upload(device, DataType::kF32, Shape({3, 2}), {0, 1, 2, 3, 4, 5});
  vm::BlobRef row = h.Upload(device, DataType::kF32, Shape({2}), {7, 8});
  for (double bad : {3.0, -1.0}) {
    vm::BlobRef index = h.Upload(device, DataType::kI64, Shape(), {bad});
    for (const char* op : {"write_row", "read_row"}) {
      SlotBlobs inputs = {{buffer}, {index}};
      if (std::string(op) == "write_row") inputs.push_back({row});
      absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, {}, device);
      ASSERT_TRUE(out.ok()) << "the index is data, checked when the op runs: " << out.status();
      const absl::Status synced = h.vm->Sync();
      EXPECT_EQ(synced.code(), absl::StatusCode::kInvalidArgument) << synced;
      EXPECT_THAT(synced.message(), HasSubstr(absl::StrCat("'", op, "'")));
      EXPECT_THAT(synced.message(), HasSubstr(absl::StrCat("index ", bad)));
    }
  }
  vm::BlobRef index = h.Upload(device, DataType::kI32, Shape(), {1});
  absl::StatusOr<SlotBlobs> read = h.Run("read_row", {{buffer}, {index}}, {}, device);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(h.Download((*read)[0][0]), std::vector<double>({2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Devices, RowOpsTest, ::testing::Values(kCpu, kSim0),
                         [](const ::testing::TestParamInfo<Device>& info) {
                           return info.param.type() == DeviceType::kCpu ? "Cpu" : "Sim";
                         });

TEST(RowOpsSchemaTest, BadOperandsAreRejectedByInference) {
  OpsHarness h;
  vm::BlobRef buffer = h.Upload(kCpu, DataType::kF32, Shape({3, 2}), {0, 1, 2, 3, 4, 5});
  vm::BlobRef scalar = h.Upload(kCpu, DataType::kF32, Shape(), {1});
  vm::BlobRef index = h.Upload(kCpu, DataType::kI64, Shape(), {0});
  vm::BlobRef float_index = h.Upload(kCpu, DataType::kF32, Shape(), {0});
  vm::BlobRef vector_index = h.Upload(kCpu, DataType::kI64, Shape({1}), {0});
  vm::BlobRef wide_row = h.Upload(kCpu, DataType::kF32, Shape({3}), {0, 1, 2});
  vm::BlobRef f64_row = h.Upload(kCpu, DataType::kF64, Shape({2}), {0, 1});
  struct Case {
    const char* op;
    SlotBlobs inputs;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"read_row", {{scalar}, {index}}, "at least one axis"},
      {"read_row", {{buffer}, {float_index}}, "i32 or i64 scalar"},
      {"read_row", {{buffer}, {vector_index}}, "i32 or i64 scalar"},
      {"write_row", {{buffer}, {index}, {wide_row}}, "a row of Buffer"},
      {"write_row", {{buffer}, {index}, {f64_row}}, "a row of Buffer"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SlotBlobs> out = h.Run(c.op, c.inputs);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << c.op;
    EXPECT_THAT(out.status().message(), HasSubstr(c.message)) << c.op;
  }
}

}  // namespace
}  // namespace sluice::ops::row_ops_test
