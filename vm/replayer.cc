#include "vm/replayer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "vm/producer_port.h"
#include "vm/recorder.h"
#include "vm/stream.h"
#include "vm/stream_policy.h"
#include "vm/virtual_machine.h"

namespace sluice::vm {

absl::Status AddDeviceMapping(absl::string_view spec, DeviceMap* map) {
  for (absl::string_view pair : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> sides = absl::StrSplit(pair, '=');
    if (sides.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("device mapping '", pair, "': expected FROM=TO, e.g. cuda:0=sim:0"));
    }
    absl::StatusOr<Device> from = Device::Parse(sides[0]);
    absl::StatusOr<Device> to = Device::Parse(sides[1]);
    if (!from.ok() || !to.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device mapping '", pair, "': ", (!from.ok() ? from : to).status().message()));
    }
    if (!map->emplace(from->ToString(), to->ToString()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("device mapping '", pair, "': ", from->ToString(), " is mapped twice"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Stream*> Replayer::ResolveStream(absl::string_view recorded, int line) const {
  absl::StatusOr<StreamKey> key = StreamKey::Parse(recorded);
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(program_->source, ":", line, ": ", key.status().message()));
  }
  auto mapped = options_.device_map.find(key->device.ToString());
  if (mapped != options_.device_map.end()) key->device = Device::Parse(mapped->second).value();
  absl::StatusOr<Stream*> stream = vm_->GetStream(*key);
  if (!stream.ok()) {
    return absl::Status(stream.status().code(),
                        absl::StrCat(program_->source, ":", line, ": stream '", recorded, "'",
                                     mapped != options_.device_map.end()
                                         ? absl::StrCat(" (mapped to ", key->ToString(), ")")
                                         : "",
                                     ": ", stream.status().message()));
  }
  return *stream;
}

absl::StatusOr<std::unique_ptr<Replayer>> Replayer::Create(VirtualMachine* vm,
                                                           const RecordedProgram* program,
                                                           const KernelLookup& kernels,
                                                           ReplayOptions options) {
  if (vm == nullptr || program == nullptr) {
    return absl::InvalidArgumentError("Replayer: null VM or program");
  }
  if (options.eager_chain < 1 || options.eager_chain > vm->options().max_in_flight) {
    return absl::InvalidArgumentError(absl::StrCat("Replayer: eager_chain ", options.eager_chain,
                                                   " is not in [1, ", vm->options().max_in_flight,
                                                   "]"));
  }
  std::unique_ptr<Replayer> replayer(new Replayer(vm, program, std::move(options)));
  const std::string& source = program->source;

  replayer->blob_streams_.resize(program->blobs.size());
  for (size_t b = 0; b < program->blobs.size(); ++b) {
    const RecordedBlob& blob = program->blobs[b];
    SLUICE_ASSIGN_OR_RETURN(replayer->blob_streams_[b],
                            replayer->ResolveStream(blob.stream, blob.line));
    absl::StatusOr<Device> device = Device::Parse(blob.device);
    if (!device.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", blob.line, ": ", device.status().message()));
    }
    auto mapped = replayer->options_.device_map.find(device->ToString());
    if (mapped != replayer->options_.device_map.end()) {
      device = Device::Parse(mapped->second).value();
    }
    if (*device != replayer->blob_streams_[b]->key().device) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", blob.line, ": blob ", blob.id, " lives on ", device->ToString(),
                       " but is created on stream ", replayer->blob_streams_[b]->name()));
    }
  }

  replayer->resolved_.resize(program->instructions.size());
  replayer->last_use_.assign(program->blobs.size(), -1);
  replayer->lazy_.assign(program->blobs.size(), false);
  std::vector<bool> released(program->blobs.size(), false);
  for (size_t n = 0; n < program->instructions.size(); ++n) {
    const RecordedInstruction& r = program->instructions[n];
    Resolved& out = replayer->resolved_[n];
    for (int b : r.inputs) replayer->last_use_[b] = static_cast<int>(n);
    for (int b : r.outputs) replayer->last_use_[b] = static_cast<int>(n);
    // A blob used again after a release was lazy when recorded (a precomputed graph's
    // temporary, allocated by its writer every run): replay it as one.
    if (r.kind == InstructionKind::kRelease) {
      for (int b : r.outputs) released[b] = true;
    } else {
      for (int b : r.inputs) replayer->lazy_[b] = replayer->lazy_[b] || released[b];
      for (int b : r.outputs) replayer->lazy_[b] = replayer->lazy_[b] || released[b];
    }
    if (r.kind == InstructionKind::kBarrier) continue;
    SLUICE_ASSIGN_OR_RETURN(out.stream, replayer->ResolveStream(r.stream, r.line));
    if (r.kind == InstructionKind::kStreamWait) {
      SLUICE_ASSIGN_OR_RETURN(out.wait_target, replayer->ResolveStream(r.wait_target, r.line));
      if (!CanStreamWait(*out.stream, *out.wait_target)) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ":", r.line, ": StreamWait ", out.stream->name(), " -> ",
            out.wait_target->name(), " needs ", kStreamWaitRule, " (check --device-map)"));
      }
    }
    if (r.kind == InstructionKind::kAccessBlob && !out.stream->policy()->host_accessible()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", r.line, ": host access on ",
                                                     out.stream->name(),
                                                     ", whose memory the host cannot address"));
    }
    if (r.kind == InstructionKind::kOpCall) {
      DataType dtype = DataType::kF32;
      if (!r.inputs.empty()) {
        dtype = program->blobs[r.inputs[0]].dtype;
      } else if (!r.outputs.empty()) {
        dtype = program->blobs[r.outputs[0]].dtype;
      }
      absl::StatusOr<const OpKernel*> kernel = kernels(r.kernel, out.stream->key(), dtype);
      if (!kernel.ok()) {
        return absl::Status(kernel.status().code(),
                            absl::StrCat(source, ":", r.line, ": ", kernel.status().message()));
      }
      out.kernel = *kernel;
    }
  }
  for (const RecordedChecksum& c : program->checksums) replayer->last_use_[c.blob] = -1;
  return replayer;
}

absl::StatusOr<ReplayResult> Replayer::Run(bool verify) {
  const RecordedProgram& program = *program_;
  ReplayResult result;
  std::vector<BlobRef> blobs(program.blobs.size());
  std::vector<int> drop;  // blobs whose last use is in the chain being built
  Chain<Instruction> cache;
  Chain<Instruction> chain;

  auto blob = [&](int b) -> absl::StatusOr<Blob*> {
    if (blobs[b] == nullptr) {
      const RecordedBlob& r = program.blobs[b];
      SLUICE_ASSIGN_OR_RETURN(
          blobs[b], lazy_[b] ? vm_->NewLazyBlob(blob_streams_[b], r.dtype, r.shape, r.name)
                             : vm_->NewBlob(blob_streams_[b], r.dtype, r.shape, r.name));
    }
    return blobs[b].get();
  };
  auto flush = [&]() -> absl::Status {
    absl::Status status = ProducerPort(vm_).Submit(std::move(chain));
    chain = Chain<Instruction>();
    // The engine keeps submitted blobs alive; the replay's own references can go.
    for (int b : drop) blobs[b].reset();
    drop.clear();
    return status;
  };
  auto sync = [&]() {
    absl::Status status = vm_->Sync();
    if (result.op_error.ok()) result.op_error = status;
  };
  auto finish = [&](absl::Status status) -> absl::Status {
    if (!chain.empty()) ProducerPort(vm_).Free(std::move(chain));
    ProducerPort(vm_).ReturnUnused(std::move(cache));
    return status;
  };

  const int n = static_cast<int>(program.instructions.size());
  for (int i = 0; i < n;) {
    const RecordedInstruction& first = program.instructions[i];
    if (first.kind == InstructionKind::kBarrier) {
      absl::Status flushed = flush();
      if (!flushed.ok()) return finish(flushed);
      sync();
      ++result.instructions;
      ++i;
      continue;
    }
    const bool batch = first.batch >= 0;
    const int end =
        batch ? program.batch_begin[first.batch] + program.batch_size[first.batch] : i + 1;
    if (batch && !chain.empty()) {
      absl::Status flushed = flush();
      if (!flushed.ok()) return finish(flushed);
    }
    std::vector<Instruction*> members;
    for (; i < end; ++i) {
      const RecordedInstruction& r = program.instructions[i];
      const Resolved& where = resolved_[i];
      Instruction* instruction = ProducerPort(vm_).Allocate(cache);
      chain.PushBack(instruction);
      instruction->kind = r.kind;
      instruction->stream = where.stream;
      instruction->wait_target = where.wait_target;
      instruction->kernel = where.kernel;
      instruction->attrs = r.attrs;
      for (int b : r.inputs) {
        absl::StatusOr<Blob*> ptr = blob(b);
        if (!ptr.ok()) return finish(ptr.status());
        instruction->inputs.push_back(*ptr);
      }
      for (int b : r.outputs) {
        absl::StatusOr<Blob*> ptr = blob(b);
        if (!ptr.ok()) return finish(ptr.status());
        instruction->outputs.push_back(*ptr);
      }
      if (r.kind == InstructionKind::kAccessBlob) {
        const std::vector<uint8_t>* bytes = r.data >= 0 ? &program.data[r.data] : nullptr;
        instruction->blob_callback = [bytes](void* data, size_t size) {
          // A write recorded without data (it failed when recorded) leaves the bytes alone.
          if (bytes != nullptr && size == bytes->size() && size > 0) {
            std::memcpy(data, bytes->data(), size);
          }
          return absl::OkStatus();
        };
      }
      if (batch) {
        instruction->precomputed = true;
        for (int p : r.after) instruction->predecessors.push_back(members[p]);
        members.push_back(instruction);
      }
      for (int b : r.inputs) {
        if (last_use_[b] == i) drop.push_back(b);
      }
      for (int b : r.outputs) {
        if (last_use_[b] == i) drop.push_back(b);
      }
      ++result.instructions;
    }
    if (batch || static_cast<int>(chain.size) >= options_.eager_chain) {
      absl::Status flushed = flush();
      if (!flushed.ok()) return finish(flushed);
    }
  }
  absl::Status flushed = flush();
  if (!flushed.ok()) return finish(flushed);
  sync();
  SLUICE_RETURN_IF_ERROR(finish(absl::OkStatus()));

  if (!verify) return result;
  for (const RecordedChecksum& c : program.checksums) {
    const RecordedBlob& recorded = program.blobs[c.blob];
    const BlobRef& replayed = blobs[c.blob];
    ChecksumMismatch mismatch;
    mismatch.blob_id = recorded.id;
    mismatch.blob = recorded.name.empty()
                        ? absl::StrCat("blob #", recorded.id)
                        : absl::StrCat("blob #", recorded.id, " '", recorded.name, "'");
    mismatch.expected = c.checksum;
    mismatch.line = c.line;
    if (replayed == nullptr || replayed->storage() == nullptr) {
      // Never touched by an instruction (nothing to compare) or freed by the replay.
      if (replayed == nullptr) {
        ++result.checksums_skipped;
        continue;
      }
      mismatch.released = true;
      result.mismatches.push_back(std::move(mismatch));
      ++result.checksums_compared;
      continue;
    }
    if (replayed->device().type() == DeviceType::kCuda) {
      ++result.checksums_skipped;
      continue;
    }
    // Everything is complete after the final sync: host-addressable bytes are final.
    const TensorStorage* storage = replayed->storage();
    mismatch.actual = Checksum(
        absl::MakeConstSpan(static_cast<const uint8_t*>(storage->data()), storage->bytes()));
    ++result.checksums_compared;
    if (mismatch.actual != mismatch.expected) result.mismatches.push_back(std::move(mismatch));
  }
  return result;
}

}  // namespace sluice::vm
