#include "framework/interpreter/var_table.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::framework {

namespace {

absl::Status CheckFeedsAndFetches(const ir::BlockDesc& block,
                                  const std::vector<std::string>& feed_names,
                                  const std::vector<std::string>& fetch_names) {
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
  return absl::OkStatus();
}

// I/O binding names only feeds and fetches of the build.
absl::Status CheckIoBinding(const std::vector<std::string>& feed_names,
                            const std::vector<std::string>& fetch_names, const IoBinding& io) {
  for (const std::string& name : io.device_feeds) {
    if (std::find(feed_names.begin(), feed_names.end(), name) == feed_names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device-resident feed '", name, "' is not a feed of this run"));
    }
  }
  for (const std::string& name : io.device_fetches) {
    if (std::find(fetch_names.begin(), fetch_names.end(), name) == fetch_names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device-resident fetch '", name, "' is not a fetch of this run"));
    }
  }
  return absl::OkStatus();
}

// A persistable lives where the scope's value lives, which must match its declaration.
absl::Status PlacePersistable(const ir::VarDesc& desc, const Scope& scope, VarSlot& slot) {
  const vm::BlobRef* existing = scope.Find(desc.name);
  if (existing == nullptr) return absl::OkStatus();
  const vm::Blob& blob = **existing;
  if (blob.dtype() != desc.dtype || blob.shape() != desc.shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("persistable '", desc.name, "' is declared ", DataTypeName(desc.dtype), " ",
                     desc.shape.ToString(), " but the scope holds ", DataTypeName(blob.dtype()),
                     " ", blob.shape().ToString()));
  }
  slot.device = blob.device();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VarTable> CollectVars(const ir::BlockDesc& block,
                                     const std::vector<std::string>& feed_names,
                                     const std::vector<std::string>& fetch_names,
                                     const Device& device, const Scope& scope,
                                     const IoBinding& io) {
  SLUICE_RETURN_IF_ERROR(CheckFeedsAndFetches(block, feed_names, fetch_names));
  SLUICE_RETURN_IF_ERROR(CheckIoBinding(feed_names, fetch_names, io));
  const absl::flat_hash_set<std::string> feeds(feed_names.begin(), feed_names.end());
  const absl::flat_hash_set<std::string> device_feeds(io.device_feeds.begin(),
                                                      io.device_feeds.end());
  VarTable table;
  for (const ir::VarDesc& desc : block.vars()) {
    VarSlot slot;
    slot.name = desc.name;
    slot.dtype = desc.dtype;
    slot.shape = desc.shape;
    slot.device = device;
    if (feeds.contains(desc.name)) {
      slot.kind = VarKind::kFeed;
      if (!device_feeds.contains(desc.name)) slot.device = Device(DeviceType::kCpu, 0);
    } else if (desc.persistable) {
      slot.kind = VarKind::kPersistable;
      SLUICE_RETURN_IF_ERROR(PlacePersistable(desc, scope, slot));
    }
    table.index_of[desc.name] = table.size();
    table.slots.push_back(std::move(slot));
  }
  for (const std::string& name : fetch_names) table.slots[table.index_of[name]].fetched = true;
  for (const std::string& name : io.device_fetches) {
    table.slots[table.index_of[name]].device_fetch = true;
  }
  return table;
}

std::vector<int> PersistablesReadBeforeWritten(const std::vector<OpFunc>& funcs,
                                               const VarTable& vars,
                                               const std::vector<std::string>& fetch_names) {
  std::vector<int> listed_vars;
  std::vector<bool> written(vars.slots.size(), false);
  absl::flat_hash_set<int> listed;
  auto note_read = [&](int v) {
    if (vars.slots[v].kind == VarKind::kPersistable && !written[v] && listed.insert(v).second) {
      listed_vars.push_back(v);
    }
  };
  for (const OpFunc& func : funcs) {
    for (int v : func.inputs) note_read(v);
    for (int v : func.outputs) written[v] = true;
  }
  for (const std::string& name : fetch_names) note_read(vars.index_of.at(name));
  return listed_vars;
}

}  // namespace sluice::framework
