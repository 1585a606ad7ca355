// Executor I/O binding (DeviceIo, BlobFeeds, IoBinding): feeds given as blobs on the
// program's device and fetches kept there give the demo model's numbers of the host path,
// step after step, on cpu and on sim (one and two compute streams, under the sync checker);
// they move no bytes through the host (the VM's copy counters, which the host path bumps);
// an eager producer submitted right before a run, on the run's stream or another, is what
// the run reads; a fetched blob becomes an eager tensor that later ops and runs use; and bad
// device feeds are refused, naming the feed, before anything is submitted.
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/eager/context.h"
#include "framework/eager/stream_scope.h"
#include "framework/eager/tensor.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/demo_test_util.h"
#include "tests/framework/program_test_util.h"
#include "tests/vm/vm_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/producer_port.h"
#include "vm/sync_checker.h"

namespace sluice::framework::executor_io_binding_test {
namespace {

using program_test::AddVar;
using program_test::kCpu;
using program_test::kSim;
using program_test::Op;
using program_test::ScaleBy;
using program_test::Var;
using ::testing::HasSubstr;

struct Copies {
  int64_t to_device = 0;
  int64_t to_host = 0;
};

Copies CopiesOf(vm::VirtualMachine* vm) {
  const vm::VmStats stats = vm->stats();
  return {stats.host_to_device_copies, stats.device_to_host_copies};
}

eager::Tensor OnDevice(eager::Context& context, const HostTensor& value, Device device) {
  absl::StatusOr<eager::Tensor> t =
      context.FromBytes(value.dtype, value.shape, value.bytes, device);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : eager::Tensor();
}

std::vector<float> Values(const eager::Tensor& t) {
  absl::StatusOr<std::vector<float>> values = t.ToVector<float>();
  EXPECT_TRUE(values.ok()) << values.status();
  return values.ok() ? *values : std::vector<float>();
}

// --- The demo model, host-fed against device-resident. ---

struct IoCase {
  const char* name;
  Device device;
  int streams;
};

class ExecutorIoBindingTest : public ::testing::TestWithParam<IoCase> {
 protected:
  // A demo setup on the case's device, with the sync checker on (and sim jitter).
  DemoSetup NewDemo() const {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.sim.max_jitter_us = 5;
    options.vm.check_sync = true;
    return DemoSetup(options, GetParam().device, GetParam().streams);
  }
};

struct Steps {
  std::vector<float> losses;
  std::vector<float> weight;  // after the last step
};

TEST_P(ExecutorIoBindingTest, DeviceResidentFeedsAndFetchesMatchTheHostPath) {
  constexpr int kSteps = 6;
  Steps host, device;
  {
    DemoSetup demo = NewDemo();
    LinearRegression& m = demo.model;
    SLUICE_CHECK(demo.executor.Run(m.startup->desc(), {}, {}, &demo.scope).ok());
    for (int step = 0; step < kSteps; ++step) {
      absl::StatusOr<RunResult> r =
          demo.executor.Run(m.main->desc(), demo.feeds(), {m.loss, m.weight}, &demo.scope);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(r->device_fetches.empty());
      host.losses.push_back(r->fetches[0].ToVector<float>()[0]);
      host.weight = r->fetches[1].ToVector<float>();
    }
    EXPECT_EQ(demo.context.vm()->sync_checker()->violation_count(), 0)
        << demo.context.vm()->sync_checker()->status();
  }
  {
    DemoSetup demo = NewDemo();
    LinearRegression& m = demo.model;
    SLUICE_CHECK(demo.executor.Run(m.startup->desc(), {}, {}, &demo.scope).ok());
    const Device where = GetParam().device;
    eager::Tensor x = OnDevice(demo.context, LinearRegressionInput(), where);
    eager::Tensor y = OnDevice(demo.context, LinearRegressionTarget(), where);
    DeviceIo io;
    io.feeds = {{m.x, x.blob()}, {m.y, y.blob()}};
    io.fetches = {m.loss};  // the weight comes back as bytes: both kinds in one run
    for (int step = 0; step < kSteps; ++step) {
      absl::StatusOr<RunResult> r =
          demo.executor.Run(m.main->desc(), {}, io, {m.loss, m.weight}, &demo.scope);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->device_fetches.size(), 2u);
      ASSERT_NE(r->device_fetches[0], nullptr);
      EXPECT_EQ(r->device_fetches[1], nullptr);
      EXPECT_TRUE(r->fetches[0].bytes.empty());
      EXPECT_EQ(r->fetches[0].shape, r->device_fetches[0]->shape());
      EXPECT_EQ(r->device_fetches[0]->device(), where);
      absl::StatusOr<eager::Tensor> loss = demo.context.FromBlob(r->device_fetches[0]);
      ASSERT_TRUE(loss.ok()) << loss.status();
      device.losses.push_back(Values(*loss)[0]);
      device.weight = r->fetches[1].ToVector<float>();
    }
    EXPECT_EQ(demo.executor.cache_misses(), 2);  // startup and the bound main
    EXPECT_EQ(demo.context.vm()->sync_checker()->violation_count(), 0)
        << demo.context.vm()->sync_checker()->status();
  }
  EXPECT_EQ(device.losses, host.losses);
  EXPECT_EQ(device.weight, host.weight);
  for (int step = 1; step < kSteps; ++step) EXPECT_LT(host.losses[step], host.losses[step - 1]);
}

TEST_P(ExecutorIoBindingTest, DeviceResidentStepCopiesNothingThroughTheHost) {
  constexpr int kSteps = 4;
  DemoSetup demo = NewDemo();
  LinearRegression& m = demo.model;
  vm::VirtualMachine* vm = demo.context.vm();
  SLUICE_CHECK(demo.executor.Run(m.startup->desc(), {}, {}, &demo.scope).ok());
  eager::Tensor x = OnDevice(demo.context, LinearRegressionInput(), GetParam().device);
  eager::Tensor y = OnDevice(demo.context, LinearRegressionTarget(), GetParam().device);
  IoBinding io;
  io.device_feeds = {m.x, m.y};
  io.device_fetches = {m.loss};
  absl::StatusOr<PreparedRun> bound =
      demo.executor.Prepare(m.main->desc(), {m.x, m.y}, {m.loss}, &demo.scope, io);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(bound->lowering().inserted_copies, 0);
  const BlobFeeds blobs = {{m.x, x.blob()}, {m.y, y.blob()}};
  SLUICE_CHECK(demo.context.Sync().ok());  // the uploads' copies are counted as they run

  const Copies before = CopiesOf(vm);
  std::vector<eager::Tensor> losses;
  for (int step = 0; step < kSteps; ++step) {
    absl::StatusOr<RunResult> r = demo.executor.Run(*bound, {}, blobs);
    ASSERT_TRUE(r.ok()) << r.status();
    losses.push_back(demo.context.FromBlob(r->device_fetches[0]).value());
  }
  // A later eager op on the fetched losses: still on the device.
  eager::Tensor sum = losses[0];
  for (size_t i = 1; i < losses.size(); ++i) {
    sum = demo.context.Call("add", {{sum}, {losses[i]}}).value()[0];
  }
  SLUICE_CHECK(demo.context.Sync().ok());
  const Copies after = CopiesOf(vm);
  EXPECT_EQ(after.to_device - before.to_device, 0) << vm->stats().ToString();
  EXPECT_EQ(after.to_host - before.to_host, 0) << vm->stats().ToString();

  // The host path of the same step moves bytes every step (so the check above can fail):
  // the feeds are written into host blobs and the loss read out of one, plus on a device the
  // graph's memcpy_h2d of x and y and memcpy_d2h of the loss.
  absl::StatusOr<PreparedRun> host =
      demo.executor.Prepare(m.main->desc(), {m.x, m.y}, {m.loss}, &demo.scope);
  ASSERT_TRUE(host.ok()) << host.status();
  const bool on_device = GetParam().device.type() != DeviceType::kCpu;
  EXPECT_EQ(host->lowering().inserted_copies, on_device ? 3 : 0);
  for (int step = 0; step < kSteps; ++step) {
    absl::StatusOr<RunResult> r = demo.executor.Run(*host, demo.feeds());
    ASSERT_TRUE(r.ok()) << r.status();
  }
  const Copies host_path = CopiesOf(vm);
  EXPECT_EQ(host_path.to_device - after.to_device, kSteps * (on_device ? 4 : 2));
  EXPECT_EQ(host_path.to_host - after.to_host, kSteps * (on_device ? 2 : 1));
  EXPECT_EQ(vm->sync_checker()->violation_count(), 0) << vm->sync_checker()->status();
}

INSTANTIATE_TEST_SUITE_P(Devices, ExecutorIoBindingTest,
                         ::testing::Values(IoCase{"Cpu", kCpu, 1}, IoCase{"CpuTwoStreams", kCpu, 2},
                                           IoCase{"Sim", kSim, 1},
                                           IoCase{"SimTwoStreams", kSim, 2}),
                         [](const ::testing::TestParamInfo<IoCase>& info) {
                           return std::string(info.param.name);
                         });

// --- Ordering against eager work, on a small program. ---

const Shape kRow({256});

// out = 2 * x + 1, on compute stream `stream` of the program's device.
ir::ProgramDesc Affine(int stream = 0) {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  AddVar(b, Var("x", kRow));
  AddVar(b, Var("out", kRow));
  b.AppendOp(Op("scale", {{"X", {"x"}}}, {{"Out", {"out"}}},
                program_test::OnStream(absl::StrCat("compute:", stream), ScaleBy(2.0, 1.0))));
  return p;
}

// A context with one sim device (with jitter) and the checker on, and an executor on
// `device`.
struct AffineSetup {
  explicit AffineSetup(Device device = kSim, int streams = 1)
      : context(NewContext()),
        executor(&context->registry(), context->vm(), Options(device, streams)) {}
  static std::unique_ptr<eager::Context> NewContext() {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.enable_cuda = false;
    options.runtime.sim.max_jitter_us = 5;
    options.vm.check_sync = true;
    return std::make_unique<eager::Context>(eager::Context::Create(options).value());
  }
  static ExecutorOptions Options(Device device, int streams) {
    ExecutorOptions options;
    options.interpreter.device = device;
    options.interpreter.compute_streams = streams;
    return options;
  }
  // out for x, both device-resident.
  absl::StatusOr<RunResult> Run(const eager::Tensor& x) {
    DeviceIo io;
    io.feeds = {{"x", x.blob()}};
    io.fetches = {"out"};
    return executor.Run(program, {}, io, {"out"}, &scope);
  }
  int64_t violations() const { return context->vm()->sync_checker()->violation_count(); }

  std::unique_ptr<eager::Context> context;
  Executor executor;
  Scope scope;
  ir::ProgramDesc program = Affine();
};

eager::Tensor Filled(eager::Context& context, float value, Device device = kSim) {
  return context.FromVector(std::vector<float>(kRow.NumElements(), value), kRow, device).value();
}

TEST(ExecutorIoBindingOrderTest, AnEagerWriteRightBeforeTheRunIsWhatItReads) {
  // The producer's stream and the stream of the graph's reader, each compute:0 or :1. A
  // reader on another stream than the copy is ordered after it by nothing but the run's
  // wait for its device copies.
  for (const int producer : {0, 1}) {
    for (const int reader : {0, 1}) {
      SCOPED_TRACE(absl::StrCat("producer on compute:", producer, ", reader on compute:", reader));
      AffineSetup s;
      s.program = Affine(reader);
      eager::Context& ctx = *s.context;
      eager::Tensor x = Filled(ctx, 0.0f);
      eager::Tensor one = Filled(ctx, 1.0f);
      for (int step = 1; step <= 8; ++step) {
        {
          // A chain of eager work, its last op writing the feed in place, none of it waited
          // for.
          eager::StreamScope scope(
              StreamKey::Parse(absl::StrCat("sim:0/compute:", producer)).value());
          eager::Tensor acc = one;
          for (int i = 1; i < 8 * step; ++i) acc = ctx.Call("add", {{acc}, {one}}).value()[0];
          SLUICE_CHECK(ctx.CallInto("assign", {{acc}}, {{x}}).ok());
        }
        absl::StatusOr<RunResult> r = s.Run(x);
        ASSERT_TRUE(r.ok()) << r.status();
        eager::Tensor out = ctx.FromBlob(r->device_fetches[0]).value();
        EXPECT_EQ(Values(out), std::vector<float>(kRow.NumElements(), 16.0f * step + 1.0f))
            << "step " << step;
      }
      EXPECT_EQ(s.violations(), 0) << s.context->vm()->sync_checker()->status();
    }
  }
}

TEST(ExecutorIoBindingOrderTest, WorkAnotherBuilderHoldsBackIsHandedOverFirst) {
  // The graph's own builder is attached before the producer's, so a hand-over of every
  // buffer in attach order would give the engine the copy before the producer's write;
  // StageFeeds hands the producer's work over before it submits the copy.
  AffineSetup s;
  vm::VirtualMachine* vm = s.context->vm();
  IoBinding io;
  io.device_feeds = {"x"};
  io.device_fetches = {"out"};
  const PreparedRun prepared = s.executor.Prepare(s.program, {"x"}, {"out"}, &s.scope, io).value();
  vm::InstructionsBuilder producer(vm);
  vm::Stream* sim = vm->GetStream("sim:0").value();
  vm::BlobRef x = vm->NewBlob(sim, DataType::kF32, kRow).value();
  const vm::OpKernel* fill =
      s.context->registry().FindKernel("fill_constant", DeviceType::kSim, DataType::kF32).value();
  absl::StatusOr<RunResult> result = absl::UnknownError("not run");
  {
    vm::testing::SchedulerHold hold(&producer);  // nothing is handed over by the scheduler
    ASSERT_TRUE(producer.Call(*fill, {}, {x}, program_test::Fill(kRow, 5.0), sim).ok());
    EXPECT_EQ(vm::ProducerPort(vm).held_back(), 1);
    std::thread run([&] { result = s.executor.Run(prepared, {}, {{"x", x}}); });
    // Once nothing is held back the run has handed its copy over (or is about to submit it
    // behind the producer's write): let the scheduler go.
    EXPECT_TRUE(vm::testing::WaitUntil([&] { return vm::ProducerPort(vm).held_back() == 0; }));
    hold.Release();
    run.join();
  }
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Values(s.context->FromBlob(result->device_fetches[0]).value()),
            std::vector<float>(kRow.NumElements(), 11.0f));
  EXPECT_EQ(s.violations(), 0) << s.context->vm()->sync_checker()->status();
}

TEST(ExecutorIoBindingOrderTest, TheFeedMayBeOverwrittenOnceRunAsyncReturns) {
  AffineSetup s;
  eager::Context& ctx = *s.context;
  eager::Tensor x = Filled(ctx, 3.0f);
  DeviceIo io;
  io.feeds = {{"x", x.blob()}};
  io.fetches = {"out"};
  absl::StatusOr<std::shared_ptr<RunHandle>> handle =
      s.executor.RunAsync(s.program, {}, io, {"out"}, &s.scope);
  ASSERT_TRUE(handle.ok()) << handle.status();
  // The run copied x already: this write must not reach it.
  const absl::Status overwritten = ctx.CallInto("scale", {{x}}, {{x}}, ScaleBy(0.0, 100.0));
  ASSERT_TRUE(overwritten.ok()) << overwritten;
  const absl::StatusOr<RunResult>& r = (*handle)->Wait();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values(ctx.FromBlob(r->device_fetches[0]).value()),
            std::vector<float>(kRow.NumElements(), 7.0f));
  EXPECT_EQ(Values(x), std::vector<float>(kRow.NumElements(), 100.0f));
  EXPECT_EQ(s.violations(), 0) << s.context->vm()->sync_checker()->status();
}

TEST(ExecutorIoBindingOrderTest, AFetchFeedsLaterOpsAndTheNextRun) {
  // x_{k+1} = 2 x_k + 1, each run fed the previous run's fetch; every fetched tensor keeps
  // its value while later runs overwrite the graph's fetch blob.
  AffineSetup s;
  eager::Context& ctx = *s.context;
  eager::Tensor x = Filled(ctx, 0.0f);
  std::vector<eager::Tensor> outs;
  float expected = 0.0f;
  std::vector<float> expected_values;
  for (int step = 0; step < 6; ++step) {
    absl::StatusOr<RunResult> r = s.Run(x);
    ASSERT_TRUE(r.ok()) << r.status();
    x = ctx.FromBlob(r->device_fetches[0]).value();
    outs.push_back(x);
    expected = 2 * expected + 1;
    expected_values.push_back(expected);
  }
  eager::Tensor doubled = ctx.Call("add", {{outs[2]}, {outs[2]}}).value()[0];
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(Values(outs[i]), std::vector<float>(kRow.NumElements(), expected_values[i])) << i;
  }
  EXPECT_EQ(Values(doubled), std::vector<float>(kRow.NumElements(), 2 * expected_values[2]));
  // A fetched tensor is the caller's own: FromBlob of its blob gives the same tensor.
  const vm::BlobRef blob = outs[0].blob();
  eager::Tensor again = ctx.FromBlob(blob).value();
  EXPECT_EQ(again.blob().get(), outs[0].blob().get());
  EXPECT_EQ(s.violations(), 0) << s.context->vm()->sync_checker()->status();
}

TEST(ExecutorIoBindingOrderTest, APersistableFetchedDeviceResidentIsASnapshot) {
  // main: w = w + x; fetched device-resident, it is the value at the end of that run.
  ir::ProgramDesc startup;
  AddVar(startup.mutable_global_block(), Var("w", kRow, /*persistable=*/true));
  startup.mutable_global_block().AppendOp(
      Op("fill_constant", {}, {{"Out", {"w"}}}, program_test::Fill(kRow, 1.0)));
  ir::ProgramDesc main;
  ir::BlockDesc& b = main.mutable_global_block();
  AddVar(b, Var("w", kRow, /*persistable=*/true));
  AddVar(b, Var("x", kRow));
  AddVar(b, Var("t", kRow));
  b.AppendOp(Op("add", {{"X", {"w"}}, {"Y", {"x"}}}, {{"Out", {"t"}}}));
  b.AppendOp(Op("assign", {{"X", {"t"}}}, {{"Out", {"w"}}}));
  for (const int streams : {1, 2}) {
    SCOPED_TRACE(streams);
    AffineSetup s(kSim, streams);
    SLUICE_CHECK(s.executor.Run(startup, {}, {}, &s.scope).ok());
    eager::Tensor x = Filled(*s.context, 2.0f);
    DeviceIo io;
    io.feeds = {{"x", x.blob()}};
    io.fetches = {"w"};
    std::vector<eager::Tensor> snapshots;
    for (int step = 0; step < 3; ++step) {
      absl::StatusOr<RunResult> r = s.executor.Run(main, {}, io, {"w"}, &s.scope);
      ASSERT_TRUE(r.ok()) << r.status();
      snapshots.push_back(s.context->FromBlob(r->device_fetches[0]).value());
    }
    for (int step = 0; step < 3; ++step) {
      EXPECT_EQ(Values(snapshots[step]), std::vector<float>(kRow.NumElements(), 3.0f + 2 * step));
    }
    EXPECT_EQ(s.violations(), 0) << s.context->vm()->sync_checker()->status();
  }
}

// --- Errors. ---

TEST(ExecutorIoBindingErrorTest, BadDeviceFeedsAreRefusedBeforeAnythingIsSubmitted) {
  AffineSetup s;
  eager::Context& ctx = *s.context;
  eager::Tensor good = Filled(ctx, 1.0f);
  eager::Tensor on_cpu = Filled(ctx, 1.0f, kCpu);
  eager::Tensor short_row = ctx.FromVector(std::vector<float>(8, 1.0f), Shape({8}), kSim).value();
  eager::Tensor as_int =
      ctx.FromVector(std::vector<int32_t>(kRow.NumElements(), 1), kRow, kSim).value();
  std::unique_ptr<eager::Context> other = program_test::NewContext(1);
  eager::Tensor foreign = Filled(*other, 1.0f);
  // A blob whose storage a Release freed.
  vm::InstructionsBuilder builder(ctx.vm());
  vm::BlobRef released =
      ctx.vm()->NewBlob(ctx.vm()->GetStream("sim:0").value(), DataType::kF32, kRow).value();
  SLUICE_CHECK(builder.Release(released).ok());
  builder.Flush();
  SLUICE_CHECK(ctx.Sync().ok());
  // A precomputed graph's lazy blob: a persistable the startup program made.
  ir::ProgramDesc startup;
  AddVar(startup.mutable_global_block(), Var("w", kRow, /*persistable=*/true));
  startup.mutable_global_block().AppendOp(
      Op("fill_constant", {}, {{"Out", {"w"}}}, program_test::Fill(kRow, 1.0)));
  SLUICE_CHECK(s.executor.Run(startup, {}, {}, &s.scope).ok());
  const vm::BlobRef lazy = *s.scope.Find("w");

  struct Bad {
    const char* what;
    BlobFeeds feeds;
    Feeds host_feeds;
    const char* message;
    absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  };
  const std::vector<Bad> cases = {
      {"null", {{"x", nullptr}}, {}, "null blob"},
      {"wrong device", {{"x", on_cpu.blob()}}, {}, "program's device, sim:0"},
      {"wrong shape", {{"x", short_row.blob()}}, {}, "[8]"},
      {"wrong dtype", {{"x", as_int.blob()}}, {}, "i32"},
      {"another VM", {{"x", foreign.blob()}}, {}, "another VM"},
      {"released", {{"x", released}}, {}, "released"},
      {"lazy", {{"x", lazy}}, {}, "lazy"},
      {"unknown name", {{"nope", good.blob()}}, {}, "not a variable"},
      {"twice", {{"x", good.blob()}}, {{"x", program_test::Filled(kRow, 1.0f)}}, "both"},
  };
  for (const Bad& bad : cases) {
    SCOPED_TRACE(bad.what);
    SLUICE_CHECK(ctx.Sync().ok());
    const int64_t instructions = ctx.vm()->stats().instructions;
    DeviceIo io;
    io.feeds = bad.feeds;
    io.fetches = {"out"};
    absl::StatusOr<RunResult> r = s.executor.Run(s.program, bad.host_feeds, io, {"out"}, &s.scope);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), bad.code) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(bad.message));
    const std::string name = bad.feeds[0].first;
    EXPECT_THAT(r.status().message(), HasSubstr("feed '" + name + "'"));
    EXPECT_EQ(ctx.vm()->stats().instructions, instructions) << "something was submitted";
  }
  EXPECT_EQ(s.executor.cache_misses(), 1);  // only the startup program was built

  // A device fetch that is not fetched; the prepared forms: a feed given the other way.
  DeviceIo stray;
  stray.feeds = {{"x", good.blob()}};
  stray.fetches = {"x"};
  absl::StatusOr<RunResult> r = s.executor.Run(s.program, {}, stray, {"out"}, &s.scope);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("device-resident fetch 'x'"));
  IoBinding io;
  io.device_feeds = {"x"};
  absl::StatusOr<PreparedRun> prepared =
      s.executor.Prepare(s.program, {"x"}, {"out"}, &s.scope, io);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  r = s.executor.Run(*prepared, {{"x", program_test::Filled(kRow, 1.0f)}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("feed 'x' is given as a host tensor"));
  r = s.executor.Run(*prepared, {}, {{"x", on_cpu.blob()}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("feed 'x'"));
  r = s.executor.Run(*prepared, {}, BlobFeeds());
  EXPECT_THAT(r.status().message(), HasSubstr("feed 'x' is missing"));
  // And the prepared run still works.
  r = s.executor.Run(*prepared, {}, {{"x", good.blob()}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fetches[0].ToVector<float>(), std::vector<float>(kRow.NumElements(), 3.0f));
}

}  // namespace
}  // namespace sluice::framework::executor_io_binding_test
