// sluice._sluice VM tools (stress/): replaying recorded instruction streams and the
// stress runs with the sync checker, for Python users who test stream synchronization
// (sluice.vm). Each returns the tool's JSON line plus the first problem it saw; every
// call creates a Runtime and VM of its own and releases the GIL while it runs.
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "python/src/bindings.h"
#include "stress/eager_stress.h"
#include "stress/record_replay.h"
#include "stress/stress_control_flow_runner.h"

namespace sluice::python {
namespace {

vm::VmOptions::Scheduling ParseScheduling(const std::string& name) {
  if (name == "dedicated") return vm::VmOptions::Scheduling::kDedicatedThread;
  if (name == "caller") return vm::VmOptions::Scheduling::kCallerThread;
  throw StatusError(absl::InvalidArgumentError(
      absl::StrCat("scheduling '", name, "': expected 'dedicated' or 'caller'")));
}

nb::dict Replay(const std::string& path, const std::map<std::string, std::string>& device_map,
                bool check_sync, bool verify, int repeat, const std::string& ops,
                const std::string& scheduling) {
  stress::RecordReplayOptions options;
  options.path = path;
  for (const auto& [from, to] : device_map)
    Check(vm::AddDeviceMapping(from + "=" + to, &options.device_map));
  options.check_sync = check_sync;
  options.verify = verify;
  options.repeat = repeat;
  if (ops != "standard" && ops != "stress") {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("ops '", ops, "': expected 'standard' (programs, eager code) or 'stress'")));
  }
  options.standard_ops = ops == "standard";
  options.scheduling = ParseScheduling(scheduling);
  absl::StatusOr<stress::RecordReplayTotals> totals;
  {
    nb::gil_scoped_release release;
    totals = stress::ReplayRecordFile(options);
  }
  Check(totals.status());
  nb::dict out;
  out["json"] = totals->ToJson();
  out["ok"] = totals->ok();
  nb::list mismatches;
  for (const vm::ChecksumMismatch& m : totals->mismatches) {
    nb::dict d;
    d["blob"] = m.blob;
    d["line"] = m.line;
    d["expected"] = m.expected;
    d["actual"] = m.actual;
    d["released"] = m.released;
    mismatches.append(d);
  }
  out["mismatch_list"] = mismatches;
  out["first_sync_error"] = totals->first_sync_error;
  out["op_error"] = totals->op_error;
  out["shutdown_error"] = totals->shutdown_error;
  return out;
}

nb::dict Stress(int programs, uint64_t seed, int sim_devices, int streams, int tensors, int ops,
                int64_t elements, int jitter_us, bool soft_sync, const std::string& scheduling,
                int timeout_s, const std::string& record_path) {
  stress::EagerStressOptions options;
  options.programs = programs;
  options.seed = seed;
  options.shape.sim_devices = sim_devices;
  options.shape.streams = streams;
  options.shape.tensors = tensors;
  options.shape.ops = ops;
  options.shape.elements = elements;
  options.jitter_us = jitter_us;
  options.soft_sync = soft_sync;
  options.scheduling = ParseScheduling(scheduling);
  options.timeout_s = timeout_s;
  options.record_path = record_path;
  absl::StatusOr<stress::EagerStressTotals> totals;
  {
    nb::gil_scoped_release release;
    totals = stress::RunEagerStress(options);
  }
  Check(totals.status());
  nb::dict out;
  out["json"] = totals->ToJson();
  out["problems"] = totals->problems();
  out["abandoned"] = totals->abandoned;
  out["first_problem"] = totals->first_problem;
  out["first_sync_error"] = totals->first_sync_error;
  return out;
}

nb::dict StressControlFlow(int programs, uint64_t seed, int streams, const std::string& device,
                           int jitter_us, bool soft_sync, int inputs, int ops, int depth,
                           int max_trips, int64_t elements, const std::string& scheduling,
                           int timeout_s) {
  stress::ControlFlowStressOptions options;
  options.programs = programs;
  options.seed = seed;
  options.streams = streams;
  options.device = ParseDevice(device);
  options.jitter_us = jitter_us;
  options.no_soft_sync = !soft_sync;
  options.shape.inputs = inputs;
  options.shape.ops = ops;
  options.shape.depth = depth;
  options.shape.max_trips = max_trips;
  options.shape.elements = elements;
  options.scheduling = ParseScheduling(scheduling);
  options.timeout_s = timeout_s;
  absl::StatusOr<stress::ControlFlowStressTotals> totals;
  {
    nb::gil_scoped_release release;
    totals = stress::RunControlFlowStress(options);
  }
  Check(totals.status());
  nb::dict out;
  out["json"] = totals->ToJson();
  out["problems"] = totals->problems();
  out["abandoned"] = totals->abandoned;
  out["first_problem"] = totals->first_problem;
  return out;
}

}  // namespace

void BindVmTools(nb::module_& m) {
  m.def("_replay", &Replay, nb::arg("path"), nb::arg("device_map"), nb::arg("check_sync"),
        nb::arg("verify"), nb::arg("repeat"), nb::arg("ops"), nb::arg("scheduling"));
  m.def("_stress", &Stress, nb::arg("programs"), nb::arg("seed"), nb::arg("sim_devices"),
        nb::arg("streams"), nb::arg("tensors"), nb::arg("ops"), nb::arg("elements"),
        nb::arg("jitter_us"), nb::arg("soft_sync"), nb::arg("scheduling"), nb::arg("timeout_s"),
        nb::arg("record_path"));
  m.def("_stress_control_flow", &StressControlFlow, nb::arg("programs"), nb::arg("seed"),
        nb::arg("streams"), nb::arg("device"), nb::arg("jitter_us"), nb::arg("soft_sync"),
        nb::arg("inputs"), nb::arg("ops"), nb::arg("depth"), nb::arg("max_trips"),
        nb::arg("elements"), nb::arg("scheduling"), nb::arg("timeout_s"));
}

}  // namespace sluice::python
