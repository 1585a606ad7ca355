#include "vm/replayer.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "vm/internal/stream_policy.h"
#include "vm/producer_port.h"
#include "vm/recorder.h"
#include "vm/step_sequence.h"
#include "vm/stream.h"
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

int Replayer::StreamIndex(Stream* stream) {
  auto [it, added] = stream_index_.emplace(stream, static_cast<int>(streams_.size()));
  if (added) {
    auto [worker, unused] =
        worker_index_.emplace(stream->thread_ctx(), static_cast<int>(worker_index_.size()));
    streams_.push_back(stream);
    topology_.streams.push_back(ReplayStreamFacts{
        stream->key().device, VirtualMachine::RunsOnHost(*stream), worker->second});
  }
  return it->second;
}

absl::Status Replayer::ResolveBlobs() {
  const RecordedProgram& program = *program_;
  blob_streams_.resize(program.blobs.size());
  for (size_t b = 0; b < program.blobs.size(); ++b) {
    const RecordedBlob& blob = program.blobs[b];
    SLUICE_ASSIGN_OR_RETURN(blob_streams_[b], ResolveStream(blob.stream, blob.line));
    absl::StatusOr<Device> device = Device::Parse(blob.device);
    if (!device.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(program.source, ":", blob.line, ": ", device.status().message()));
    }
    auto mapped = options_.device_map.find(device->ToString());
    if (mapped != options_.device_map.end()) device = Device::Parse(mapped->second).value();
    if (*device != blob_streams_[b]->key().device) {
      return absl::InvalidArgumentError(
          absl::StrCat(program.source, ":", blob.line, ": blob ", blob.id, " lives on ",
                       device->ToString(), " but is created on stream ", blob_streams_[b]->name()));
    }
  }
  return absl::OkStatus();
}

absl::Status Replayer::ResolveInstructions(const KernelLookup& kernels) {
  const RecordedProgram& program = *program_;
  const size_t n = program.instructions.size();
  kernels_.assign(n, nullptr);
  topology_.instruction_stream.assign(n, -1);
  topology_.instruction_wait_target.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const RecordedInstruction& r = program.instructions[i];
    if (r.kind == InstructionKind::kBarrier && r.batch >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(program.source, ":", r.line, ": a barrier inside a batch"));
    }
    if (r.kind == InstructionKind::kBarrier) continue;
    SLUICE_ASSIGN_OR_RETURN(Stream * stream, ResolveStream(r.stream, r.line));
    topology_.instruction_stream[i] = StreamIndex(stream);
    if (r.drops > 0 && !VirtualMachine::RunsOnHost(*stream)) {
      return absl::InvalidArgumentError(absl::StrCat(
          program.source, ":", r.line, ": a shared release (drops=", r.drops, ") runs on ",
          stream->name(), ", which does not run on the host (check --device-map)"));
    }
    if (r.kind == InstructionKind::kStreamWait) {
      SLUICE_ASSIGN_OR_RETURN(Stream * target, ResolveStream(r.wait_target, r.line));
      topology_.instruction_wait_target[i] = StreamIndex(target);
    }
    if (r.kind == InstructionKind::kOpCall && r.expansion < 0) {
      SLUICE_ASSIGN_OR_RETURN(kernels_[i], ResolveKernel(r, *stream, kernels));
    }
  }
  return absl::OkStatus();
}

absl::Status Replayer::ResolveExpansions(const KernelLookup& kernels) {
  // An expansion's steps run on the expanded op's stream.
  const RecordedProgram& program = *program_;
  expansion_kernels_.resize(program.expansions.size());
  for (size_t e = 0; e < program.expansions.size(); ++e) {
    const RecordedExpansion& expansion = program.expansions[e];
    Stream* stream = StreamOf(expansion.instruction);
    for (const RecordedInstruction& step : expansion.steps) {
      SLUICE_ASSIGN_OR_RETURN(Stream * at, ResolveStream(step.stream, step.line));
      if (at != stream) {
        return absl::InvalidArgumentError(absl::StrCat(
            program.source, ":", step.line, ": a step of the expansion at line ", expansion.line,
            " runs on ", at->name(), ", not on its op's stream ", stream->name()));
      }
      if (step.kind == InstructionKind::kRelease && step.drops > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(program.source, ":", step.line, ": a shared release inside an expansion"));
      }
      const OpKernel* kernel = nullptr;
      if (step.kind == InstructionKind::kOpCall) {
        SLUICE_ASSIGN_OR_RETURN(kernel, ResolveKernel(step, *stream, kernels));
      }
      expansion_kernels_[e].push_back(kernel);
    }
  }
  return absl::OkStatus();
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
  SLUICE_RETURN_IF_ERROR(replayer->ResolveBlobs());
  SLUICE_RETURN_IF_ERROR(replayer->ResolveInstructions(kernels));
  SLUICE_RETURN_IF_ERROR(replayer->ResolveExpansions(kernels));
  replayer->plan_ = PlanReplay(*program, replayer->topology_, replayer->options_.rebuild_lanes);
  return replayer;
}

// One Run: the replayed blobs, the chain being built and, inside a batch, its members and
// rebuilt lanes. Lives on the Run's stack.
class Replayer::Runner {
 public:
  Runner(Replayer& replayer, ReplayResult& result)
      : r_(replayer),
        program_(*replayer.program_),
        plan_(replayer.plan_),
        result_(result),
        blobs_(program_.blobs.size()),
        port_(replayer.vm_) {}

  // Submits every line, then syncs. On error the caller still calls Finish.
  absl::Status Replay();
  // Frees what was built and not submitted; sequences are dropped once their work is done.
  absl::Status Finish(absl::Status status);
  // Compares the checksums with the replayed blobs (after Finish).
  void Verify();

 private:
  absl::StatusOr<Blob*> BlobOf(int b);
  absl::Status Operands(const RecordedInstruction& r, BlobPtrs* inputs, BlobPtrs* outputs);
  absl::StatusOr<const OpKernel*> KernelOf(int i);
  void NoteLastUses(const RecordedInstruction& r, int i);
  absl::Status Flush();
  void SyncPoint();
  absl::Status ReplayBatch(int b);
  absl::Status BuildLanes(const ReplayLanes& lanes);
  void AddLaneMember(int i, int lane);
  void AddWaits(int i, absl::InlinedVector<Instruction*, 2>* preds);
  absl::Status AddInstruction(int i, bool batch);

  Replayer& r_;
  const RecordedProgram& program_;
  const ReplayPlan& plan_;
  ReplayResult& result_;
  std::vector<BlobRef> blobs_;
  ProducerPort port_;
  std::vector<int> drop_;  // blobs whose last use is in the chain being built
  Chain<Instruction> cache_;
  Chain<Instruction> chain_;
  // The batch being built: its first instruction, members (per position, the instruction
  // that runs it), lanes, and per lane its sequence and instruction.
  int batch_begin_ = 0;
  const ReplayLanes* lanes_ = nullptr;
  std::vector<Instruction*> members_;
  std::vector<StepSequence*> lane_sequence_;
  std::vector<Instruction*> lane_instruction_;
};

absl::StatusOr<Blob*> Replayer::Runner::BlobOf(int b) {
  if (blobs_[b] == nullptr) {
    const RecordedBlob& r = program_.blobs[b];
    Stream* stream = r_.blob_streams_[b];
    SLUICE_ASSIGN_OR_RETURN(blobs_[b], plan_.lazy[b]
                                           ? r_.vm_->NewLazyBlob(stream, r.dtype, r.shape, r.name)
                                           : r_.vm_->NewBlob(stream, r.dtype, r.shape, r.name));
  }
  return blobs_[b].get();
}

absl::Status Replayer::Runner::Operands(const RecordedInstruction& r, BlobPtrs* inputs,
                                        BlobPtrs* outputs) {
  for (int b : r.inputs) {
    SLUICE_ASSIGN_OR_RETURN(Blob * ptr, BlobOf(b));
    inputs->push_back(ptr);
  }
  for (int b : r.outputs) {
    SLUICE_ASSIGN_OR_RETURN(Blob * ptr, BlobOf(b));
    outputs->push_back(ptr);
  }
  return absl::OkStatus();
}

// The kernel of instruction `i`: its op's, or — for an op recorded with an expansion — a
// sequence of the steps it ran, kept with the lanes' sequences.
absl::StatusOr<const OpKernel*> Replayer::Runner::KernelOf(int i) {
  const RecordedInstruction& r = program_.instructions[i];
  if (r.expansion < 0) return r_.kernels_[i];
  const RecordedExpansion& expansion = program_.expansions[r.expansion];
  r_.sequences_.push_back(std::make_unique<StepSequence>());
  StepSequence& steps = *r_.sequences_.back();
  for (size_t k = 0; k < expansion.steps.size(); ++k) {
    const RecordedInstruction& step = expansion.steps[k];
    BlobPtrs inputs, outputs;
    SLUICE_RETURN_IF_ERROR(Operands(step, &inputs, &outputs));
    if (step.kind == InstructionKind::kRelease) {
      steps.AddRelease(outputs.front());
    } else {
      steps.AddCall(*r_.expansion_kernels_[r.expansion][k], std::move(inputs), std::move(outputs),
                    step.attrs);
    }
  }
  steps.Close();
  ++result_.expansions;
  return &steps;
}

// Blobs whose last use is instruction `i` are dropped once the chain holding it is handed
// over.
void Replayer::Runner::NoteLastUses(const RecordedInstruction& r, int i) {
  for (int b : r.inputs) {
    if (plan_.last_use[b] == i) drop_.push_back(b);
  }
  for (int b : r.outputs) {
    if (plan_.last_use[b] == i) drop_.push_back(b);
  }
  ++result_.instructions;
}

absl::Status Replayer::Runner::Flush() {
  absl::Status status = port_.Submit(std::move(chain_));
  chain_ = Chain<Instruction>();
  // The engine keeps submitted blobs alive; the replay's own references can go.
  for (int b : drop_) blobs_[b].reset();
  drop_.clear();
  return status;
}

void Replayer::Runner::SyncPoint() {
  absl::Status status = r_.vm_->Sync();
  if (result_.op_error.ok()) result_.op_error = status;
}

absl::Status Replayer::Runner::Finish(absl::Status status) {
  if (!chain_.empty()) port_.Free(std::move(chain_));
  port_.ReturnUnused(std::move(cache_));
  if (!r_.sequences_.empty()) {
    // The rebuilt sequences must outlive the work that runs them.
    if (!status.ok()) r_.vm_->Sync().IgnoreError();
    r_.sequences_.clear();
  }
  return status;
}

absl::Status Replayer::Runner::Replay() {
  const int n = static_cast<int>(program_.instructions.size());
  for (int i = 0; i < n;) {
    const RecordedInstruction& first = program_.instructions[i];
    if (first.kind == InstructionKind::kBarrier) {
      SLUICE_RETURN_IF_ERROR(Flush());
      SyncPoint();
      ++result_.instructions;
      ++i;
    } else if (first.batch >= 0) {
      SLUICE_RETURN_IF_ERROR(ReplayBatch(first.batch));
      i = program_.batch_begin[first.batch] + program_.batch_size[first.batch];
    } else {
      SLUICE_RETURN_IF_ERROR(AddInstruction(i++, /*batch=*/false));
      if (static_cast<int>(chain_.size) >= r_.options_.eager_chain) {
        SLUICE_RETURN_IF_ERROR(Flush());
      }
    }
  }
  SLUICE_RETURN_IF_ERROR(Flush());
  SyncPoint();
  return absl::OkStatus();
}

absl::Status Replayer::Runner::ReplayBatch(int b) {
  if (!chain_.empty()) SLUICE_RETURN_IF_ERROR(Flush());
  batch_begin_ = program_.batch_begin[b];
  const int end = batch_begin_ + program_.batch_size[b];
  members_.clear();
  lanes_ = plan_.lanes[b].lane.empty() ? nullptr : &plan_.lanes[b];
  if (lanes_ != nullptr) SLUICE_RETURN_IF_ERROR(BuildLanes(*lanes_));
  for (int i = batch_begin_; i < end; ++i) {
    const int lane = lanes_ != nullptr ? lanes_->lane[i - batch_begin_] : -1;
    if (lane >= 0) {
      AddLaneMember(i, lane);
    } else {
      SLUICE_RETURN_IF_ERROR(AddInstruction(i, /*batch=*/true));
    }
  }
  return Flush();
}

// Every rebuilt sequence complete with its waits before any is submitted.
absl::Status Replayer::Runner::BuildLanes(const ReplayLanes& lanes) {
  r_.run_.fetch_add(1, std::memory_order_relaxed);  // before the submission
  lane_sequence_.clear();
  absl::flat_hash_map<uint64_t, int> lane_by_seq;
  for (size_t l = 0; l < lanes.positions.size(); ++l) {
    r_.sequences_.push_back(std::make_unique<StepSequence>());
    lane_sequence_.push_back(r_.sequences_.back().get());
    lane_sequence_.back()->set_run_counter(&r_.run_);
    lane_by_seq[program_.instructions[batch_begin_ + lanes.positions[l].front()].seq] =
        static_cast<int>(l);
  }
  lane_instruction_.assign(lanes.positions.size(), nullptr);
  for (size_t p = 0; p < lanes.lane.size(); ++p) {
    if (lanes.lane[p] < 0) continue;
    const RecordedInstruction& r = program_.instructions[batch_begin_ + p];
    StepSequence& sequence = *lane_sequence_[lanes.lane[p]];
    for (const RecordedInstruction::Wait& wait : r.waits) {
      sequence.AddWait(lane_sequence_[lane_by_seq.at(wait.source_seq)], wait.steps);
    }
    BlobPtrs inputs, outputs;
    SLUICE_RETURN_IF_ERROR(Operands(r, &inputs, &outputs));
    if (r.kind == InstructionKind::kRelease && r.drops > 0) {
      sequence.AddSharedRelease(outputs.front(), r_.ReleaseCountFor(r));
    } else if (r.kind == InstructionKind::kRelease) {
      sequence.AddRelease(outputs.front());
    } else {
      SLUICE_ASSIGN_OR_RETURN(const OpKernel* kernel, KernelOf(batch_begin_ + p));
      sequence.AddCall(*kernel, std::move(inputs), std::move(outputs), r.attrs);
    }
  }
  for (StepSequence* sequence : lane_sequence_) sequence->Close();
  result_.lane_sequences += static_cast<int64_t>(lanes.positions.size());
  return absl::OkStatus();
}

// A step of a rebuilt lane. The lane's first step places the lane's instruction: it lists
// every blob the sequence uses (the engine keeps them alive), and its predecessors are the
// edges into the lane from outside it, in batch order. Later steps run inside it.
void Replayer::Runner::AddLaneMember(int i, int lane) {
  const RecordedInstruction& r = program_.instructions[i];
  if (lane_instruction_[lane] == nullptr) {
    const StepSequence& sequence = *lane_sequence_[lane];
    Instruction* instruction = port_.Allocate(cache_);
    chain_.PushBack(instruction);
    instruction->kind = InstructionKind::kOpCall;
    instruction->stream = r_.StreamOf(i);
    instruction->kernel = &sequence;
    instruction->inputs = sequence.union_inputs();
    instruction->outputs = sequence.union_outputs();
    instruction->precomputed = true;
    absl::flat_hash_set<Instruction*> preds;
    for (int p : lanes_->positions[lane]) {
      for (int a : program_.instructions[batch_begin_ + p].after) {
        // A step of another lane runs inside that lane's instruction, placed earlier
        // (PlanReplay); it may come later in the batch than this lane's first step.
        const int other = lanes_->lane[a];
        if (other == lane) continue;
        preds.insert(other >= 0 ? lane_instruction_[other] : members_[a]);
      }
    }
    // In the recorded order (members in batch order; an earlier lane is among them).
    for (Instruction* member : members_) {
      if (preds.erase(member) > 0) instruction->predecessors.push_back(member);
    }
    lane_instruction_[lane] = instruction;
  }
  members_.push_back(lane_instruction_[lane]);
  NoteLastUses(r, i);
}

// What orders each awaited step before step `i` (outside the lanes), as planned.
void Replayer::Runner::AddWaits(int i, absl::InlinedVector<Instruction*, 2>* preds) {
  const RecordedInstruction& r = program_.instructions[i];
  for (size_t w = 0; w < r.waits.size(); ++w) {
    Instruction* source = members_[r.waits[w].source_position];
    const ReplayWaitOrder order = plan_.wait_orders[i][w];
    if (order == ReplayWaitOrder::kEngineEdge) {
      preds->push_back(source);
      continue;
    }
    Instruction* sync = port_.Allocate(cache_);
    chain_.PushBack(sync);
    sync->kind = order == ReplayWaitOrder::kStreamWait ? InstructionKind::kStreamWait
                                                       : InstructionKind::kRecordEvent;
    sync->stream = source->stream;
    if (order == ReplayWaitOrder::kStreamWait) sync->wait_target = r_.StreamOf(i);
    sync->precomputed = true;
    sync->predecessors.push_back(source);
    preds->push_back(sync);
  }
}

absl::Status Replayer::Runner::AddInstruction(int i, bool batch) {
  const RecordedInstruction& r = program_.instructions[i];
  absl::InlinedVector<Instruction*, 2> wait_preds;
  if (batch) AddWaits(i, &wait_preds);
  Instruction* instruction = port_.Allocate(cache_);
  chain_.PushBack(instruction);
  instruction->kind = plan_.wait_as_record[i] ? InstructionKind::kRecordEvent : r.kind;
  instruction->stream = r_.StreamOf(i);
  if (r.kind == InstructionKind::kStreamWait && !plan_.wait_as_record[i]) {
    instruction->wait_target = r_.streams_[r_.topology_.instruction_wait_target[i]];
  }
  if (r.kind == InstructionKind::kOpCall) {
    SLUICE_ASSIGN_OR_RETURN(instruction->kernel, KernelOf(i));
  }
  instruction->attrs = r.attrs;
  if (r.drops > 0) instruction->release_count = r_.ReleaseCountFor(r);
  SLUICE_RETURN_IF_ERROR(Operands(r, &instruction->inputs, &instruction->outputs));
  if (r.kind == InstructionKind::kAccessBlob) {
    const std::vector<uint8_t>* bytes = r.data >= 0 ? &program_.data[r.data] : nullptr;
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
    for (int p : r.after) instruction->predecessors.push_back(members_[p]);
    for (Instruction* pred : wait_preds) instruction->predecessors.push_back(pred);
    members_.push_back(instruction);
  }
  NoteLastUses(r, i);
  return absl::OkStatus();
}

void Replayer::Runner::Verify() {
  for (const RecordedChecksum& c : program_.checksums) {
    const RecordedBlob& recorded = program_.blobs[c.blob];
    const BlobRef& replayed = blobs_[c.blob];
    if (replayed == nullptr) {
      ++result_.checksums_skipped;  // never touched by an instruction: nothing to compare
      continue;
    }
    if (replayed->storage() != nullptr && replayed->device().type() == DeviceType::kCuda) {
      ++result_.checksums_skipped;
      continue;
    }
    ChecksumMismatch mismatch;
    mismatch.blob_id = recorded.id;
    mismatch.blob = recorded.name.empty()
                        ? absl::StrCat("blob #", recorded.id)
                        : absl::StrCat("blob #", recorded.id, " '", recorded.name, "'");
    mismatch.expected = c.checksum;
    mismatch.line = c.line;
    ++result_.checksums_compared;
    const TensorStorage* storage = replayed->storage();
    if (storage == nullptr) {
      mismatch.released = true;  // freed by the replay
      result_.mismatches.push_back(std::move(mismatch));
      continue;
    }
    // Everything is complete after the final sync: host-addressable bytes are final.
    mismatch.actual = Checksum(
        absl::MakeConstSpan(static_cast<const uint8_t*>(storage->data()), storage->bytes()));
    if (mismatch.actual != mismatch.expected) result_.mismatches.push_back(std::move(mismatch));
  }
}

absl::StatusOr<ReplayResult> Replayer::Run(bool verify) {
  ReplayResult result;
  Runner runner(*this, result);
  SLUICE_RETURN_IF_ERROR(runner.Finish(runner.Replay()));
  if (verify) runner.Verify();
  return result;
}

}  // namespace sluice::vm
