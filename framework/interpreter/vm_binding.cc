#include "framework/interpreter/vm_binding.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/interpreter/op_resolution.h"

namespace sluice::framework {

absl::StatusOr<StreamTable> BindStreams(vm::VirtualMachine& vm, const std::vector<OpFunc>& funcs) {
  StreamTable table;
  absl::flat_hash_map<vm::Stream*, int> index_of;
  for (const OpFunc& func : funcs) {
    absl::StatusOr<vm::Stream*> stream = vm.GetStream(*func.stream);
    if (!stream.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(func.source >= 0 ? OpName(func.source, func.type) : func.type, ": stream ",
                       func.stream->ToString(), ": ", stream.status().message()));
    }
    auto [it, inserted] = index_of.try_emplace(*stream, static_cast<int>(table.streams.size()));
    if (inserted) table.streams.push_back(*stream);
    table.func_stream.push_back(it->second);
  }
  return table;
}

std::vector<StreamInfo> DescribeStreams(const vm::VirtualMachine& vm,
                                        const std::vector<vm::Stream*>& streams) {
  std::vector<StreamInfo> infos;
  int workers = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    StreamInfo info;
    info.device = streams[i]->key().device;
    info.synchronous = vm::VirtualMachine::RunsOnHost(*streams[i]);
    // The worker of the first earlier stream that shares one with this stream, else a new one.
    info.worker = -1;
    for (size_t j = 0; j < i && info.worker < 0; ++j) {
      vm::Stream* const pair[] = {streams[j], streams[i]};
      if (!vm.HasOwnWorkers(pair)) info.worker = infos[j].worker;
    }
    if (info.worker < 0) info.worker = workers++;
    infos.push_back(info);
  }
  return infos;
}

absl::StatusOr<BoundBlobs> BindBlobs(vm::VirtualMachine& vm, const Scope& scope, VarTable& vars) {
  BoundBlobs bound;
  absl::flat_hash_set<int> devices_seen;
  for (VarSlot& var : vars.slots) {
    SLUICE_ASSIGN_OR_RETURN(vm::Stream * home,
                            vm.GetStream(StreamKey{var.device, StreamType::kCompute, 0}));
    if (var.kind == VarKind::kFeed || (var.kind == VarKind::kTemp && var.device_fetch)) {
      // Storage of their own: written before a run (feeds) or copied out after it
      // (device-resident fetches) by the host or an InstructionsBuilder, which take no lazy
      // blob.
      SLUICE_ASSIGN_OR_RETURN(var.blob, vm.NewBlob(home, var.dtype, var.shape, var.name));
    } else if (var.kind == VarKind::kPersistable) {
      if (const vm::BlobRef* existing = scope.Find(var.name)) {
        var.blob = *existing;
      } else {
        SLUICE_ASSIGN_OR_RETURN(var.blob, vm.NewLazyBlob(home, var.dtype, var.shape, var.name));
        bound.new_persistables.emplace_back(var.name, var.blob);
      }
    } else {
      SLUICE_ASSIGN_OR_RETURN(var.blob, vm.NewLazyBlob(home, var.dtype, var.shape, var.name));
    }
    const int device_key = static_cast<int>(var.device.type()) * 1024 + var.device.index();
    if (devices_seen.insert(device_key).second) bound.devices.push_back(var.device);
  }
  return bound;
}

}  // namespace sluice::framework
