#include "ops/op_dispatcher.h"

#include <algorithm>
#include <iterator>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "vm/stream.h"

namespace sluice::ops {
namespace {

constexpr size_t kMaxCachedPlans = 4096;

std::string MetaText(const TensorMeta& m) {
  return absl::StrCat(DataTypeName(m.dtype), m.shape.ToString());
}

}  // namespace

absl::StatusOr<vm::Stream*> OpDispatcher::GetStream(const StreamKey& key) {
  auto it = streams_.find(key);
  if (it != streams_.end()) return it->second;
  SLUICE_ASSIGN_OR_RETURN(vm::Stream * stream, vm_->GetStream(key));
  streams_.emplace(key, stream);
  return stream;
}

void OpDispatcher::Flatten(const SlotBlobs& slots, FlatBlobs* blobs, SlotSizes* sizes) {
  for (const vm::BlobList& slot : slots) {
    sizes->push_back(static_cast<int>(slot.size()));
    for (const vm::BlobRef& blob : slot) blobs->push_back(blob.get());
  }
}

namespace {

// String equality without a library call, for op names (a few characters).
bool SameName(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

bool OpDispatcher::Matches(const CachedPlan& cached, absl::string_view op, Operands inputs,
                           const vm::AttrMap& attrs, const DispatchOptions& options,
                           const std::vector<int>& output_counts) {
  // The operands first (what differs between an eager loop's calls, when anything does),
  // then the call's constant parts.
  if (cached.inputs.size() != inputs.blobs.size()) return false;
  for (size_t k = 0; k < inputs.blobs.size(); ++k) {
    const vm::Blob* blob = inputs.blobs[k];
    const auto& [meta, device] = cached.inputs[k];
    if (blob == nullptr) return false;  // FindPlan's miss path reports it
    if (blob->dtype() != meta.dtype || blob->device() != device || blob->shape() != meta.shape) {
      return false;
    }
  }
  if (!SameName(cached.op, op) || cached.slot_sizes.size() != inputs.slot_sizes.size() ||
      cached.default_device != options.default_device ||
      cached.stream.has_value() != options.stream.has_value() ||
      cached.output_counts.size() != output_counts.size()) {
    return false;
  }
  for (size_t s = 0; s < inputs.slot_sizes.size(); ++s) {
    if (cached.slot_sizes[s] != inputs.slot_sizes[s]) return false;
  }
  if (options.stream.has_value() && !(*cached.stream == *options.stream)) return false;
  if (cached.preferred_stream.has_value() != options.preferred_stream.has_value() ||
      (options.preferred_stream.has_value() &&
       !(*cached.preferred_stream == *options.preferred_stream))) {
    return false;
  }
  if (!output_counts.empty() && cached.output_counts != output_counts) return false;
  return attrs.empty() ? cached.given_attrs.empty() : cached.given_attrs == attrs;
}

absl::StatusOr<const OpDispatcher::Plan*> OpDispatcher::FindPlan(
    absl::string_view op, Operands inputs, const vm::AttrMap& attrs, const DispatchOptions& options,
    const std::vector<int>& output_counts) {
  // Eager loops repeat a few calls: the most recent plans first, without hashing (a null
  // input matches no plan).
  for (size_t i = 0; i < kRecentPlans; ++i) {
    CachedPlan* cached = recent_[i];
    if (cached == nullptr) break;
    if (Matches(*cached, op, inputs, attrs, options, output_counts)) {
      if (i != 0) std::rotate(recent_.begin(), recent_.begin() + i, recent_.begin() + i + 1);
      return &cached->plan;
    }
  }
  for (const vm::Blob* blob : inputs.blobs) {
    if (blob == nullptr) return Prepare(op, inputs, attrs, options, output_counts).status();
  }
  size_t hash = absl::HashOf(op, attrs.values().size());
  for (int size : inputs.slot_sizes) hash = absl::HashOf(hash, size);
  for (const vm::Blob* blob : inputs.blobs) {
    hash = absl::HashOf(hash, blob->dtype(), blob->device(), blob->shape().dims());
  }
  std::vector<std::unique_ptr<CachedPlan>>& bucket = plans_[hash];
  for (const std::unique_ptr<CachedPlan>& cached : bucket) {
    if (Matches(*cached, op, inputs, attrs, options, output_counts)) {
      NoteRecent(cached.get());
      return &cached->plan;
    }
  }
  SLUICE_ASSIGN_OR_RETURN(Plan plan, Prepare(op, inputs, attrs, options, output_counts));
  if (cached_plans_ >= kMaxCachedPlans) {
    plans_.clear();  // a program with this many distinct calls gains little from caching
    recent_.fill(nullptr);
    cached_plans_ = 0;
  }
  auto entry = std::make_unique<CachedPlan>();
  entry->op = std::string(op);
  entry->slot_sizes.assign(inputs.slot_sizes.begin(), inputs.slot_sizes.end());
  for (const vm::Blob* blob : inputs.blobs) {
    entry->inputs.push_back({TensorMeta{blob->dtype(), blob->shape()}, blob->device()});
  }
  entry->given_attrs = attrs;
  entry->default_device = options.default_device;
  entry->stream = options.stream;
  entry->preferred_stream = options.preferred_stream;
  entry->output_counts = output_counts;
  entry->plan = std::move(plan);
  if (entry->plan.outputs.size() == 1 && entry->plan.outputs[0].size() == 1) {
    entry->plan.single_output = &entry->plan.outputs[0][0];
  }
  const Plan* result = &entry->plan;
  NoteRecent(entry.get());
  plans_[hash].push_back(std::move(entry));  // `bucket` may be invalid after a clear
  ++cached_plans_;
  return result;
}

void OpDispatcher::NoteRecent(CachedPlan* plan) {
  std::copy_backward(recent_.begin(), recent_.end() - 1, recent_.end());
  recent_[0] = plan;
}

absl::StatusOr<OpDispatcher::Plan> OpDispatcher::Prepare(absl::string_view op, Operands inputs,
                                                         const vm::AttrMap& attrs,
                                                         const DispatchOptions& options,
                                                         std::vector<int> output_counts) {
  Plan plan;
  SLUICE_ASSIGN_OR_RETURN(plan.schema, registry_->FindSchema(op));
  const OpSchema& schema = *plan.schema;
  SLUICE_ASSIGN_OR_RETURN(vm::AttrMap normalized, schema.NormalizeAttrs(attrs));
  if (!normalized.empty()) {
    plan.attrs = std::make_shared<const vm::AttrMap>(std::move(normalized));
  }
  static const vm::AttrMap* const kNoAttrs = new vm::AttrMap();
  const vm::AttrMap& plan_attrs = plan.attrs != nullptr ? *plan.attrs : *kNoAttrs;

  auto slot_name = [&](size_t s) -> absl::string_view {
    return s < schema.inputs().size() ? absl::string_view(schema.inputs()[s].name) : "?";
  };
  std::vector<std::vector<TensorMeta>> metas(inputs.slot_sizes.size());
  std::vector<Device> devices;
  std::vector<size_t> slot_of;  // per flattened input
  const vm::Blob* first = nullptr;
  size_t k = 0;
  for (size_t s = 0; s < inputs.slot_sizes.size(); ++s) {
    for (int i = 0; i < inputs.slot_sizes[s]; ++i, ++k) {
      const vm::Blob* blob = inputs.blobs[k];
      if (blob == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("op '", op, "': input '", slot_name(s), "' is a null tensor"));
      }
      metas[s].push_back({blob->dtype(), blob->shape()});
      devices.push_back(blob->device());
      slot_of.push_back(s);
      if (first == nullptr) first = blob;
    }
  }
  SLUICE_ASSIGN_OR_RETURN(plan.outputs,
                          schema.InferOutputs(metas, plan_attrs, std::move(output_counts)));

  StreamKey key;
  if (schema.placement()) {
    SLUICE_ASSIGN_OR_RETURN(Placement placement,
                            schema.placement()(devices, plan_attrs, options.default_device));
    key = placement.stream;
    plan.output_device = placement.output_device;
  } else {
    const Device device = first != nullptr ? first->device() : options.default_device;
    for (size_t j = 0; j < inputs.blobs.size(); ++j) {
      const vm::Blob* blob = inputs.blobs[j];
      if (blob->device() != device) {
        return absl::InvalidArgumentError(absl::StrCat(
            "op '", op, "': input '", slot_name(slot_of[j]), "' (", blob->DebugName(), ") is on ",
            blob->device().ToString(), " but ", first->DebugName(), " is on ", device.ToString(),
            "; copy it first (Tensor::To / memcpy ops)"));
      }
    }
    key.device = device;
    plan.output_device = device;
  }
  if (options.stream.has_value()) {
    if (options.stream->device != key.device) {
      return absl::InvalidArgumentError(absl::StrCat("op '", op, "' is placed on ",
                                                     key.device.ToString(), ", not on stream ",
                                                     options.stream->ToString()));
    }
    key = *options.stream;
  } else if (options.preferred_stream.has_value() &&
             options.preferred_stream->device == key.device && key.type != StreamType::kCcl) {
    // A scope moves compute, never a collective off its ccl stream (every rank must issue
    // a device's collectives on one stream, in one order).
    key = *options.preferred_stream;
  }
  SLUICE_ASSIGN_OR_RETURN(plan.stream, GetStream(key));

  DataType key_dtype = DataType::kF32;
  if (first != nullptr) {
    key_dtype = first->dtype();
  } else if (!plan.outputs.empty() && !plan.outputs[0].empty()) {
    key_dtype = plan.outputs[0][0].dtype;
  }
  SLUICE_ASSIGN_OR_RETURN(plan.kernel, registry_->FindKernel(op, key.device.type(), key_dtype));
  SLUICE_ASSIGN_OR_RETURN(plan.alloc_stream, AllocationStream(plan));
  return plan;
}

absl::Status OpDispatcher::SingleOutputError(absl::string_view op, const Plan& plan) {
  size_t n = 0;
  for (const auto& slot : plan.outputs) n += slot.size();
  return absl::InvalidArgumentError(
      absl::StrCat("op '", op, "' produces ", n, " outputs; the caller takes exactly one"));
}

absl::StatusOr<vm::Stream*> OpDispatcher::AllocationStream(const Plan& plan) {
  if (plan.output_device == plan.stream->key().device) return plan.stream;
  return GetStream(StreamKey{plan.output_device});
}

absl::StatusOr<SlotBlobs> OpDispatcher::Call(absl::string_view op, const SlotBlobs& inputs,
                                             const vm::AttrMap& attrs,
                                             const DispatchOptions& options) {
  FlatBlobs flat_in;
  SlotSizes sizes;
  Flatten(inputs, &flat_in, &sizes);
  SLUICE_ASSIGN_OR_RETURN(const Plan* cached,
                          FindPlan(op, {flat_in, sizes}, attrs, options, options.output_counts));
  const Plan& plan = *cached;
  if (options.single_output && plan.single_output == nullptr) {
    return SingleOutputError(op, plan);
  }
  vm::Stream* const alloc_stream = plan.alloc_stream;
  SlotBlobs outputs(plan.outputs.size());
  FlatBlobs flat_out;
  for (size_t s = 0; s < plan.outputs.size(); ++s) {
    for (const TensorMeta& meta : plan.outputs[s]) {
      SLUICE_ASSIGN_OR_RETURN(vm::BlobRef blob, vm_->NewBlob(alloc_stream, meta.dtype, meta.shape));
      flat_out.push_back(blob.get());
      outputs[s].push_back(std::move(blob));
    }
  }
  SLUICE_RETURN_IF_ERROR(Launch(plan, flat_in, flat_out, /*fresh_outputs=*/true));
  return outputs;
}

absl::StatusOr<vm::OwnedBlob> OpDispatcher::CallSingle(absl::string_view op,
                                                       absl::Span<vm::Blob* const> inputs,
                                                       const vm::AttrMap& attrs,
                                                       const DispatchOptions& options) {
  // One blob per slot.
  static constexpr int kOnes[] = {1, 1, 1, 1, 1, 1, 1, 1};
  SlotSizes many;
  absl::Span<const int> ones(kOnes, std::min(inputs.size(), std::size(kOnes)));
  if (inputs.size() > ones.size()) {
    many.assign(inputs.size(), 1);
    ones = many;
  }
  SLUICE_ASSIGN_OR_RETURN(const Plan* cached,
                          FindPlan(op, {inputs, ones}, attrs, options, options.output_counts));
  const Plan& plan = *cached;
  if (plan.single_output == nullptr) return SingleOutputError(op, plan);
  const TensorMeta& meta = *plan.single_output;
  SLUICE_ASSIGN_OR_RETURN(vm::OwnedBlob out,
                          vm_->NewOwnedBlob(plan.alloc_stream, meta.dtype, meta.shape));
  vm::Blob* const outs[] = {out.get()};
  SLUICE_RETURN_IF_ERROR(Launch(plan, inputs, outs, /*fresh_outputs=*/true));
  return out;
}

absl::Status OpDispatcher::CallInto(absl::string_view op, const SlotBlobs& inputs,
                                    const SlotBlobs& outputs, const vm::AttrMap& attrs,
                                    const DispatchOptions& options) {
  std::vector<int> counts;
  for (const vm::BlobList& slot : outputs) counts.push_back(static_cast<int>(slot.size()));
  FlatBlobs flat_in;
  SlotSizes sizes;
  Flatten(inputs, &flat_in, &sizes);
  SLUICE_ASSIGN_OR_RETURN(const Plan* cached,
                          FindPlan(op, {flat_in, sizes}, attrs, options, counts));
  const Plan& plan = *cached;
  for (size_t s = 0; s < outputs.size(); ++s) {
    for (size_t i = 0; i < outputs[s].size(); ++i) {
      const vm::BlobRef& blob = outputs[s][i];
      const TensorMeta& want = plan.outputs[s][i];
      const std::string& slot = plan.schema->outputs()[s].name;
      if (blob == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("op '", op, "': output '", slot, "' is a null tensor"));
      }
      const TensorMeta have{blob->dtype(), blob->shape()};
      if (!(have == want) || blob->device() != plan.output_device) {
        return absl::InvalidArgumentError(
            absl::StrCat("op '", op, "': output '", slot, "' (", blob->DebugName(), ") is ",
                         MetaText(have), " on ", blob->device().ToString(), "; the op produces ",
                         MetaText(want), " on ", plan.output_device.ToString()));
      }
    }
  }
  FlatBlobs flat_out;
  SlotSizes out_sizes;
  Flatten(outputs, &flat_out, &out_sizes);
  // The aliasing rule (docs/design.md, "Aliasing"): an output that is also an input of a
  // pair the op does not declare in place is written to a fresh blob and copied back.
  const vm::InPlaceContract& contract = plan.kernel->in_place();
  const int n_in = static_cast<int>(flat_in.size());
  const int n_out = static_cast<int>(flat_out.size());
  absl::InlinedVector<std::pair<vm::BlobRef, vm::Blob*>, 2> copy_backs;  // fresh, caller's
  for (int o = 0; o < n_out; ++o) {
    bool separate = false;
    for (int i = 0; i < n_in && !separate; ++i) {
      separate = flat_in[i] == flat_out[o] && !contract.Allows(i, o, n_in, n_out);
    }
    if (!separate) continue;
    SLUICE_ASSIGN_OR_RETURN(vm::Stream * alloc_stream, AllocationStream(plan));
    SLUICE_ASSIGN_OR_RETURN(vm::BlobRef fresh,
                            vm_->NewBlob(alloc_stream, flat_out[o]->dtype(), flat_out[o]->shape()));
    copy_backs.emplace_back(std::move(fresh), flat_out[o]);
    flat_out[o] = copy_backs.back().first.get();
  }
  if (copy_backs.empty()) return Launch(plan, flat_in, flat_out, /*fresh_outputs=*/false);
  for (const auto& [fresh, target] : copy_backs) {
    SLUICE_RETURN_IF_ERROR(
        registry_->FindKernel("assign", target->device().type(), target->dtype()).status());
  }
  SLUICE_RETURN_IF_ERROR(Launch(plan, flat_in, flat_out, /*fresh_outputs=*/false));
  for (const auto& [fresh, target] : copy_backs) {
    const vm::OpKernel* assign =
        *registry_->FindKernel("assign", target->device().type(), target->dtype());
    vm::Blob* const from[] = {fresh.get()};
    vm::Blob* const to[] = {target};
    SLUICE_RETURN_IF_ERROR(builder_->CallPtrs(*assign, from, to, nullptr, plan.stream));
    SLUICE_RETURN_IF_ERROR(builder_->Release(fresh, /*dying=*/true));
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops
