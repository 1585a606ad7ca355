// Programs and eager code on an accelerator, checked against cpu with values read back
// from the device: every case runs on sim:0 (whose memory the host cannot address, as on a
// GPU) and, where a CUDA device is present, on cuda:0 (GTEST_SKIP otherwise). The binary
// carries the ctest label `gpu`; scripts/gpu_check.sh runs it on a GPU machine.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ep/cuda/cuda_device.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::framework::device_programs_test {
namespace {

using program_test::AddVar;
using program_test::Op;
using program_test::ScaleBy;
using program_test::Var;

// The accelerators a case runs on: sim:0 always, cuda:0 when a device is present.
std::vector<Device> Accelerators() {
  std::vector<Device> devices = {Device(DeviceType::kSim, 0)};
  if (ep::CudaProviderBuilt() && ep::CudaDeviceCount() > 0) {
    devices.push_back(Device(DeviceType::kCuda, 0));
  }
  return devices;
}

std::unique_ptr<eager::Context> NewContext(const Device& device) {
  eager::ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.enable_cuda = device.type() == DeviceType::kCuda;
  options.vm.check_sync = true;
  absl::StatusOr<eager::Context> context = eager::Context::Create(options);
  EXPECT_TRUE(context.ok()) << context.status();
  if (!context.ok()) return nullptr;
  return std::make_unique<eager::Context>(*std::move(context));
}

// Relative agreement within `rtol` (and an absolute floor for values near zero); NaN and
// infinities must match exactly.
void ExpectClose(const std::vector<float>& want, const std::vector<float>& got, double rtol,
                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = want[i], g = got[i];
    const bool ok = std::isfinite(w) ? std::fabs(w - g) <= rtol * std::fabs(w) + 1e-5
                                     : (std::isnan(w) ? std::isnan(g) : w == g);
    if (!ok && ++bad <= 3)
      ADD_FAILURE() << what << ": element " << i << " want " << w << " got " << g;
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(DeviceEagerTest, ResultsReadBackFromEveryDevice) {
  for (const Device& device : Accelerators()) {
    SCOPED_TRACE(device.ToString());
    std::unique_ptr<eager::Context> context = NewContext(device);
    ASSERT_NE(context, nullptr);
    const std::vector<float> a = {1, -2, 3, -4, 5, -6};
    const std::vector<float> b = {0.5f, 0.25f, -1, 2, 8, -0.125f};
    absl::StatusOr<eager::Tensor> ta = context->FromVector(a, Shape({2, 3}), device);
    absl::StatusOr<eager::Tensor> tb = context->FromVector(b, Shape({2, 3}), device);
    ASSERT_TRUE(ta.ok() && tb.ok()) << ta.status() << tb.status();
    absl::StatusOr<eager::Tensor> sum = fn::Add(*ta, *tb);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->device(), device);
    absl::StatusOr<std::vector<float>> values = sum->ToVector<float>();
    ASSERT_TRUE(values.ok()) << values.status();
    std::vector<float> want(a.size());
    for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] + b[i];
    EXPECT_EQ(*values, want);
    // The host copy is a cpu tensor in every respect: readable, and usable by cpu ops.
    absl::StatusOr<eager::Tensor> host = sum->To(Device());
    ASSERT_TRUE(host.ok()) << host.status();
    EXPECT_EQ(host->device().type(), DeviceType::kCpu);
    absl::StatusOr<eager::Tensor> twice = fn::Add(*host, *host);
    ASSERT_TRUE(twice.ok()) << twice.status();
    absl::StatusOr<std::vector<float>> doubled = twice->ToVector<float>();
    ASSERT_TRUE(doubled.ok()) << doubled.status();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*doubled)[i], 2 * want[i]);
    EXPECT_EQ(context->vm()->sync_checker()->violation_count(), 0);
  }
}

// Ops over a fed x and temporaries t0..t5 ([8, 8]) that overwrite variables as Paddle
// programs do: an op's output may be one of its own inputs (matmul with transposes,
// transpose, a row reduction broadcast back, elementwise math).
struct RandomProgram {
  ir::ProgramDesc program;
  std::vector<std::string> fetches;
};

RandomProgram MakeRandomProgram(uint32_t seed, int num_ops) {
  std::mt19937 rng(seed);
  auto below = [&](int k) { return static_cast<int>(rng() % static_cast<uint32_t>(k)); };
  const Shape shape({8, 8});
  constexpr int kTemps = 6;
  RandomProgram r;
  ir::BlockDesc& b = r.program.mutable_global_block();
  AddVar(b, Var("x", shape));
  for (int i = 0; i < kTemps; ++i) AddVar(b, Var(absl::StrCat("t", i), shape));
  std::vector<std::string> written = {"x"};
  for (int i = 0; i < num_ops; ++i) {
    const std::string x = written[below(static_cast<int>(written.size()))];
    const std::string y = written[below(static_cast<int>(written.size()))];
    // Half the ops write over their first input when it is a temporary.
    const std::string out = (x != "x" && below(2) == 0) ? x : absl::StrCat("t", below(kTemps));
    vm::AttrMap attrs;
    std::string type;
    ir::OpSlots inputs = {{"X", {x}}};
    switch (below(6)) {
      case 0:
        type = "matmul";
        inputs.push_back({"Y", {y}});
        attrs.Set("transpose_x", static_cast<int64_t>(below(2)));
        attrs.Set("transpose_y", static_cast<int64_t>(below(2)));
        break;
      case 1:
        type = "tanh";
        break;
      case 2:
        type = "scale";
        attrs = ScaleBy(0.5, -0.25);
        break;
      case 3:
        type = "add";
        inputs.push_back({"Y", {y}});
        break;
      case 4:
        type = "transpose";
        attrs.Set("perm", std::vector<int64_t>{1, 0});
        break;
      default:
        type = "sub";
        inputs.push_back({"Y", {y}});
        break;
    }
    b.AppendOp(Op(type, std::move(inputs), {{"Out", {out}}}, attrs));
    if (std::find(written.begin(), written.end(), out) == written.end()) written.push_back(out);
  }
  for (const std::string& name : written) {
    if (name != "x") r.fetches.push_back(name);
  }
  return r;
}

// 30 random programs with overwritten operands, on each accelerator against cpu (rtol 1e-4),
// compiled (the default) and not.
TEST(DeviceProgramTest, RandomProgramsWithOverwritesMatchCpu) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = std::sin(0.37f * i) * 1.5f;
  const Feeds feeds = {{"x", HostTensor::FromVector(x, Shape({8, 8}))}};
  for (const Device& device : Accelerators()) {
    SCOPED_TRACE(device.ToString());
    std::unique_ptr<eager::Context> context = NewContext(device);
    ASSERT_NE(context, nullptr);
    auto run = [&](const RandomProgram& r, const Device& on, bool compile) {
      ExecutorOptions options;
      options.interpreter.device = on;
      options.interpreter.compile_subgraphs = compile;
      Executor executor(&context->registry(), context->vm(), options);
      Scope scope;
      std::vector<std::vector<float>> out;
      absl::StatusOr<RunResult> result = executor.Run(r.program, feeds, r.fetches, &scope);
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) return out;
      for (const HostTensor& t : result->fetches) out.push_back(t.ToVector<float>());
      return out;
    };
    int checked = 0;
    for (uint32_t seed = 1; seed <= 30; ++seed) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed);
      const RandomProgram r = MakeRandomProgram(seed, 24);
      const std::vector<std::vector<float>> want = run(r, Device(), /*compile=*/false);
      ASSERT_EQ(want.size(), r.fetches.size());
      for (bool compile : {true, false}) {
        const std::vector<std::vector<float>> got = run(r, device, compile);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          ExpectClose(want[i], got[i], 1e-4,
                      absl::StrCat(r.fetches[i], compile ? " (compiled)" : " (unfused)"));
        }
        ++checked;
      }
    }
    EXPECT_EQ(checked, 60);
    EXPECT_EQ(context->vm()->sync_checker()->violation_count(), 0);
  }
}

}  // namespace
}  // namespace sluice::framework::device_programs_test
