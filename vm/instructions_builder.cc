#include "vm/instructions_builder.h"

#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "vm/blob_access_waiter.h"
#include "vm/internal/blob_lifecycle.h"
#include "vm/internal/submit_buffer.h"
#include "vm/stream.h"
#include "vm/virtual_machine.h"

namespace sluice::vm {

using internal::BlobLifecycle;

InstructionsBuilder::InstructionsBuilder(VirtualMachine* vm)
    : vm_(vm), port_(vm), buffer_(std::make_unique<internal::SubmitBuffer>()) {
  port_.AttachBuffer(buffer_.get());
}

InstructionsBuilder::~InstructionsBuilder() {
  port_.DetachBuffer(buffer_.get());
  port_.ReturnUnused(std::move(cache_));
}

void InstructionsBuilder::Flush() { port_.HandOverBuffers(); }

Instruction* InstructionsBuilder::Allocate() { return port_.Allocate(cache_); }

inline bool InstructionsBuilder::Usable(const Blob* blob) {
  return blob != nullptr && !BlobLifecycle::Producer::released(*blob) && !blob->lazy();
}

absl::Status InstructionsBuilder::CheckUsable(const Blob* blob) const {
  if (blob == nullptr) return absl::InvalidArgumentError("null blob");
  if (BlobLifecycle::Producer::released(*blob)) {
    return absl::InvalidArgumentError(absl::StrCat(blob->DebugName(), " was released"));
  }
  if (blob->lazy()) {
    // Soft sync follows a blob's storage; a lazy blob belongs to a precomputed graph.
    return absl::InvalidArgumentError(
        absl::StrCat(blob->DebugName(), " is lazy (a precomputed graph's blob)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Stream*> InstructionsBuilder::LastStream(const Blob& blob) {
  const StreamId id = blob.raw_storage()->last_used_stream();
  if (id == last_stream_id_ && last_stream_ != nullptr) return last_stream_;
  SLUICE_ASSIGN_OR_RETURN(Stream * stream, vm_->GetStream(id));
  last_stream_id_ = id;
  last_stream_ = stream;
  return stream;
}

absl::Status InstructionsBuilder::SoftSync(BlobPtrSpan inputs, BlobPtrSpan outputs, Stream* stream,
                                           Chain<Instruction>& chain) {
  if (soft_sync_) {
    // Group blobs by last stream: one sync per (last stream -> this stream) pair.
    absl::InlinedVector<std::pair<StreamId, BlobPtrs>, 2> groups;
    auto add = [&](Blob* blob) {
      const StreamId last = blob->raw_storage()->last_used_stream();
      if (last == stream->id()) return;
      for (auto& [id, blobs] : groups) {
        if (id != last) continue;
        for (Blob* b : blobs) {
          if (b == blob) return;
        }
        blobs.push_back(blob);
        return;
      }
      groups.emplace_back(last, BlobPtrs{blob});
    };
    for (Blob* blob : outputs) add(blob);
    for (Blob* blob : inputs) add(blob);
    for (auto& [id, blobs] : groups) {
      SLUICE_ASSIGN_OR_RETURN(Stream * last, vm_->GetStream(id));
      Instruction* sync = Allocate();
      chain.PushBack(sync);
      sync->stream = last;
      sync->outputs = std::move(blobs);
      const Device from = last->key().device;
      if (from == stream->key().device && from.IsAsync()) {
        sync->kind = InstructionKind::kStreamWait;
        sync->wait_target = stream;
      } else {
        sync->kind = InstructionKind::kRecordEvent;
      }
    }
  }
  return absl::OkStatus();
}

bool InstructionsBuilder::LastUsedOn(BlobPtrSpan inputs, BlobPtrSpan outputs,
                                     const Stream& stream) {
  const StreamId id = stream.id();
  for (const Blob* blob : inputs) {
    if (blob->raw_storage()->last_used_stream() != id) return false;
  }
  for (const Blob* blob : outputs) {
    if (blob->raw_storage()->last_used_stream() != id) return false;
  }
  return true;
}

void InstructionsBuilder::SetLastUse(BlobPtrSpan inputs, BlobPtrSpan outputs, Stream* stream) {
  for (Blob* blob : outputs) blob->raw_storage()->set_last_used_stream(stream->id());
  for (Blob* blob : inputs) blob->raw_storage()->set_last_used_stream(stream->id());
}

absl::Status InstructionsBuilder::Call(const OpKernel& kernel, BlobSpan inputs, BlobSpan outputs,
                                       std::shared_ptr<const AttrMap> attrs, Stream* stream) {
  return CallPtrs(kernel, ToPtrs(inputs), ToPtrs(outputs), std::move(attrs), stream);
}

absl::Status InstructionsBuilder::CallPtrs(const OpKernel& kernel, BlobPtrSpan inputs,
                                           BlobPtrSpan outputs,
                                           std::shared_ptr<const AttrMap> attrs, Stream* stream,
                                           bool fresh_outputs) {
  if (stream == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("op '", kernel.name(), "': null stream"));
  }
  for (const Blob* blob : inputs) {
    if (Usable(blob)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("op '", kernel.name(), "' input: ", CheckUsable(blob).message()));
  }
  for (const Blob* blob : outputs) {
    if (Usable(blob)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("op '", kernel.name(), "' output: ", CheckUsable(blob).message()));
  }
  if (fusion_ && vm_->fusion() && LastUsedOn(inputs, outputs, *stream) &&
      port_.AppendToOpenRun(buffer_.get(), stream, [&](StepSequence& run, Instruction* head) {
        run.AddCall(kernel, inputs, outputs, std::move(attrs), fresh_outputs);
        if (origin_ != nullptr) run.set_step_origin(run.steps() - 1, origin_);
      })) {
    return absl::OkStatus();  // the operands' last use is `stream` already
  }
  Chain<Instruction> chain;
  absl::Status synced = SoftSync(inputs, outputs, stream, chain);
  if (!synced.ok()) {
    port_.Free(std::move(chain));
    return synced;
  }
  Instruction* call = Allocate();
  call->kind = InstructionKind::kOpCall;
  call->kernel = &kernel;
  // Outputs a sync instruction names are no longer fresh: the engine has seen them.
  call->fresh_outputs = fresh_outputs && chain.empty();
  call->stream = stream;
  call->attrs = std::move(attrs);
  if (origin_ != nullptr) call->origin = origin_;
  call->inputs.assign(inputs.begin(), inputs.end());
  call->outputs.assign(outputs.begin(), outputs.end());
  chain.PushBack(call);
  SLUICE_RETURN_IF_ERROR(port_.SubmitBuffered(buffer_.get(), std::move(chain), /*open=*/fusion_));
  // Only work that was accepted moves a blob's last use: a refused call leaves the soft-sync
  // state as it was, so the next call still syncs against the real last user.
  SetLastUse(inputs, outputs, stream);
  return absl::OkStatus();
}

absl::Status InstructionsBuilder::StreamWait(BlobSpan blobs, Stream* from, Stream* to) {
  if (from == nullptr || to == nullptr)
    return absl::InvalidArgumentError("StreamWait: null stream");
  if (!CanStreamWait(*from, *to)) {
    return absl::InvalidArgumentError(
        absl::StrCat("StreamWait ", from->name(), " -> ", to->name(), ": needs ", kStreamWaitRule));
  }
  for (const BlobRef& blob : blobs) SLUICE_RETURN_IF_ERROR(CheckUsable(blob.get()));
  Instruction* sync = Allocate();
  sync->kind = InstructionKind::kStreamWait;
  sync->stream = from;
  sync->wait_target = to;
  sync->outputs = ToPtrs(blobs);
  Chain<Instruction> chain;
  chain.PushBack(sync);
  return port_.Submit(std::move(chain));
}

absl::Status InstructionsBuilder::RecordEvent(BlobSpan blobs, Stream* stream) {
  if (stream == nullptr) return absl::InvalidArgumentError("RecordEvent: null stream");
  for (const BlobRef& blob : blobs) SLUICE_RETURN_IF_ERROR(CheckUsable(blob.get()));
  Instruction* sync = Allocate();
  sync->kind = InstructionKind::kRecordEvent;
  sync->stream = stream;
  sync->outputs = ToPtrs(blobs);
  Chain<Instruction> chain;
  chain.PushBack(sync);
  return port_.Submit(std::move(chain));
}

absl::Status InstructionsBuilder::Release(Blob* blob, bool dying, bool* hold_taken) {
  if (hold_taken != nullptr) *hold_taken = false;
  if (!Usable(blob)) return CheckUsable(blob);
  SLUICE_ASSIGN_OR_RETURN(Stream * stream, LastStream(*blob));
  // Read by ParksStorage as the Release is built (the Release carries the decision to the
  // worker); a refused Release leaves the blob usable, so the mark is harmless there.
  BlobLifecycle::Producer::SetDying(blob, dying);
  if (fusion_ && vm_->fusion() &&
      port_.AppendToOpenRun(buffer_.get(), stream, [&](StepSequence& run, Instruction* head) {
        const bool taken = run.AddRelease(blob, dying && hold_taken != nullptr);
        if (hold_taken != nullptr) *hold_taken = taken;
      })) {
    BlobLifecycle::Producer::MarkReleased(blob);
    return absl::OkStatus();
  }
  Instruction* release = Allocate();
  release->kind = InstructionKind::kRelease;
  release->stream = stream;
  release->outputs.push_back(blob);
  release->keeps_storage = BlobLifecycle::Producer::ParksStorage(*blob);
  Chain<Instruction> chain;
  chain.PushBack(release);
  // Held back like a call (a freed tensor's storage returns a little later): the engine
  // receives this builder's instructions in the order it issued them either way.
  SLUICE_RETURN_IF_ERROR(port_.SubmitBuffered(buffer_.get(), std::move(chain), /*open=*/fusion_));
  BlobLifecycle::Producer::MarkReleased(blob);  // only once the release was accepted
  return absl::OkStatus();
}

absl::Status InstructionsBuilder::AccessBlob(
    const BlobRef& blob, bool write, BlobCallback callback,
    absl::AnyInvocable<void(const Instruction&)> on_retire) {
  return SubmitAccess(blob, write, /*wait_only=*/false, std::move(callback), std::move(on_retire));
}

absl::Status InstructionsBuilder::WaitBlob(const BlobRef& blob,
                                           absl::AnyInvocable<void(const Instruction&)> on_retire) {
  return SubmitAccess(
      blob, /*write=*/false, /*wait_only=*/true, [](void*, size_t) { return absl::OkStatus(); },
      std::move(on_retire));
}

absl::Status InstructionsBuilder::SubmitAccess(
    const BlobRef& blob, bool write, bool wait_only, BlobCallback callback,
    absl::AnyInvocable<void(const Instruction&)> on_retire) {
  SLUICE_RETURN_IF_ERROR(CheckUsable(blob.get()));
  SLUICE_ASSIGN_OR_RETURN(Stream * stream, LastStream(*blob));
  Chain<Instruction> chain;
  // A blob another device used last — host memory last used by a device stream (the
  // result of a device-to-host copy), or device memory last used by a cpu stream or another
  // device — is accessed on its own device's stream, after a soft sync on that last use
  // alone. Device memory is then accessed through a staging copy
  // (InstructionExecutor::RunAccessBlob): the host never addresses it.
  if (stream->key().device != blob->device()) {
    SLUICE_ASSIGN_OR_RETURN(stream, vm_->GetStream(StreamKey{blob->device()}));
    Blob* const operand = blob.get();
    const BlobPtrSpan operands(&operand, 1);
    absl::Status synced =
        write ? SoftSync({}, operands, stream, chain) : SoftSync(operands, {}, stream, chain);
    if (!synced.ok()) {
      port_.Free(std::move(chain));
      return synced;
    }
  }
  Instruction* access = Allocate();
  access->kind = InstructionKind::kAccessBlob;
  access->stream = stream;
  (write ? access->outputs : access->inputs).push_back(blob.get());
  access->blob_callback = std::move(callback);
  access->access_wait_only = wait_only;
  access->on_retire = std::move(on_retire);
  chain.PushBack(access);
  SLUICE_RETURN_IF_ERROR(port_.Submit(std::move(chain)));
  blob->raw_storage()->set_last_used_stream(stream->id());
  return absl::OkStatus();
}

absl::Status InstructionsBuilder::SubmitWrite(const BlobRef& blob, absl::Span<const uint8_t> bytes,
                                              BlobAccessWaiter* waiter) {
  SLUICE_RETURN_IF_ERROR(CheckUsable(blob.get()));
  if (bytes.size() != blob->bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("WriteBlob: ", blob->DebugName(), " holds ",
                                                   blob->bytes(), " bytes, got ", bytes.size()));
  }
  return AccessBlob(
      blob, /*write=*/true,
      [bytes](void* data, size_t n) {
        if (n > 0) std::memcpy(data, bytes.data(), n);
        return absl::OkStatus();
      },
      waiter->OnRetire());
}

absl::Status InstructionsBuilder::SubmitRead(const BlobRef& blob, std::vector<uint8_t>* bytes,
                                             BlobAccessWaiter* waiter) {
  SLUICE_RETURN_IF_ERROR(CheckUsable(blob.get()));
  bytes->resize(blob->bytes());
  return AccessBlob(
      blob, /*write=*/false,
      [bytes](void* data, size_t n) {
        if (n > 0) std::memcpy(bytes->data(), data, n);
        return absl::OkStatus();
      },
      waiter->OnRetire());
}

absl::Status InstructionsBuilder::WriteBlob(const BlobRef& blob, absl::Span<const uint8_t> bytes) {
  BlobAccessWaiter waiter(vm_);
  SLUICE_RETURN_IF_ERROR(SubmitWrite(blob, bytes, &waiter));
  return waiter.Wait();
}

absl::StatusOr<std::vector<uint8_t>> InstructionsBuilder::ReadBlob(const BlobRef& blob) {
  std::vector<uint8_t> out;
  BlobAccessWaiter waiter(vm_);
  SLUICE_RETURN_IF_ERROR(SubmitRead(blob, &out, &waiter));
  SLUICE_RETURN_IF_ERROR(waiter.Wait());
  return out;
}

absl::Status InstructionsBuilder::Barrier(BarrierCallback callback) {
  Instruction* barrier = Allocate();
  barrier->kind = InstructionKind::kBarrier;
  barrier->barrier_callback = std::move(callback);
  Chain<Instruction> chain;
  chain.PushBack(barrier);
  return port_.Submit(std::move(chain));
}

}  // namespace sluice::vm
