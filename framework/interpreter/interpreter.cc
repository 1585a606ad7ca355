#include "framework/interpreter/interpreter.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "ops/op_schema.h"
#include "vm/instructions_builder.h"
#include "vm/stream.h"
#include "vm/stream_policy.h"

namespace sluice::framework {

namespace {

enum class VarKind { kFeed, kPersistable, kTemp };

// One variable as the lowered graph sees it: a program variable or a copy of one on another
// device.
struct VarSlot {
  std::string name;
  VarKind kind = VarKind::kTemp;
  Device device;
  DataType dtype = DataType::kF32;
  Shape shape;
  vm::BlobRef blob;
  bool fetched = false;
};

// One op to run: a program op or an inserted copy.
struct OpFunc {
  std::string type;
  int source = -1;  // index of the program op; -1 for an inserted copy
  const ops::OpSchema* schema = nullptr;
  const vm::OpKernel* kernel = nullptr;
  std::shared_ptr<const vm::AttrMap> attrs;
  Device device;                    // where it runs
  std::optional<StreamKey> stream;  // fixed by placement or attribute; else assigned later
  std::vector<int> inputs;          // var slots, flattened in slot order
  std::vector<int> outputs;
  bool random = false;
};

// A node of the lowered graph: an op func or the release of a temporary.
struct Node {
  int op = -1;   // op func index, or -1 for a release
  int var = -1;  // released var slot
  vm::Stream* stream = nullptr;
  std::vector<int> preds;  // node indices
  int segment = -1;
};

struct Segment {
  vm::Stream* stream = nullptr;
  std::vector<int> nodes;
  int position = 0;  // ordinal among the segments of its stream
};

std::string OpName(int index, const std::string& type) {
  return absl::StrCat("op #", index, " '", type, "'");
}

}  // namespace

struct Interpreter::Builder {
  const ir::ProgramDesc& program;
  const ops::OpRegistry* registry;
  vm::VirtualMachine* vm;
  Scope* scope;
  InterpreterOptions options;
  Interpreter* out;

  std::vector<VarSlot> vars;
  absl::flat_hash_map<std::string, int> var_of;  // program var name -> slot on its home
  std::vector<OpFunc> funcs;
  std::vector<Node> nodes;
  std::vector<Segment> segments;
  std::vector<vm::Stream*> func_streams;  // per op func
  std::vector<double> func_start;         // per op func: list-schedule start
  std::vector<int> fetch_slots;           // var slot per fetch, on cpu
  std::vector<std::pair<std::string, vm::BlobRef>> new_persistables;  // for the scope
  std::vector<int> must_check;  // persistables read before written

  absl::StatusOr<vm::Stream*> StreamFor(const StreamKey& key) { return vm->GetStream(key); }

  absl::Status Run(const std::vector<std::string>& feed_names,
                   const std::vector<std::string>& fetch_names);
  absl::Status CollectVars(const std::vector<std::string>& feed_names,
                           const std::vector<std::string>& fetch_names);
  absl::Status ResolveOps();
  absl::StatusOr<int> CopyOf(int var, Device device, absl::flat_hash_map<int64_t, int>& copies);
  void AssignStreams(const DependencyGraph& deps);
  absl::Status BindBlobs();
  void PlanNodes(const DependencyGraph& deps);
  void FormSegments();
  absl::Status Emit();
};

absl::Status Interpreter::Builder::CollectVars(const std::vector<std::string>& feed_names,
                                               const std::vector<std::string>& fetch_names) {
  if (program.num_blocks() > 1) {
    return absl::UnimplementedError(absl::StrCat("program has ", program.num_blocks(),
                                                 " blocks; control-flow blocks are not supported"));
  }
  const ir::BlockDesc& block = program.global_block();
  absl::flat_hash_set<std::string> feeds;
  for (const std::string& name : feed_names) {
    const ir::VarDesc* var = block.FindVar(name);
    if (var == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("feed '", name, "' is not a variable of the program"));
    }
    if (var->persistable) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", name, "' is persistable; load it into the scope instead"));
    }
    if (!feeds.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' is listed twice"));
    }
  }
  for (const std::string& name : fetch_names) {
    if (block.FindVar(name) == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("fetch '", name, "' is not a variable of the program"));
    }
  }
  for (const ir::VarDesc& desc : block.vars()) {
    VarSlot slot;
    slot.name = desc.name;
    slot.dtype = desc.dtype;
    slot.shape = desc.shape;
    if (feeds.contains(desc.name)) {
      slot.kind = VarKind::kFeed;
      slot.device = Device(DeviceType::kCpu, 0);
    } else if (desc.persistable) {
      slot.kind = VarKind::kPersistable;
      slot.device = options.device;
      if (const vm::BlobRef* existing = scope->Find(desc.name)) {
        const vm::Blob& blob = **existing;
        if (blob.dtype() != desc.dtype || blob.shape() != desc.shape) {
          return absl::InvalidArgumentError(
              absl::StrCat("persistable '", desc.name, "' is declared ", DataTypeName(desc.dtype),
                           " ", desc.shape.ToString(), " but the scope holds ",
                           DataTypeName(blob.dtype()), " ", blob.shape().ToString()));
        }
        slot.device = blob.device();
      }
    } else {
      slot.kind = VarKind::kTemp;
      slot.device = options.device;
    }
    var_of[desc.name] = static_cast<int>(vars.size());
    vars.push_back(std::move(slot));
  }
  for (const std::string& name : fetch_names) vars[var_of[name]].fetched = true;
  return absl::OkStatus();
}

absl::StatusOr<int> Interpreter::Builder::CopyOf(int var, Device device,
                                                 absl::flat_hash_map<int64_t, int>& copies) {
  const int64_t key = (static_cast<int64_t>(var) << 16) ^
                      (static_cast<int64_t>(device.type()) << 8) ^ device.index();
  if (auto it = copies.find(key); it != copies.end()) return it->second;
  const VarSlot& source = vars[var];
  const bool to_host = device.type() == DeviceType::kCpu;
  OpFunc copy;
  copy.type = to_host ? "memcpy_d2h" : "memcpy_h2d";
  SLUICE_ASSIGN_OR_RETURN(copy.schema, registry->FindSchema(copy.type));
  vm::AttrMap given;
  if (!to_host) given.Set("device", device.ToString());
  SLUICE_ASSIGN_OR_RETURN(vm::AttrMap attrs, copy.schema->NormalizeAttrs(given));
  const Device inputs[] = {source.device};
  SLUICE_ASSIGN_OR_RETURN(ops::Placement placement,
                          copy.schema->placement()(inputs, attrs, device));
  if (!attrs.empty()) copy.attrs = std::make_shared<const vm::AttrMap>(std::move(attrs));
  copy.device = placement.stream.device;
  copy.stream = placement.stream;
  SLUICE_ASSIGN_OR_RETURN(copy.kernel,
                          registry->FindKernel(copy.type, copy.device.type(), source.dtype));
  VarSlot slot;
  slot.name = absl::StrCat(source.name, "@", device.ToString());
  slot.kind = VarKind::kTemp;
  slot.device = placement.output_device;
  slot.dtype = source.dtype;
  slot.shape = source.shape;
  const int copy_var = static_cast<int>(vars.size());
  vars.push_back(std::move(slot));
  copy.inputs = {var};
  copy.outputs = {copy_var};
  funcs.push_back(std::move(copy));
  ++out->lowering_.inserted_copies;
  copies[key] = copy_var;
  return copy_var;
}

absl::Status Interpreter::Builder::ResolveOps() {
  const ir::BlockDesc& block = program.global_block();
  // Copies of a variable on another device, valid until the variable is written again.
  absl::flat_hash_map<int64_t, int> copies;
  std::vector<bool> written(vars.size(), false);
  for (int i = 0; i < static_cast<int>(block.ops().size()); ++i) {
    const ir::OpDesc& desc = block.ops()[i];
    const std::string where = OpName(i, desc.type);
    SLUICE_ASSIGN_OR_RETURN(const ops::OpSchema* schema, registry->FindSchema(desc.type));
    OpFunc func;
    func.type = desc.type;
    func.source = i;
    func.schema = schema;
    func.random = schema->has_flag(ops::kOpRandom);
    vm::AttrMap given = desc.attrs;
    absl::StatusOr<std::string> stream_attr = ir::TakeStreamAttr(given);
    if (!stream_attr.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", stream_attr.status().message()));
    }
    absl::StatusOr<vm::AttrMap> attrs = schema->NormalizeAttrs(given);
    if (!attrs.ok())
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", attrs.status().message()));
    // Operands by slot, in the schema's order.
    std::vector<std::vector<ops::TensorMeta>> metas;
    std::vector<int> inputs;
    std::vector<Device> input_devices;
    for (const ops::ArgDef& arg : schema->inputs()) {
      metas.emplace_back();
      for (const std::string& name : desc.Input(arg.name)) {
        auto it = var_of.find(name);
        if (it == var_of.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": input ", arg.name, " names undefined variable '", name, "'"));
        }
        const VarSlot& var = vars[it->second];
        if (var.kind == VarKind::kTemp && !written[it->second]) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": reads variable '", name,
              "' before any op writes it (not fed, not persistable: a missing feed, or a cycle "
              "in the program)"));
        }
        metas.back().push_back({var.dtype, var.shape});
        inputs.push_back(it->second);
        input_devices.push_back(var.device);
      }
    }
    for (const auto& [slot, names] : desc.inputs) {
      if (schema->InputSlot(slot) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": unknown input slot '", slot, "'"));
      }
    }
    std::vector<int> output_counts;
    std::vector<int> outputs;
    for (const ops::ArgDef& arg : schema->outputs()) {
      output_counts.push_back(static_cast<int>(desc.Output(arg.name).size()));
    }
    for (const auto& [slot, names] : desc.outputs) {
      if (schema->OutputSlot(slot) < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": unknown output slot '", slot, "'"));
      }
    }
    absl::StatusOr<std::vector<std::vector<ops::TensorMeta>>> inferred =
        schema->InferOutputs(metas, *attrs, output_counts);
    if (!inferred.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", inferred.status().message()));
    }
    for (size_t s = 0; s < schema->outputs().size(); ++s) {
      const std::vector<std::string>& names = desc.Output(schema->outputs()[s].name);
      if (names.size() != (*inferred)[s].size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": output ", schema->outputs()[s].name, " has ", names.size(),
                         " variables, the op makes ", (*inferred)[s].size()));
      }
      for (size_t k = 0; k < names.size(); ++k) {
        auto it = var_of.find(names[k]);
        if (it == var_of.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": output ", schema->outputs()[s].name,
                           " names undefined variable '", names[k], "'"));
        }
        const VarSlot& var = vars[it->second];
        const ops::TensorMeta& meta = (*inferred)[s][k];
        if (var.kind == VarKind::kFeed) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": writes feed variable '", names[k], "'"));
        }
        if (meta.dtype != var.dtype || meta.shape != var.shape) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": output '", names[k], "' is declared ", DataTypeName(var.dtype),
                           " ", var.shape.ToString(), " but the op makes ",
                           DataTypeName(meta.dtype), " ", meta.shape.ToString()));
        }
        outputs.push_back(it->second);
      }
    }
    // Placement: the schema's rule (copies), else the program's device.
    func.device = options.device;
    if (schema->placement()) {
      absl::StatusOr<ops::Placement> placement =
          schema->placement()(input_devices, *attrs, options.device);
      if (!placement.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", placement.status().message()));
      }
      func.device = placement->stream.device;
      func.stream = placement->stream;
      for (int var : outputs) {
        if (vars[var].kind == VarKind::kTemp) vars[var].device = placement->output_device;
      }
    } else {
      if (!stream_attr->empty()) {
        absl::StatusOr<StreamKey> key =
            StreamKey::Parse(absl::StrCat(options.device.ToString(), "/", *stream_attr));
        if (!key.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": bad stream attribute '", *stream_attr, "': ", key.status().message()));
        }
        func.stream = *key;
      }
      // Inputs on another device are copied over first.
      for (int& var : inputs) {
        if (vars[var].device != func.device) {
          SLUICE_ASSIGN_OR_RETURN(var, CopyOf(var, func.device, copies));
        }
      }
      for (int var : outputs) {
        if (vars[var].device != func.device) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": writes '", vars[var].name, "' which lives on ", vars[var].device.ToString(),
              " while the op runs on ", func.device.ToString()));
        }
      }
    }
    if (!attrs->empty()) func.attrs = std::make_shared<const vm::AttrMap>(*std::move(attrs));
    DataType key_dtype = DataType::kF32;
    if (!inputs.empty()) {
      key_dtype = vars[inputs.front()].dtype;
    } else if (!outputs.empty()) {
      key_dtype = vars[outputs.front()].dtype;
    }
    absl::StatusOr<const vm::OpKernel*> kernel =
        registry->FindKernel(desc.type, func.device.type(), key_dtype);
    if (!kernel.ok())
      return absl::NotFoundError(absl::StrCat(where, ": ", kernel.status().message()));
    func.kernel = *kernel;
    func.inputs = std::move(inputs);
    func.outputs = outputs;
    funcs.push_back(std::move(func));
    written.resize(vars.size(), false);
    for (int var : outputs) {
      written[var] = true;
      // A new value: earlier copies of it are stale.
      for (auto it = copies.begin(); it != copies.end();) {
        if ((it->first >> 16) == var) {
          copies.erase(it++);
        } else {
          ++it;
        }
      }
    }
  }
  // Fetched values come back to the host.
  for (const std::string& name : out->fetch_names_) {
    int var = var_of[name];
    if (vars[var].kind == VarKind::kTemp && !written[var]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fetch '", name, "': no op writes it and it is neither fed nor persistable"));
    }
    if (vars[var].device.type() != DeviceType::kCpu) {
      SLUICE_ASSIGN_OR_RETURN(var, CopyOf(var, Device(DeviceType::kCpu, 0), copies));
    }
    vars[var].fetched = true;
    fetch_slots.push_back(var);
  }
  return absl::OkStatus();
}

void Interpreter::Builder::AssignStreams(const DependencyGraph& deps) {
  const int n = static_cast<int>(funcs.size());
  const int lanes = std::max(1, options.compute_streams);
  const double cross = std::max(0.0, options.cross_stream_cost);
  // List schedule with unit cost per op and a cost per edge between streams: an op can
  // start on a stream once that stream is free and each input is done — plus `cross` for
  // an input from another stream. It goes to the stream with the lowest start plus `cross`
  // per input from elsewhere (ties: the stream of the latest-finishing input), so a stream
  // keeps the ops that feed each other unless the other stream would start sooner by more
  // than the syncs cost. Every cross-stream edge splits a fused sequence and costs a sync.
  std::vector<double> lane_free(lanes, 0);
  std::vector<double> done(n, 0);
  func_start.assign(n, 0);
  std::vector<int> lane_of(n, -1);
  for (int b = 0; b < n; ++b) {
    OpFunc& func = funcs[b];
    double ready = 0;
    int pred_lane = -1;
    double pred_done = -1;
    for (int p : deps.predecessors[b]) {
      ready = std::max(ready, done[p]);
      if (lane_of[p] >= 0 && done[p] > pred_done) {
        pred_done = done[p];
        pred_lane = lane_of[p];
      }
    }
    if (func.stream.has_value()) {
      if (func.stream->type == StreamType::kCompute && func.stream->device == options.device &&
          func.stream->index < lanes) {
        lane_of[b] = func.stream->index;
        const double start = std::max(ready, lane_free[lane_of[b]]);
        done[b] = lane_free[lane_of[b]] = start + 1;
      } else {
        done[b] = ready + 1;
      }
      func_start[b] = done[b] - 1;
      continue;
    }
    int best = 0;
    double best_start = 0;
    double best_score = std::numeric_limits<double>::infinity();
    for (int lane = 0; lane < lanes; ++lane) {
      double start = lane_free[lane];
      int from_elsewhere = 0;
      for (int p : deps.predecessors[b]) {
        const bool other = lane_of[p] >= 0 && lane_of[p] != lane;
        start = std::max(start, done[p] + (other ? cross : 0.0));
        from_elsewhere += other ? 1 : 0;
      }
      const double score = start + cross * from_elsewhere;
      if (score < best_score || (score == best_score && lane == pred_lane)) {
        best = lane;
        best_start = start;
        best_score = score;
      }
    }
    lane_of[b] = best;
    done[b] = lane_free[best] = best_start + 1;
    func_start[b] = best_start;
    func.stream = StreamKey{func.device, StreamType::kCompute, best};
  }
}

absl::Status Interpreter::Builder::BindBlobs() {
  const Device cpu(DeviceType::kCpu, 0);
  SLUICE_ASSIGN_OR_RETURN(vm::Stream * host, StreamFor(StreamKey{cpu, StreamType::kCompute, 0}));
  absl::flat_hash_set<int> devices_seen;
  for (VarSlot& var : vars) {
    SLUICE_ASSIGN_OR_RETURN(vm::Stream * home,
                            StreamFor(StreamKey{var.device, StreamType::kCompute, 0}));
    if (var.kind == VarKind::kFeed) {
      SLUICE_ASSIGN_OR_RETURN(var.blob, vm->NewBlob(host, var.dtype, var.shape, var.name));
    } else if (var.kind == VarKind::kPersistable) {
      if (const vm::BlobRef* existing = scope->Find(var.name)) {
        var.blob = *existing;
      } else {
        SLUICE_ASSIGN_OR_RETURN(var.blob, vm->NewLazyBlob(home, var.dtype, var.shape, var.name));
        new_persistables.emplace_back(var.name, var.blob);
      }
    } else {
      SLUICE_ASSIGN_OR_RETURN(var.blob, vm->NewLazyBlob(home, var.dtype, var.shape, var.name));
    }
    const int device_key = static_cast<int>(var.device.type()) * 1024 + var.device.index();
    if (devices_seen.insert(device_key).second) out->devices_.push_back(var.device);
    out->blobs_.push_back(var.blob);
  }
  return absl::OkStatus();
}

void Interpreter::Builder::PlanNodes(const DependencyGraph& deps) {
  const int n = static_cast<int>(funcs.size());
  // Accessors of each var, and where its release goes.
  std::vector<std::vector<int>> accessors(vars.size());
  std::vector<int> first_writer(vars.size(), -1);
  for (int f = 0; f < n; ++f) {
    for (int v : funcs[f].inputs) {
      if (accessors[v].empty() || accessors[v].back() != f) accessors[v].push_back(f);
    }
    for (int v : funcs[f].outputs) {
      if (accessors[v].empty() || accessors[v].back() != f) accessors[v].push_back(f);
      if (first_writer[v] < 0) first_writer[v] = f;
    }
  }
  std::vector<std::vector<int>> releases_after(n);
  if (options.release_temporaries) {
    for (int v = 0; v < static_cast<int>(vars.size()); ++v) {
      if (vars[v].kind != VarKind::kTemp || vars[v].fetched || accessors[v].empty()) continue;
      releases_after[accessors[v].back()].push_back(v);
    }
  }
  std::vector<int> node_of_func(n, -1);
  for (int f = 0; f < n; ++f) {
    Node node;
    node.op = f;
    node.stream = func_streams[f];
    for (int p : deps.predecessors[f]) node.preds.push_back(node_of_func[p]);
    node_of_func[f] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(node));
    for (int v : releases_after[f]) {
      Node release;
      release.var = v;
      release.stream = func_streams[first_writer[v]];
      for (int a : accessors[v]) release.preds.push_back(node_of_func[a]);
      nodes.push_back(std::move(release));
      ++out->lowering_.releases;
    }
  }
}

void Interpreter::Builder::FormSegments() {
  const int n = static_cast<int>(nodes.size());
  std::vector<bool> cross_successor(n, false);
  for (int b = 0; b < n; ++b) {
    for (int p : nodes[b].preds) {
      if (nodes[p].stream != nodes[b].stream) cross_successor[p] = true;
    }
  }
  absl::flat_hash_map<vm::Stream*, int> open;   // stream -> open segment
  absl::flat_hash_map<vm::Stream*, int> count;  // stream -> segments so far
  for (int b = 0; b < n; ++b) {
    Node& node = nodes[b];
    bool cut = !options.fuse;
    for (int p : node.preds) {
      if (nodes[p].stream != node.stream) cut = true;
    }
    auto it = open.find(node.stream);
    if (cut || it == open.end() || it->second < 0) {
      Segment segment;
      segment.stream = node.stream;
      segment.position = count[node.stream]++;
      segments.push_back(std::move(segment));
      open[node.stream] = static_cast<int>(segments.size()) - 1;
      it = open.find(node.stream);
    }
    node.segment = it->second;
    segments[it->second].nodes.push_back(b);
    if (cross_successor[b]) it->second = -1;
  }
}

absl::Status Interpreter::Builder::Emit() {
  LoweringStats& stats = out->lowering_;
  // Dense stream indices for the vector clocks.
  absl::flat_hash_map<vm::Stream*, int> dense;
  for (const Segment& segment : segments) dense.try_emplace(segment.stream, dense.size());
  const int k = static_cast<int>(dense.size());
  stats.streams = k;

  // Pass 1, in segment (program) order: decide the syncs with vector clocks, and give every
  // item a key — its time in the list schedule. Pass 2 hands the items to the batch in key
  // order. Streams run their work in the order it is dispatched, and a batch is dispatched
  // nearly at once in batch order, so the key order decides where a StreamWait records on
  // the producer's stream (right after the producer, not after whatever that stream has
  // queued by the time the consumer comes up in program order) and where it waits on the
  // consumer's stream (just before the consumer).
  struct Item {
    enum class Kind { kSequence, kStreamWait, kRecordEvent } kind;
    int segment = -1;  // kSequence; kStreamWait: the segment that needs the wait
    vm::Stream* from = nullptr;
    vm::Stream* to = nullptr;
    double key = 0;
    int from_segment = -1;  // kStreamWait: the segment waited for
  };
  std::vector<Item> items;
  std::vector<std::pair<int, int>> item_edges;
  std::vector<double> seg_start(segments.size()), seg_end(segments.size());
  for (size_t c = 0; c < segments.size(); ++c) {
    double first = -1, last = 0;
    for (int b : segments[c].nodes) {
      const Node& node = nodes[b];
      double t = 0;
      if (node.op >= 0) {
        t = func_start[node.op];
      } else {
        for (int p : node.preds) {
          if (nodes[p].op >= 0) t = std::max(t, func_start[nodes[p].op] + 1);
        }
      }
      if (first < 0) first = t;
      last = std::max(last, t + (node.op >= 0 ? 1.0 : 0.0));
    }
    seg_start[c] = std::max(first, 0.0);
    seg_end[c] = std::max(last, seg_start[c]);
  }
  constexpr double kStep = 1e-3;  // keeps an item strictly after what it depends on
  std::vector<std::vector<int>> known(k, std::vector<int>(k, -1));
  std::vector<std::vector<int>> clock(segments.size());
  std::vector<int> seq_item(segments.size(), -1);
  std::vector<int> record_item(segments.size(), -1);
  std::vector<int> last_on_stream(k, -1);
  auto merge = [&](std::vector<int>& into, const std::vector<int>& from) {
    for (int i = 0; i < k; ++i) into[i] = std::max(into[i], from[i]);
  };
  for (int c = 0; c < static_cast<int>(segments.size()); ++c) {
    const Segment& segment = segments[c];
    vm::Stream* stream = segment.stream;
    const int s = dense[stream];
    // Incoming dependences, by producing segment.
    std::vector<int> preds;
    for (int b : segment.nodes) {
      for (int p : nodes[b].preds) {
        if (nodes[p].segment != c) preds.push_back(nodes[p].segment);
      }
    }
    // Latest first: a wait for a later segment of a stream covers its earlier ones.
    std::sort(preds.begin(), preds.end(), std::greater<int>());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    std::vector<int> incoming;  // items this segment waits for
    if (last_on_stream[s] >= 0) incoming.push_back(seq_item[last_on_stream[s]]);
    for (int p : preds) {
      vm::Stream* from = segments[p].stream;
      const int t = dense[from];
      if (from == stream) continue;  // ordered by the stream chain
      // cpu work for a stream of the same worker, or for a device: the engine orders it
      // (by dispatch, or by completion). Between cpu streams of two workers a StreamWait,
      // which the consumer's worker honours on the host, avoids the round trip through the
      // scheduler a completion edge costs.
      if ((from->policy()->synchronous() && !vm::WaitsOnHost(*from, *stream)) ||
          options.skip_stream_analysis) {
        incoming.push_back(seq_item[p]);
        continue;
      }
      if (known[s][t] >= segments[p].position) continue;  // implied by an earlier sync
      // Just before the end of p's segment in list-schedule time, so that the sync goes out
      // right behind p's sequence — ahead of the next segment of p's stream, which starts
      // at that same time and would otherwise delay the consumer by a whole segment.
      const double after_p = std::max(seg_end[p] - kStep / 2, items[seq_item[p]].key + kStep);
      if (from->key().device == stream->key().device) {
        items.push_back({Item::Kind::kStreamWait, c, from, stream, after_p, p});
        const int wait = static_cast<int>(items.size()) - 1;
        item_edges.emplace_back(seq_item[p], wait);
        incoming.push_back(wait);
        ++stats.stream_waits;
      } else {
        if (record_item[p] < 0) {
          items.push_back({Item::Kind::kRecordEvent, -1, from, nullptr, after_p});
          record_item[p] = static_cast<int>(items.size()) - 1;
          item_edges.emplace_back(seq_item[p], record_item[p]);
          ++stats.record_events;
        }
        incoming.push_back(record_item[p]);
      }
      merge(known[s], clock[p]);
    }
    std::sort(incoming.begin(), incoming.end());
    incoming.erase(std::unique(incoming.begin(), incoming.end()), incoming.end());
    double key = seg_start[c];
    for (int from : incoming) key = std::max(key, items[from].key + kStep);
    items.push_back({Item::Kind::kSequence, c, nullptr, stream, key});
    seq_item[c] = static_cast<int>(items.size()) - 1;
    for (int from : incoming) item_edges.emplace_back(from, seq_item[c]);
    clock[c] = known[s];
    clock[c][s] = segment.position;
    known[s] = clock[c];
    last_on_stream[s] = c;
  }

  // Pass 2: the batch, in key order (a topological order: every edge goes to a larger key).
  std::vector<int> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return items[a].key < items[b].key; });
  absl::flat_hash_map<const vm::Blob*, vm::BlobRef> refs;
  for (const VarSlot& var : vars) refs.emplace(var.blob.get(), var.blob);
  const bool list_operands = vm->options().check_sync || !vm->options().record_path.empty();
  vm::PrecomputedBatch& batch = out->batch_;
  auto new_sequence = [&] {
    auto sequence = std::make_unique<vm::OpSequence>();
    sequence->set_cancel_flag(&out->cancel_);
    sequence->set_ops_counter(&out->ops_run_);
    sequence->set_run_counter(&out->run_number_);
    return sequence;
  };
  auto append_segment = [&](vm::OpSequence& sequence, const Segment& segment) {
    for (int b : segment.nodes) {
      const Node& node = nodes[b];
      if (node.op >= 0) {
        const OpFunc& func = funcs[node.op];
        vm::BlobPtrs inputs, outputs;
        for (int v : func.inputs) inputs.push_back(vars[v].blob.get());
        for (int v : func.outputs) outputs.push_back(vars[v].blob.get());
        sequence.AddOpCall(*func.kernel, std::move(inputs), std::move(outputs), func.attrs);
      } else {
        sequence.AddRelease(vars[node.var].blob.get());
      }
    }
  };
  // Lane mode: one sequence per stream, its segments in key order, and a wait step where
  // a StreamWait stood (vm/op_sequence.h). Two instructions per run instead of one per
  // segment and sync. Not with observers: the sync checker and the recorder see
  // instructions, and waits inside a sequence are invisible to them.
  // Every stream synchronous (cpu) and every lane with a worker of its own: then each
  // cross-stream edge became a StreamWait honoured on the host (vm::WaitsOnHost), none a
  // RecordEvent or an engine edge — and a lane queued behind another on one worker could
  // wait for work that waits for that other lane (a copy stream shares compute stream 0's
  // worker, for one).
  absl::flat_hash_set<const vm::ThreadCtx*> workers;
  bool all_synchronous = true;
  for (const auto& [stream, s] : dense) {
    workers.insert(stream->thread_ctx());
    all_synchronous = all_synchronous && stream->policy()->synchronous();
  }
  const bool worker_per_stream = static_cast<int>(workers.size()) == k;
  if (options.lane_sequences && options.fuse && !options.skip_stream_analysis && !list_operands &&
      k > 1 && all_synchronous && worker_per_stream) {
    std::vector<std::unique_ptr<vm::OpSequence>> lanes(k);
    std::vector<vm::Stream*> lane_stream(k);
    for (const auto& [stream, s] : dense) {
      lanes[s] = new_sequence();
      lane_stream[s] = stream;
    }
    std::vector<int> passed_after(segments.size(), 0);  // lane steps once it is appended
    // Each wait goes right before the segment that needs it, not where the StreamWait's
    // key would put it: a wait placed earlier would idle the lane while segments ahead of
    // the consumer, which do not need it, could run.
    std::vector<std::vector<int>> waits_for(segments.size());
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].kind == Item::Kind::kStreamWait) waits_for[items[i].segment].push_back(i);
    }
    for (int i : order) {
      const Item& item = items[i];
      if (item.kind != Item::Kind::kSequence) continue;
      vm::OpSequence& lane = *lanes[dense[item.to]];
      for (int w : waits_for[item.segment]) {
        // The producer's segment has a smaller key than this one, so it is in its lane.
        lane.AddWait(lanes[dense[items[w].from]].get(), passed_after[items[w].from_segment]);
      }
      append_segment(lane, segments[item.segment]);
      passed_after[item.segment] = lane.size();
    }
    for (int s = 0; s < k; ++s) {
      batch.AddOpCall(*lanes[s], {}, {}, nullptr, lane_stream[s]);
      ++stats.op_sequences;
      out->sequences_.push_back(std::move(lanes[s]));
    }
    stats.lane_sequences = k;
    stats.instructions = batch.size();
    return absl::OkStatus();
  }
  std::vector<int> batch_node(items.size(), -1);
  for (int i : order) {
    const Item& item = items[i];
    if (item.kind == Item::Kind::kStreamWait) {
      batch_node[i] = batch.AddStreamWait({}, item.from, item.to);
      continue;
    }
    if (item.kind == Item::Kind::kRecordEvent) {
      batch_node[i] = batch.AddRecordEvent({}, item.from);
      continue;
    }
    std::unique_ptr<vm::OpSequence> sequence = new_sequence();
    append_segment(*sequence, segments[item.segment]);
    // The enclosing instruction lists the sequence's operands only for the VM's observers
    // (sync checker, recorder): the interpreter keeps every blob alive itself, and listing
    // thousands of operands would cost the engine a use count per blob per run.
    vm::BlobList inputs, outputs;
    if (list_operands) {
      for (vm::Blob* blob : sequence->external_inputs()) inputs.push_back(refs[blob]);
      for (vm::Blob* blob : sequence->all_outputs()) outputs.push_back(refs[blob]);
    }
    batch_node[i] =
        batch.AddOpCall(*sequence, std::move(inputs), std::move(outputs), nullptr, item.to);
    ++stats.op_sequences;
    out->sequences_.push_back(std::move(sequence));
  }
  for (const auto& [from, to] : item_edges) {
    ++stats.edges;
    SLUICE_RETURN_IF_ERROR(batch.AddEdge(batch_node[from], batch_node[to]));
  }
  stats.instructions = batch.size();
  return absl::OkStatus();
}

absl::Status Interpreter::Builder::Run(const std::vector<std::string>& feed_names,
                                       const std::vector<std::string>& fetch_names) {
  SLUICE_RETURN_IF_ERROR(program.Validate());
  SLUICE_RETURN_IF_ERROR(CollectVars(feed_names, fetch_names));
  SLUICE_RETURN_IF_ERROR(ResolveOps());
  // Persistables read before the program writes them need a value at run time; so do
  // fetched persistables it never writes (read at the end).
  {
    std::vector<bool> written(vars.size(), false);
    absl::flat_hash_set<int> listed;
    for (const OpFunc& func : funcs) {
      for (int v : func.inputs) {
        if (vars[v].kind == VarKind::kPersistable && !written[v] && listed.insert(v).second) {
          must_check.push_back(v);
        }
      }
      for (int v : func.outputs) written[v] = true;
    }
    for (const std::string& name : out->fetch_names_) {
      const int v = var_of[name];
      if (vars[v].kind == VarKind::kPersistable && !written[v] && listed.insert(v).second) {
        must_check.push_back(v);
      }
    }
  }
  for (int v : must_check) {
    const vm::BlobRef* found = scope->Find(vars[v].name);
    if (found == nullptr || (*found)->storage() == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("persistable '", vars[v].name,
                       "' has no value: run the startup program or load parameters first"));
    }
  }
  std::vector<OpAccess> accesses(funcs.size());
  for (size_t f = 0; f < funcs.size(); ++f) {
    accesses[f].reads = funcs[f].inputs;
    accesses[f].writes = funcs[f].outputs;
    accesses[f].random = funcs[f].random;
  }
  DependencyGraph deps = BuildDependencies(accesses, static_cast<int>(vars.size()));
  out->lowering_.dependencies = deps.stats;
  out->lowering_.ops = static_cast<int64_t>(funcs.size());
  AssignStreams(deps);
  for (const OpFunc& func : funcs) {
    absl::StatusOr<vm::Stream*> stream = StreamFor(*func.stream);
    if (!stream.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(func.source >= 0 ? OpName(func.source, func.type) : func.type, ": stream ",
                       func.stream->ToString(), ": ", stream.status().message()));
    }
    func_streams.push_back(*stream);
  }
  SLUICE_RETURN_IF_ERROR(BindBlobs());
  PlanNodes(deps);
  FormSegments();
  SLUICE_RETURN_IF_ERROR(Emit());
  // Everything checked: only now does the scope change.
  Scope* root = scope;
  while (root->parent() != nullptr) root = root->parent();
  for (auto& [name, blob] : new_persistables) root->Set(name, blob);
  for (const std::string& name : feed_names) out->feed_blobs_.push_back(vars[var_of[name]].blob);
  for (int v : fetch_slots) out->fetch_blobs_.push_back(vars[v].blob);
  for (int v : must_check) out->must_be_initialized_.emplace_back(vars[v].name, vars[v].blob);
  for (const VarSlot& var : vars) {
    if (var.kind == VarKind::kPersistable) out->persistables_.emplace_back(var.name, var.blob);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Interpreter>> Interpreter::Build(
    const ir::ProgramDesc& program, const ops::OpRegistry* registry, vm::VirtualMachine* vm,
    Scope* scope, const std::vector<std::string>& feed_names,
    const std::vector<std::string>& fetch_names, InterpreterOptions options) {
  if (registry == nullptr || vm == nullptr || scope == nullptr) {
    return absl::InvalidArgumentError("Interpreter::Build: null registry, VM or scope");
  }
  std::unique_ptr<Interpreter> interpreter(new Interpreter());
  interpreter->vm_ = vm;
  interpreter->feed_names_ = feed_names;
  interpreter->fetch_names_ = fetch_names;
  Builder builder{program, registry, vm, scope, options, interpreter.get()};
  SLUICE_RETURN_IF_ERROR(builder.Run(feed_names, fetch_names));
  return interpreter;
}

Interpreter::~Interpreter() = default;

absl::Status CheckFeed(absl::string_view name, const HostTensor& value, DataType dtype,
                       const Shape& shape) {
  if (value.dtype != dtype || value.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feed '", name, "' is ", DataTypeName(value.dtype), " ", value.shape.ToString(),
        "; the program declares ", DataTypeName(dtype), " ", shape.ToString()));
  }
  const size_t expected = static_cast<size_t>(shape.NumElements()) * SizeOf(dtype);
  if (value.bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' holds ", value.bytes.size(),
                                                   " bytes; ", shape.ToString(), " ",
                                                   DataTypeName(dtype), " needs ", expected));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::StageFeeds(const std::vector<std::pair<std::string, HostTensor>>& feeds) {
  std::vector<const HostTensor*> by_slot(feed_names_.size(), nullptr);
  for (const auto& [name, value] : feeds) {
    auto it = std::find(feed_names_.begin(), feed_names_.end(), name);
    if (it == feed_names_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", name, "' is not a feed of this run"));
    }
    const size_t slot = static_cast<size_t>(it - feed_names_.begin());
    const vm::Blob& blob = *feed_blobs_[slot];
    SLUICE_RETURN_IF_ERROR(CheckFeed(name, value, blob.dtype(), blob.shape()));
    by_slot[slot] = &value;
  }
  for (size_t i = 0; i < feed_names_.size(); ++i) {
    if (by_slot[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("feed '", feed_names_[i], "' is missing"));
    }
  }
  if (vm_->recorder() != nullptr) {
    // Recording: write through the VM so the record carries the bytes, then a sync (a
    // barrier line), so that a replay orders the batch after the writes as this run does.
    vm::InstructionsBuilder builder(vm_);
    for (size_t i = 0; i < feed_names_.size(); ++i) {
      SLUICE_RETURN_IF_ERROR(builder.WriteBlob(feed_blobs_[i], by_slot[i]->bytes));
    }
    return vm_->Sync();
  }
  // Host blobs, and no run in flight: plain copies.
  for (size_t i = 0; i < feed_names_.size(); ++i) {
    if (!by_slot[i]->bytes.empty()) {
      std::memcpy(feed_blobs_[i]->storage()->data(), by_slot[i]->bytes.data(),
                  by_slot[i]->bytes.size());
    }
    feed_blobs_[i]->ClearPoison();
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckInitialized() const {
  for (const auto& [name, blob] : must_be_initialized_) {
    if (blob->storage() == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("persistable '", name,
                       "' has no value: run the startup program or load parameters first"));
    }
  }
  for (const auto& [name, blob] : persistables_) {
    if (blob->poisoned()) {
      return absl::FailedPreconditionError(
          absl::StrCat("persistable '", name, "' was not updated by a failed run (",
                       blob->poison().message(), "); run the startup program or load it again"));
    }
  }
  return absl::OkStatus();
}

bool Interpreter::BindingsMatch(const Scope& scope) const {
  for (const auto& [name, blob] : persistables_) {
    const vm::BlobRef* found = scope.Find(name);
    if (found == nullptr || *found != blob) return false;
  }
  return true;
}

absl::Status Interpreter::Submit() {
  cancel_.store(false, std::memory_order_relaxed);
  // Lane sequences tell this run's progress from the previous run's by this number.
  run_number_.fetch_add(1, std::memory_order_relaxed);
  return batch_.Submit(vm_);
}

absl::StatusOr<std::vector<HostTensor>> Interpreter::ReadFetches() const {
  std::vector<HostTensor> values;
  values.reserve(fetch_blobs_.size());
  for (size_t i = 0; i < fetch_blobs_.size(); ++i) {
    const vm::Blob& blob = *fetch_blobs_[i];
    if (blob.poisoned()) return blob.poison();
    if (blob.storage() == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("fetch '", fetch_names_[i], "' has no value (the run did not produce it)"));
    }
    HostTensor value{blob.dtype(), blob.shape(), {}};
    value.bytes.resize(blob.bytes());
    if (!value.bytes.empty()) std::memcpy(value.bytes.data(), blob.storage()->data(), blob.bytes());
    values.push_back(std::move(value));
  }
  return values;
}

}  // namespace sluice::framework
