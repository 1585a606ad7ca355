#include "framework/graph/graph.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/status.h"
#include "framework/graph/specialization.h"

namespace sluice::framework::graph {

std::string GraphStats::ToString() const {
  return absl::StrCat("calls=", calls, " traces=", traces, " evictions=", evictions,
                      " specializations=", specializations);
}

namespace internal {

struct GraphState {
  GraphState(eager::Context context, GraphFunction fn, GraphOptions opts)
      : ctx(std::move(context)),
        function(std::move(fn)),
        options(std::move(opts)),
        name(absl::StrCat("graph '", options.name, "'")) {}

  // Waits until no submitted launch can still run a specialization of this graph.
  ~GraphState() {
    {
      absl::MutexLock lock(&mu);
      if (cache.empty() && retired.empty()) return;
    }
    absl::Notification done;
    if (ctx.WhenDone([&done] { done.Notify(); }).ok()) done.WaitForNotification();
  }

  struct Entry {
    std::shared_ptr<Specialization> spec;
    uint64_t last_used = 0;
  };
  // The state of the graph on one device (graph.h, "State").
  struct DeviceState {
    Device device;
    std::shared_ptr<Scope> scope;
    eager::Tensor token;  // made with the first specialization that keeps state
  };
  DeviceState& StateOn(const Device& device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (DeviceState& s : states) {
      if (s.device == device) return s;
    }
    states.push_back({device, std::make_shared<Scope>(), eager::Tensor()});
    return states.back();
  }
  // An evicted specialization, kept until the launches submitted before its eviction ran.
  struct Retired {
    std::shared_ptr<Specialization> spec;
    std::shared_ptr<std::atomic<bool>> done;
  };

  // The cached specialization for these inputs on `device`, or null. Compares in place:
  // no key is built per call.
  Entry* Find(const Device& device, const std::vector<eager::Tensor>& inputs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (Entry& entry : cache) {
      const SpecializationKey& key = entry.spec->key;
      if (key.device != device || key.inputs.size() != inputs.size()) continue;
      bool same = true;
      for (size_t i = 0; same && i < inputs.size(); ++i) {
        same =
            key.inputs[i].first == inputs[i].dtype() && key.inputs[i].second == inputs[i].shape();
      }
      if (same) return &entry;
    }
    return nullptr;
  }

  // Drops the retired specializations no launch can still run. A retired one still held
  // by a call between Get and its submission waits for a later look; once only `retired`
  // holds it, every launch of it has been submitted, and a barrier behind them marks it
  // done.
  absl::Status Reap() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (Retired& r : retired) {
      if (r.done != nullptr || r.spec.use_count() != 1) continue;
      auto done = std::make_shared<std::atomic<bool>>(false);
      SLUICE_RETURN_IF_ERROR(
          ctx.WhenDone([done] { done->store(true, std::memory_order_release); }));
      r.done = std::move(done);
    }
    std::erase_if(retired, [](const Retired& r) {
      return r.done != nullptr && r.done->load(std::memory_order_acquire);
    });
    return absl::OkStatus();
  }

  // Finds or builds the specialization (evicting the least recently used beyond the bound).
  absl::StatusOr<std::shared_ptr<Specialization>> Get(const Device& device,
                                                      const std::vector<eager::Tensor>& inputs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ++stats.calls;
    if (!retired.empty()) SLUICE_RETURN_IF_ERROR(Reap());
    if (Entry* entry = Find(device, inputs)) {
      entry->last_used = ++clock;
      return entry->spec;
    }
    SpecializationKey key{device, {}};
    for (const eager::Tensor& t : inputs) key.inputs.emplace_back(t.dtype(), t.shape());
    DeviceState& state = StateOn(device);
    SLUICE_ASSIGN_OR_RETURN(
        std::unique_ptr<Specialization> built,
        BuildSpecialization(ctx, function, options, name, std::move(key), state.scope));
    if (!built->state.empty() && !state.token.valid()) {
      SLUICE_ASSIGN_OR_RETURN(state.token, ctx.FromVector<float>({0}, Shape({1}), device));
    }
    ++stats.traces;
    if (static_cast<int>(cache.size()) >= options.max_specializations) {
      auto oldest = std::min_element(
          cache.begin(), cache.end(),
          [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
      retired.push_back({std::move(oldest->spec), nullptr});
      cache.erase(oldest);
      ++stats.evictions;
      SLUICE_RETURN_IF_ERROR(Reap());
    }
    cache.push_back({std::shared_ptr<Specialization>(std::move(built)), ++clock});
    return cache.back().spec;
  }

  eager::Context ctx;
  const GraphFunction function;
  const GraphOptions options;
  const std::string name;  // "graph 'step'"

  absl::Mutex mu;
  std::vector<Entry> cache ABSL_GUARDED_BY(mu);
  std::vector<Retired> retired ABSL_GUARDED_BY(mu);
  std::vector<DeviceState> states ABSL_GUARDED_BY(mu);
  uint64_t clock ABSL_GUARDED_BY(mu) = 0;
  GraphStats stats ABSL_GUARDED_BY(mu);
};

}  // namespace internal

absl::StatusOr<Graph> Graph::Create(eager::Context ctx, GraphFunction function,
                                    GraphOptions options) {
  if (!function) return absl::InvalidArgumentError("Graph::Create: an empty function");
  if (options.name.empty()) return absl::InvalidArgumentError("Graph::Create: an empty name");
  if (options.max_specializations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("Graph::Create: max_specializations is ",
                                                   options.max_specializations,
                                                   "; at least 1 is needed"));
  }
  return Graph(std::make_shared<internal::GraphState>(std::move(ctx), std::move(function),
                                                      std::move(options)));
}

namespace {

// The device a call runs on; InvalidArgument naming the first input that is empty, of
// another context or on another device.
absl::StatusOr<Device> CallDevice(const internal::GraphState& state,
                                  const std::vector<eager::Tensor>& inputs) {
  std::optional<Device> device = state.options.device;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const eager::Tensor& t = inputs[i];
    if (!t.valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat(state.name, ": input ", i, " is an empty Tensor"));
    }
    if (t.context().vm() != state.ctx.vm()) {
      return absl::InvalidArgumentError(
          absl::StrCat(state.name, ": input ", i, " belongs to another eager context"));
    }
    if (!device.has_value()) device = t.device();
    if (t.device() != *device) {
      return absl::InvalidArgumentError(absl::StrCat(state.name, ": input ", i, " is on ",
                                                     t.device().ToString(), "; the graph runs on ",
                                                     device->ToString()));
    }
  }
  return device.value_or(state.ctx.default_device());
}

}  // namespace

absl::StatusOr<std::vector<eager::Tensor>> Graph::operator()(
    const std::vector<eager::Tensor>& inputs) {
  internal::GraphState& state = *state_;
  SLUICE_ASSIGN_OR_RETURN(const Device device, CallDevice(state, inputs));
  std::shared_ptr<Specialization> spec;
  eager::Tensor token;  // the graph's state on this device, when it keeps any
  {
    absl::MutexLock lock(&state.mu);
    SLUICE_ASSIGN_OR_RETURN(spec, state.Get(device, inputs));
    if (!spec->state.empty()) token = state.StateOn(device).token;
  }
  // State an earlier call's failure poisoned would poison every later call's updates.
  for (const vm::Blob* blob : spec->state) {
    if (blob->poisoned()) {
      return absl::FailedPreconditionError(absl::StrCat(
          state.name, ": its state '", blob->DebugName(), "' holds the error of an earlier call (",
          blob->poison().message(), "); call ResetState() to start it afresh"));
    }
  }
  absl::StatusOr<std::vector<eager::Tensor>> outputs;
  if (spec->read_params.empty() && !token.valid()) {
    outputs = state.ctx.LaunchKernel(*spec->launch, spec->stream, inputs, spec->updated_params,
                                     spec->outputs);
  } else {
    absl::InlinedVector<eager::Tensor, 8> reads(inputs.begin(), inputs.end());
    reads.insert(reads.end(), spec->read_params.begin(), spec->read_params.end());
    absl::InlinedVector<eager::Tensor, 4> updated(spec->updated_params.begin(),
                                                  spec->updated_params.end());
    if (token.valid()) updated.push_back(token);
    outputs = state.ctx.LaunchKernel(*spec->launch, spec->stream, reads, updated, spec->outputs);
  }
  if (!outputs.ok()) {
    return absl::Status(outputs.status().code(),
                        absl::StrCat(state.name, ": ", outputs.status().message()));
  }
  return outputs;
}

void Graph::ResetState() {
  internal::GraphState& state = *state_;
  absl::MutexLock lock(&state.mu);
  for (internal::GraphState::Entry& entry : state.cache) {
    state.retired.push_back({std::move(entry.spec), nullptr});
  }
  state.cache.clear();
  state.states.clear();        // specializations still running keep their scopes
  state.Reap().IgnoreError();  // fails only once the VM is shut down
}

GraphStats Graph::stats() const {
  absl::MutexLock lock(&state_->mu);
  GraphStats stats = state_->stats;
  stats.specializations = static_cast<int64_t>(state_->cache.size());
  return stats;
}

absl::StatusOr<const ir::ProgramDesc*> Graph::Program(const std::vector<eager::Tensor>& inputs) {
  internal::GraphState& state = *state_;
  SLUICE_ASSIGN_OR_RETURN(const Device device, CallDevice(state, inputs));
  absl::MutexLock lock(&state.mu);
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<Specialization> spec, state.Get(device, inputs));
  --state.stats.calls;  // a look-up, not a call
  return &spec->main->desc();
}

}  // namespace sluice::framework::graph
