// The aliasing rule (docs/design.md, "Aliasing"): an op naming one of its inputs as its
// output, in a pair its schema does not declare in place, still computes what it computes
// on distinct operands — in a program (the interpreter writes a fresh temporary and copies
// it back) and in an eager CallInto (the dispatcher does the same). On sim, such a kernel
// would see its output poisoned first (ops/cpu/host_kernel.cc), so these tests fail there
// without the fresh outputs; the sync checker reports a kernel launched with an undeclared
// alias, naming the op and the operands.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/stream_id.h"
#include "framework/eager/context.h"
#include "framework/eager/tensor.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/sync_checker.h"

namespace sluice::framework::aliasing_test {
namespace {

using program_test::kCpu;
using program_test::kSim;
using ::testing::HasSubstr;

std::vector<float> Values(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// What the issue's program does: v8 = a; v8 = matmul(v8^T, b); fetch v8.
constexpr char kMatmulIntoX[] = R"(sluice-program 2
block 0 parent -1
var a dtype=f32 shape=[3,3] persistable=0 parameter=0 stop_gradient=1
var b dtype=f32 shape=[3,3] persistable=0 parameter=0 stop_gradient=1
var v8 dtype=f32 shape=[3,3] persistable=0 parameter=0 stop_gradient=1
op assign in X=a out Out=v8 attrs
op matmul in X=v8 Y=b out Out=v8 attrs transpose_x=i:1,transpose_y=i:0
end
)";

// Runs `text` on `device` with check_sync on; no violation may be found.
std::vector<float> RunProgram(const std::string& text, const Device& device, const Feeds& feeds,
                              const std::string& fetch) {
  std::unique_ptr<eager::Context> context =
      program_test::NewContext(/*sim_devices=*/1, /*check_sync=*/true);
  absl::StatusOr<ir::ProgramDesc> program = ir::ProgramDesc::FromText(text);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  ExecutorOptions options;
  options.interpreter.device = device;
  Executor executor(&context->registry(), context->vm(), options);
  Scope scope;
  absl::StatusOr<RunResult> result = executor.Run(*program, feeds, {fetch}, &scope);
  EXPECT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(context->vm()->sync_checker()->status().ok())
      << context->vm()->sync_checker()->status();
  if (!result.ok()) return {};
  return result->fetches[0].ToVector<float>();
}

TEST(AliasingTest, ProgramMatmulIntoItsInputMatchesCpuOnSim) {
  const Shape shape({3, 3});
  const Feeds feeds = {{"a", HostTensor::FromVector(Values(9, 1), shape)},
                       {"b", HostTensor::FromVector(Values(9, 2), shape)}};
  const std::vector<float> cpu = RunProgram(kMatmulIntoX, kCpu, feeds, "v8");
  const std::vector<float> sim = RunProgram(kMatmulIntoX, kSim, feeds, "v8");
  ASSERT_EQ(cpu.size(), 9u);
  EXPECT_EQ(sim, cpu);
  // And cpu's is the product itself: out[i][j] = sum_k a[k][i] * b[k][j].
  const std::vector<float> a = Values(9, 1), b = Values(9, 2);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      float want = 0;
      for (int k = 0; k < 3; ++k) want += a[k * 3 + i] * b[k * 3 + j];
      EXPECT_NEAR(cpu[i * 3 + j], want, 1e-5f) << i << "," << j;
    }
  }
}

TEST(AliasingTest, EagerCallIntoAnInputMatchesAFreshOutput) {
  std::unique_ptr<eager::Context> context =
      program_test::NewContext(/*sim_devices=*/1, /*check_sync=*/true);
  const Shape shape({4, 4});
  absl::StatusOr<eager::Tensor> x = context->FromVector(Values(16, 3), shape, kSim);
  absl::StatusOr<eager::Tensor> y = context->FromVector(Values(16, 4), shape, kSim);
  ASSERT_TRUE(x.ok() && y.ok());
  const vm::AttrMap attrs = vm::AttrMap().Set("transpose_x", int64_t{1});
  absl::StatusOr<std::vector<eager::Tensor>> fresh = context->Call("matmul", {{*x}, {*y}}, attrs);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::StatusOr<std::vector<float>> want = (*fresh)[0].ToVector<float>();
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(context->CallInto("matmul", {{*x}, {*y}}, {{*x}}, attrs).ok());
  absl::StatusOr<std::vector<float>> got = x->ToVector<float>();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
  // sgd declares Param -> ParamOut in place: no copy, no report.
  absl::StatusOr<eager::Tensor> lr =
      context->FromVector(std::vector<float>{0.5f}, Shape({1}), kSim);
  ASSERT_TRUE(lr.ok());
  ASSERT_TRUE(context->CallInto("sgd", {{*x}, {*y}, {*lr}}, {{*x}}).ok());
  ASSERT_TRUE(context->Sync().ok());
  EXPECT_EQ(context->vm()->sync_checker()->violation_count(), 0);
}

TEST(AliasingTest, CheckedModeNamesTheOpAndTheOperands) {
  std::unique_ptr<eager::Context> context =
      program_test::NewContext(/*sim_devices=*/1, /*check_sync=*/true);
  vm::VirtualMachine* vm = context->vm();
  absl::StatusOr<vm::Stream*> stream = vm->GetStream(StreamKey{kSim, StreamType::kCompute, 0});
  ASSERT_TRUE(stream.ok());
  const Shape shape({2, 2});
  absl::StatusOr<vm::BlobRef> x = vm->NewBlob(*stream, DataType::kF32, shape, "x");
  absl::StatusOr<vm::BlobRef> y = vm->NewBlob(*stream, DataType::kF32, shape, "y");
  ASSERT_TRUE(x.ok() && y.ok());
  absl::StatusOr<const vm::OpKernel*> matmul =
      context->registry().FindKernel("matmul", DeviceType::kSim, DataType::kF32);
  ASSERT_TRUE(matmul.ok());
  vm::InstructionsBuilder builder(vm);
  // Y written over: output 0 is input 1, a pair matmul does not declare.
  ASSERT_TRUE(builder
                  .Call(**matmul, {*x, *y}, {*y},
                        vm::AttrMap().Set("transpose_x", int64_t{0}).Set("transpose_y", int64_t{0}),
                        *stream)
                  .ok());
  ASSERT_TRUE(vm->Sync().ok());
  const absl::Status status = vm->sync_checker()->status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("op 'matmul'"));
  EXPECT_THAT(status.message(), HasSubstr("blob"));
  EXPECT_THAT(status.message(), HasSubstr("'y'"));
  EXPECT_THAT(status.message(), HasSubstr("output 0"));
  EXPECT_THAT(status.message(), HasSubstr("input 1"));
  EXPECT_EQ(vm->sync_checker()->alias_count(), 1);
}

// A non-safe op over square operands, written into its own input `v` (X, or Y for matmul).
struct AliasCase {
  std::string op;
  std::string attrs;  // the program text's attrs field
  bool binary = false;
  bool alias_y = false;
};

std::string CaseProgram(const AliasCase& c, int n, bool aliased) {
  const std::string shape = "[" + std::to_string(n) + "," + std::to_string(n) + "]";
  std::string text = "sluice-program 2\nblock 0 parent -1\n";
  for (const char* var : {"a", "b", "v", "r"}) {
    text += std::string("var ") + var + " dtype=f32 shape=" + shape +
            " persistable=0 parameter=0 stop_gradient=1\n";
  }
  text += "op assign in X=a out Out=v attrs\n";
  const std::string x = c.alias_y ? "b" : "v";
  const std::string y = c.alias_y ? "v" : "b";
  text += "op " + c.op + " in X=" + x + (c.binary ? " Y=" + y : "") +
          " out Out=" + (aliased ? "v" : "r") + " attrs " + c.attrs + "\n";
  if (!aliased) text += "op assign in X=r out Out=v attrs\n";
  return text + "end\n";
}

TEST(AliasingTest, RandomAliasedNonSafeOpsMatchUnaliasedOnes) {
  const std::vector<AliasCase> cases = {
      {"matmul", "transpose_x=i:0,transpose_y=i:0", true, false},
      {"matmul", "transpose_x=i:1,transpose_y=i:0", true, false},
      {"matmul", "transpose_x=i:0,transpose_y=i:1", true, true},
      {"matmul", "transpose_x=i:1,transpose_y=i:1", true, true},
      {"transpose", "perm=v:1;0", false, false},
      {"softmax", "", false, false},
      {"log_softmax", "axis=i:0", false, false},
  };
  std::mt19937 rng(20261128);
  for (int trial = 0; trial < 8; ++trial) {
    const AliasCase& c = cases[rng() % cases.size()];
    const int n = 2 + static_cast<int>(rng() % 5);
    const Shape shape({n, n});
    const Feeds feeds = {{"a", HostTensor::FromVector(Values(n * n, rng()), shape)},
                         {"b", HostTensor::FromVector(Values(n * n, rng()), shape)}};
    const Device device = trial % 2 == 0 ? kSim : kCpu;
    SCOPED_TRACE(c.op + " " + c.attrs + " n=" + std::to_string(n) + " on " + device.ToString());
    const std::vector<float> want = RunProgram(CaseProgram(c, n, false), device, feeds, "v");
    const std::vector<float> got = RunProgram(CaseProgram(c, n, true), device, feeds, "v");
    ASSERT_EQ(want.size(), static_cast<size_t>(n * n));
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace sluice::framework::aliasing_test
