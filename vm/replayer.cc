#include "vm/replayer.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "vm/producer_port.h"
#include "vm/recorder.h"
#include "vm/step_sequence.h"
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

Replayer::Replayer(VirtualMachine* vm, const RecordedProgram* program, ReplayOptions options)
    : vm_(vm), program_(program), options_(std::move(options)) {}

Replayer::~Replayer() {
  // Work of a failed Run may still run rebuilt sequences.
  if (!sequences_.empty()) vm_->Sync().IgnoreError();
}

Replayer::LanePlan Replayer::PlanLanes(int b) const {
  const int begin = program_->batch_begin[b];
  const int size = program_->batch_size[b];
  const auto at = [&](int p) -> const RecordedInstruction& {
    return program_->instructions[begin + p];
  };
  absl::flat_hash_set<uint64_t> waiting;  // sequences that wait or are waited for
  for (int p = 0; p < size; ++p) {
    for (const RecordedInstruction::Wait& wait : at(p).waits) {
      waiting.insert(at(p).seq);
      waiting.insert(wait.source_seq);
    }
  }
  LanePlan plan;
  if (waiting.empty() || !options_.rebuild_lanes) return plan;
  std::vector<int> lane(size, -1);
  absl::flat_hash_map<uint64_t, int> lane_of;
  std::vector<Stream*> streams;
  for (int p = 0; p < size; ++p) {
    const RecordedInstruction& r = at(p);
    if (!waiting.contains(r.seq)) continue;
    auto [it, added] = lane_of.emplace(r.seq, static_cast<int>(plan.positions.size()));
    if (added) {
      plan.positions.emplace_back();
      streams.push_back(resolved_[begin + p].stream);
    }
    const bool step = r.kind == InstructionKind::kOpCall || r.kind == InstructionKind::kRelease;
    if (!step || resolved_[begin + p].stream != streams[it->second]) return LanePlan();
    lane[p] = it->second;
    plan.positions[it->second].push_back(p);
  }
  // One sequence per worker, each on a stream that runs on its worker (StepSequence::AddWait).
  if (!vm_->CanRunLanes(streams)) return LanePlan();
  // A lane becomes one instruction at its first step's place: every edge into it from
  // outside must come from a place before that.
  for (size_t l = 0; l < plan.positions.size(); ++l) {
    const int first = plan.positions[l].front();
    for (int p : plan.positions[l]) {
      for (int a : at(p).after) {
        if (lane[a] == static_cast<int>(l)) continue;
        const int place = lane[a] >= 0 ? plan.positions[lane[a]].front() : a;
        if (place >= first) return LanePlan();
      }
    }
  }
  plan.lane = std::move(lane);
  return plan;
}

ReleaseCount* Replayer::ReleaseCountFor(const RecordedInstruction& r) {
  std::unique_ptr<ReleaseCount>& count = release_counts_[{r.outputs.front(), r.drops}];
  if (count == nullptr) count = std::make_unique<ReleaseCount>(static_cast<uint32_t>(r.drops));
  return count.get();
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

absl::StatusOr<const OpKernel*> Replayer::ResolveKernel(const RecordedInstruction& r,
                                                        const Stream& stream,
                                                        const KernelLookup& kernels) const {
  DataType dtype = DataType::kF32;
  if (!r.inputs.empty()) {
    dtype = program_->blobs[r.inputs[0]].dtype;
  } else if (!r.outputs.empty()) {
    dtype = program_->blobs[r.outputs[0]].dtype;
  }
  absl::StatusOr<const OpKernel*> kernel = kernels(r.kernel, stream.key(), dtype);
  if (!kernel.ok()) {
    return absl::Status(kernel.status().code(), absl::StrCat(program_->source, ":", r.line, ": ",
                                                             kernel.status().message()));
  }
  return *kernel;
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
    if (r.drops > 0 && !VirtualMachine::RunsOnHost(*out.stream)) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", r.line, ": a shared release (drops=", r.drops, ") runs on ",
          out.stream->name(), ", which does not run on the host (check --device-map)"));
    }
    if (r.kind == InstructionKind::kStreamWait) {
      SLUICE_ASSIGN_OR_RETURN(out.wait_target, replayer->ResolveStream(r.wait_target, r.line));
      if (!CanStreamWait(*out.stream, *out.wait_target)) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ":", r.line, ": StreamWait ", out.stream->name(), " -> ",
            out.wait_target->name(), " needs ", kStreamWaitRule, " (check --device-map)"));
      }
    }
    if (r.kind == InstructionKind::kOpCall && r.expansion < 0) {
      SLUICE_ASSIGN_OR_RETURN(out.kernel, replayer->ResolveKernel(r, *out.stream, kernels));
    }
  }
  // Expansions: their steps run on the expanded op's stream, and their blobs (a loop's
  // frames, reused by every run of the graph) stay alive to the end of the replay.
  replayer->expansion_kernels_.resize(program->expansions.size());
  for (size_t e = 0; e < program->expansions.size(); ++e) {
    const RecordedExpansion& expansion = program->expansions[e];
    Stream* stream = replayer->resolved_[expansion.instruction].stream;
    for (const RecordedInstruction& step : expansion.steps) {
      for (int b : step.inputs) replayer->last_use_[b] = -1;
      for (int b : step.outputs) replayer->last_use_[b] = -1;
      // A blob an expansion releases is written again by a later step or run: lazy, as
      // when recorded.
      if (step.kind == InstructionKind::kRelease) {
        for (int b : step.outputs) replayer->lazy_[b] = true;
      }
      SLUICE_ASSIGN_OR_RETURN(Stream * at, replayer->ResolveStream(step.stream, step.line));
      if (at != stream) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ":", step.line, ": a step of the expansion at line ", expansion.line,
            " runs on ", at->name(), ", not on its op's stream ", stream->name()));
      }
      if (step.kind == InstructionKind::kRelease && step.drops > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", step.line, ": a shared release inside an expansion"));
      }
      const OpKernel* kernel = nullptr;
      if (step.kind == InstructionKind::kOpCall) {
        SLUICE_ASSIGN_OR_RETURN(kernel, replayer->ResolveKernel(step, *stream, kernels));
      }
      replayer->expansion_kernels_[e].push_back(kernel);
    }
  }
  for (const RecordedChecksum& c : program->checksums) replayer->last_use_[c.blob] = -1;
  replayer->lanes_.resize(program->batch_begin.size());
  for (size_t b = 0; b < program->batch_begin.size(); ++b) {
    replayer->lanes_[b] = replayer->PlanLanes(static_cast<int>(b));
  }
  return replayer;
}

absl::StatusOr<ReplayResult> Replayer::Run(bool verify) {
  const RecordedProgram& program = *program_;
  ReplayResult result;
  std::vector<BlobRef> blobs(program.blobs.size());
  ProducerPort port(vm_);
  std::vector<int> drop;  // blobs whose last use is in the chain being built
  // Blobs whose last use is instruction `i` are dropped once the chain holding it is handed
  // over.
  auto note_last_uses = [&](const RecordedInstruction& r, int i) {
    for (int b : r.inputs) {
      if (last_use_[b] == i) drop.push_back(b);
    }
    for (int b : r.outputs) {
      if (last_use_[b] == i) drop.push_back(b);
    }
  };
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
  // The kernel of instruction `i`: its op's, or — for an op recorded with an expansion —
  // a sequence of the steps it ran, kept with the lanes' sequences.
  auto kernel_of = [&](int i) -> absl::StatusOr<const OpKernel*> {
    const RecordedInstruction& r = program.instructions[i];
    if (r.expansion < 0) return resolved_[i].kernel;
    const RecordedExpansion& expansion = program.expansions[r.expansion];
    sequences_.push_back(std::make_unique<StepSequence>());
    StepSequence& steps = *sequences_.back();
    for (size_t k = 0; k < expansion.steps.size(); ++k) {
      const RecordedInstruction& step = expansion.steps[k];
      BlobPtrs inputs, outputs;
      for (int b : step.inputs) {
        SLUICE_ASSIGN_OR_RETURN(Blob * ptr, blob(b));
        inputs.push_back(ptr);
      }
      for (int b : step.outputs) {
        SLUICE_ASSIGN_OR_RETURN(Blob * ptr, blob(b));
        outputs.push_back(ptr);
      }
      if (step.kind == InstructionKind::kRelease) {
        steps.AddRelease(outputs.front());
      } else {
        steps.AddCall(*expansion_kernels_[r.expansion][k], std::move(inputs), std::move(outputs),
                      step.attrs);
      }
    }
    steps.Close();
    ++result.expansions;
    return &steps;
  };
  auto flush = [&]() -> absl::Status {
    absl::Status status = port.Submit(std::move(chain));
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
    if (!chain.empty()) port.Free(std::move(chain));
    port.ReturnUnused(std::move(cache));
    if (!sequences_.empty()) {
      // The rebuilt sequences must outlive the work that runs them.
      if (!status.ok()) vm_->Sync().IgnoreError();
      sequences_.clear();
    }
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
    // Rebuilt lanes: every sequence complete with its waits before any is submitted.
    const LanePlan* plan =
        batch && !lanes_[first.batch].lane.empty() ? &lanes_[first.batch] : nullptr;
    std::vector<StepSequence*> lane_sequence;
    std::vector<Instruction*> lane_instruction;
    if (plan != nullptr) {
      const int begin = i;
      run_.fetch_add(1, std::memory_order_relaxed);  // before the submission
      absl::flat_hash_map<uint64_t, int> lane_by_seq;
      for (size_t l = 0; l < plan->positions.size(); ++l) {
        sequences_.push_back(std::make_unique<StepSequence>());
        lane_sequence.push_back(sequences_.back().get());
        lane_sequence.back()->set_run_counter(&run_);
        lane_by_seq[program.instructions[begin + plan->positions[l].front()].seq] =
            static_cast<int>(l);
      }
      lane_instruction.assign(plan->positions.size(), nullptr);
      for (int p = 0; p < end - begin; ++p) {
        if (plan->lane[p] < 0) continue;
        const RecordedInstruction& r = program.instructions[begin + p];
        StepSequence& sequence = *lane_sequence[plan->lane[p]];
        for (const RecordedInstruction::Wait& wait : r.waits) {
          sequence.AddWait(lane_sequence[lane_by_seq.at(wait.source_seq)], wait.steps);
        }
        BlobPtrs inputs, outputs;
        for (int b : r.inputs) {
          absl::StatusOr<Blob*> ptr = blob(b);
          if (!ptr.ok()) return finish(ptr.status());
          inputs.push_back(*ptr);
        }
        for (int b : r.outputs) {
          absl::StatusOr<Blob*> ptr = blob(b);
          if (!ptr.ok()) return finish(ptr.status());
          outputs.push_back(*ptr);
        }
        if (r.kind == InstructionKind::kRelease && r.drops > 0) {
          sequence.AddSharedRelease(outputs.front(), ReleaseCountFor(r));
        } else if (r.kind == InstructionKind::kRelease) {
          sequence.AddRelease(outputs.front());
        } else {
          absl::StatusOr<const OpKernel*> kernel = kernel_of(begin + p);
          if (!kernel.ok()) return finish(kernel.status());
          sequence.AddCall(**kernel, std::move(inputs), std::move(outputs), r.attrs);
        }
      }
      for (StepSequence* sequence : lane_sequence) sequence->Close();
      result.lane_sequences += static_cast<int64_t>(plan->positions.size());
    }
    const int batch_begin = i;
    for (; i < end; ++i) {
      const RecordedInstruction& r = program.instructions[i];
      const Resolved& where = resolved_[i];
      const int lane = plan != nullptr ? plan->lane[i - batch_begin] : -1;
      if (lane >= 0 && lane_instruction[lane] != nullptr) {
        // A later step of a rebuilt lane: it runs inside the lane's instruction.
        members.push_back(lane_instruction[lane]);
        note_last_uses(r, i);
        ++result.instructions;
        continue;
      }
      if (lane >= 0) {
        // A rebuilt lane's first step: the lane's instruction. It lists every blob the
        // sequence uses (the engine keeps them alive); its predecessors are the edges into
        // the lane from outside it.
        const StepSequence& sequence = *lane_sequence[lane];
        Instruction* instruction = port.Allocate(cache);
        chain.PushBack(instruction);
        instruction->kind = InstructionKind::kOpCall;
        instruction->stream = where.stream;
        instruction->kernel = &sequence;
        instruction->inputs = sequence.union_inputs();
        instruction->outputs = sequence.union_outputs();
        instruction->precomputed = true;
        absl::flat_hash_set<Instruction*> preds;
        for (int p : plan->positions[lane]) {
          for (int a : program.instructions[batch_begin + p].after) {
            if (plan->lane[a] != lane) preds.insert(members[a]);
          }
        }
        for (int a = 0; a < i - batch_begin; ++a) {
          // Keep the recorded order of predecessors (members in batch order).
          if (preds.erase(members[a]) > 0) instruction->predecessors.push_back(members[a]);
        }
        lane_instruction[lane] = instruction;
        members.push_back(instruction);
        note_last_uses(r, i);
        ++result.instructions;
        continue;
      }
      // Waits of steps not rebuilt as lanes: what orders the awaited step before this one,
      // as the interpreter orders streams without lanes — an engine edge from work on the
      // host that the engine releases in time (see WaitsOnHost), a StreamWait on one
      // device, a RecordEvent the host waits for across devices.
      absl::InlinedVector<Instruction*, 2> wait_preds;
      for (const RecordedInstruction::Wait& wait : r.waits) {
        Instruction* source = members[wait.source_position];
        Stream* from = source->stream;
        if (from == where.stream ||
            (VirtualMachine::RunsOnHost(*from) && !WaitsOnHost(*from, *where.stream))) {
          wait_preds.push_back(source);
          continue;
        }
        Instruction* sync = port.Allocate(cache);
        chain.PushBack(sync);
        const bool same_device = CanStreamWait(*from, *where.stream);
        sync->kind = same_device ? InstructionKind::kStreamWait : InstructionKind::kRecordEvent;
        sync->stream = from;
        if (same_device) sync->wait_target = where.stream;
        sync->precomputed = true;
        sync->predecessors.push_back(source);
        wait_preds.push_back(sync);
      }
      Instruction* instruction = port.Allocate(cache);
      chain.PushBack(instruction);
      instruction->kind = r.kind;
      instruction->stream = where.stream;
      instruction->wait_target = where.wait_target;
      if (r.kind == InstructionKind::kOpCall) {
        absl::StatusOr<const OpKernel*> kernel = kernel_of(i);
        if (!kernel.ok()) return finish(kernel.status());
        instruction->kernel = *kernel;
      }
      instruction->attrs = r.attrs;
      if (r.drops > 0) instruction->release_count = ReleaseCountFor(r);
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
        for (Instruction* pred : wait_preds) instruction->predecessors.push_back(pred);
        members.push_back(instruction);
      }
      note_last_uses(r, i);
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
