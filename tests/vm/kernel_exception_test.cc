// A kernel that throws — at launch, or in its host work on a cpu or sim stream — becomes an
// InternalError at the next Sync naming the op and the exception's text; its outputs are
// poisoned, and the VM keeps running new work. A blob callback that throws fails the read.
#include <stdexcept>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::kernel_exception_test {
namespace {

using ::testing::HasSubstr;
using testing::VmHarness;

// Throws std::runtime_error (or an int, for a non-standard exception) at launch or in its
// host work.
class ThrowingKernel : public OpKernel {
 public:
  ThrowingKernel(bool in_host_work, bool standard)
      : in_host_work_(in_host_work), standard_(standard) {}
  absl::string_view name() const override { return "thrower"; }
  absl::Status Launch(KernelContext& ctx) const override {
    if (!in_host_work_) Throw();
    return ctx.LaunchHostWork([this]() -> absl::Status {
      Throw();
      return absl::OkStatus();
    });
  }

 private:
  void Throw() const {
    if (standard_) throw std::runtime_error("kaboom");
    throw 7;
  }
  const bool in_host_work_;
  const bool standard_;
};

class KernelExceptionTest : public ::testing::TestWithParam<std::tuple<bool, bool, const char*>> {};

TEST_P(KernelExceptionTest, BecomesAnInternalErrorNamingTheOp) {
  const auto [in_host_work, standard, stream] = GetParam();
  VmHarness h;
  ThrowingKernel thrower(in_host_work, standard);
  BlobRef x = h.NewF32(stream, 8, "x");
  BlobRef y = h.NewF32(stream, 8, "y");
  SLUICE_ASSERT_OK(h.builder->Call(thrower, {}, {x}, AttrMap(), h.S(stream)));
  const absl::Status error = h.vm->Sync();
  EXPECT_EQ(error.code(), absl::StatusCode::kInternal) << error;
  EXPECT_THAT(error.message(), HasSubstr("op 'thrower'"));
  EXPECT_THAT(error.message(),
              HasSubstr(standard ? "threw: kaboom" : "threw a non-standard exception"));
  EXPECT_TRUE(x->poisoned());
  // The VM runs new work afterwards.
  SLUICE_ASSERT_OK(h.Fill(y, 2, stream));
  EXPECT_EQ(h.Read(y).value(), std::vector<float>(8, 2.0f));
  SLUICE_EXPECT_OK(h.vm->Sync());
}

INSTANTIATE_TEST_SUITE_P(All, KernelExceptionTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values("cpu", "sim:0/compute")));

TEST(BlobCallbackExceptionTest, FailsTheAccess) {
  VmHarness h;
  BlobRef x = h.NewF32("cpu", 4, "x");
  SLUICE_ASSERT_OK(h.Fill(x, 1, "cpu"));
  absl::Status seen;
  absl::Notification done;
  SLUICE_ASSERT_OK(h.builder->AccessBlob(
      x, /*write=*/false, [](void*, size_t) -> absl::Status { throw std::logic_error("bad read"); },
      [&](const Instruction& i) {
        seen = i.status;
        done.Notify();
      }));
  done.WaitForNotification();
  EXPECT_EQ(seen.code(), absl::StatusCode::kInternal) << seen;
  EXPECT_THAT(seen.message(), HasSubstr("blob callback threw: bad read"));
  h.vm->Sync().IgnoreError();
}

}  // namespace
}  // namespace sluice::vm::kernel_exception_test
