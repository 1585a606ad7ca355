// VirtualMachine::WriteIdleHostBlobs: copies bytes into idle host blobs and clears their
// poison; checks every write before it writes any; with a recorder attached, goes through
// instructions so the record carries the bytes.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vm/vm_test_util.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::idle_host_write_test {
namespace {

using ::testing::HasSubstr;
using testing::VmHarness;

std::vector<uint8_t> BytesOf(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(IdleHostWriteTest, CopiesTheBytesAndClearsPoison) {
  for (const char* stream : {"cpu", "sim:0/compute"}) {
    SCOPED_TRACE(stream);
    VmHarness h;
    BlobRef a = h.NewF32(stream, 3, "a");
    BlobRef b = h.NewF32(stream, 2, "b");
    SLUICE_ASSERT_OK(h.vm->Sync());
    a->Poison(absl::DataLossError("stale"));
    const std::vector<uint8_t> av = BytesOf({1, 2, 3});
    const std::vector<uint8_t> bv = BytesOf({4, 5});
    const VirtualMachine::HostBlobWrite writes[] = {{&a, av}, {&b, bv}};
    SLUICE_ASSERT_OK(h.vm->WriteIdleHostBlobs(writes));
    EXPECT_FALSE(a->poisoned());
    EXPECT_EQ(h.Read(a).value(), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(h.Read(b).value(), (std::vector<float>{4, 5}));
  }
}

TEST(IdleHostWriteTest, ASizeMismatchNamesTheBlobAndWritesNothing) {
  VmHarness h;
  BlobRef a = h.NewF32("cpu", 2, "a");
  BlobRef b = h.NewF32("cpu", 2, "b");
  SLUICE_ASSERT_OK(h.Fill(a, 7, "cpu"));
  SLUICE_ASSERT_OK(h.vm->Sync());
  const std::vector<uint8_t> good = BytesOf({1, 2});
  const std::vector<uint8_t> bad = BytesOf({1, 2, 3});
  const VirtualMachine::HostBlobWrite writes[] = {{&a, good}, {&b, bad}};
  const absl::Status status = h.vm->WriteIdleHostBlobs(writes);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("'b'"));
  EXPECT_THAT(status.message(), HasSubstr("got 12"));
  EXPECT_EQ(h.Read(a).value(), (std::vector<float>{7, 7}));  // the good write did not happen
}

TEST(IdleHostWriteTest, ARecordedWriteIsAnInstruction) {
  const std::string path = ::testing::TempDir() + "/idle_host_write.rec";
  VmOptions options;
  options.record_path = path;
  VmHarness h(options);
  BlobRef a = h.NewF32("cpu", 2, "a");
  SLUICE_ASSERT_OK(h.vm->Sync());
  const int64_t before = h.vm->stats().access_blobs;
  const std::vector<uint8_t> av = BytesOf({8, 9});
  const VirtualMachine::HostBlobWrite writes[] = {{&a, av}};
  SLUICE_ASSERT_OK(h.vm->WriteIdleHostBlobs(writes));
  EXPECT_EQ(h.vm->stats().access_blobs, before + 1);
  EXPECT_EQ(h.Read(a).value(), (std::vector<float>{8, 9}));
}

}  // namespace
}  // namespace sluice::vm::idle_host_write_test
