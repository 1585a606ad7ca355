#include "vm/internal/vm_core.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/status.h"
#include "ep/device.h"
#include "ep/event.h"
#include "ep/stream.h"
#include "vm/internal/blob_lifecycle.h"
#include "vm/internal/blob_pool.h"
#include "vm/internal/blob_reaper.h"
#include "vm/internal/instruction_pool.h"
#include "vm/internal/submit_buffer.h"
#include "vm/recorder.h"

namespace sluice::vm::internal {
namespace {

// The counter of instructions of `kind` (VmCounters::instructions counts them all).
std::atomic<int64_t>& CounterOf(VmCounters& counters, InstructionKind kind) {
  switch (kind) {
    case InstructionKind::kOpCall:
      return counters.op_calls;
    case InstructionKind::kStreamWait:
      return counters.stream_waits;
    case InstructionKind::kRecordEvent:
      return counters.record_events;
    case InstructionKind::kRelease:
      return counters.releases;
    case InstructionKind::kBarrier:
      return counters.barriers;
    case InstructionKind::kAccessBlob:
      return counters.access_blobs;
  }
  return counters.op_calls;
}

static_assert(VmOptions::kDefaultMaxParkedBlobs == BlobPool::kDefaultMaxParked,
              "VmOptions' default parked-blob bound is the pool's");

// An instruction of its own from the pool, for the core's own submissions.
Instruction* AllocateOne(InstructionPool& pool) {
  Chain<Instruction> cache;
  pool.Refill(cache);
  Instruction* instruction = cache.PopFront();
  pool.ReturnUnused(std::move(cache));
  instruction->state = Instruction::State::kSubmitted;
  return instruction;
}

// Both observers on: the fan-out over them, the checker first (see VmCore::observer_).
std::unique_ptr<ObserverList> BothObservers(SyncChecker* checker, Recorder* recorder) {
  if (checker == nullptr || recorder == nullptr) return nullptr;
  return std::make_unique<ObserverList>(std::vector<ExecutionObserver*>{checker, recorder});
}

// The one observer VmCore reports to: the fan-out when there is one, else whichever of the
// checker and the recorder is on, else null.
ExecutionObserver* OnlyObserver(ObserverList* both, SyncChecker* checker, Recorder* recorder) {
  if (both != nullptr) return both;
  if (checker != nullptr) return checker;
  return recorder;
}

}  // namespace

// What the device allocators call when they run out of memory (see ReclaimReleases).
class VmCore::ReleaseReclaimer final : public MemoryReclaimer {
 public:
  explicit ReleaseReclaimer(VmCore* vm) : vm_(vm) {}
  absl::Status Reclaim(StreamId /*stream*/) override { return vm_->ReclaimReleases(); }

 private:
  VmCore* const vm_;
};

std::unique_ptr<VmCore> VmCore::Create(ep::Runtime* runtime, VmOptions options,
                                       std::unique_ptr<Recorder> recorder) {
  std::unique_ptr<VmCore> vm(new VmCore(runtime, std::move(options), std::move(recorder)));
  vm->fusion_ =
      vm->options_.max_fused_steps > 1 && vm->max_buffered_ > 1 && vm->recorder_ == nullptr;
  VmCore* raw = vm.get();
  vm->engine_.Start([raw] { raw->HandOverBuffers(); });
  vm->reclaimer_ = std::make_unique<ReleaseReclaimer>(raw);
  for (ep::Device* device : runtime->devices()) device->AddMemoryReclaimer(vm->reclaimer_.get());
  return vm;
}

VmCore::VmCore(ep::Runtime* runtime, VmOptions options, std::unique_ptr<Recorder> recorder)
    : runtime_(runtime),
      options_(std::move(options)),
      checker_(options_.check_sync ? std::make_unique<SyncChecker>() : nullptr),
      recorder_(std::move(recorder)),
      observer_list_(BothObservers(checker_.get(), recorder_.get())),
      observer_(OnlyObserver(observer_list_.get(), checker_.get(), recorder_.get())),
      executor_(&errors_, &counters_, observer_, checker_.get(), recorder_.get(), &cancel_),
      pool_(std::make_unique<InstructionPool>(options_.max_in_flight, options_.spin, &counters_)),
      blob_pool_(std::make_unique<BlobPool>(
          static_cast<size_t>(std::max<int64_t>(0, options_.max_parked_blobs)))),
      engine_(EngineOptions{options_.scheduling == VmOptions::Scheduling::kDedicatedThread,
                            options_.spin, /*marks_worker_order=*/checker_ != nullptr},
              observer_, pool_.get(), blob_pool_.get()),
      reaper_(std::make_shared<BlobReaper>(&engine_)),
      by_id_(new std::atomic<Stream*>[StreamIdTable::kCapacity]),
      max_buffered_(
          options_.scheduling == VmOptions::Scheduling::kDedicatedThread
              ? std::max<int64_t>(1, std::min<int64_t>(kMaxBuffered, options_.max_in_flight / 4))
              : 1) {
  for (int i = 0; i < StreamIdTable::kCapacity; ++i) by_id_[i].store(nullptr);
}

VmCore::~VmCore() { Shutdown(ShutdownMode::kFinish).IgnoreError(); }

absl::Status VmCore::WriteIdle(absl::Span<const IdleCopy> writes) {
  if (recorder_ != nullptr) return WriteIdleRecorded(writes);
  for (const IdleCopy& write : writes) {
    SLUICE_RETURN_IF_ERROR(
        CopyIdle(*write.blob, write.dst, write.src, write.bytes, /*to_device=*/true));
    write.blob->ClearPoison();
  }
  // (The recorded path counts its AccessBlob writes as they are published.)
  VmCounters::Add(counters_.host_to_device_copies, static_cast<int64_t>(writes.size()));
  return absl::OkStatus();
}

absl::Status VmCore::WriteIdleRecorded(absl::Span<const IdleCopy> writes) {
  // The first barrier orders the writes after everything submitted before, here and in a
  // replay (which syncs at every barrier); the blobs are idle, so no soft sync is needed.
  SLUICE_RETURN_IF_ERROR(WaitBarrier(/*after_close=*/false));
  // Each write on the stream that used its blob last when that is on the blob's device, else
  // on the device's compute stream: device memory is then written through a staging copy
  // (InstructionExecutor::RunAccessBlob), never addressed by the host. All are found before
  // anything is allocated or a blob's last use moves.
  std::vector<Stream*> streams;
  streams.reserve(writes.size());
  for (const IdleCopy& write : writes) {
    absl::StatusOr<Stream*> stream = GetStream(write.blob->raw_storage()->last_used_stream());
    if (!stream.ok() || (*stream)->key().device != write.blob->device()) {
      stream = GetStream(StreamKey{write.blob->device()});
    }
    SLUICE_RETURN_IF_ERROR(stream.status());
    streams.push_back(*stream);
  }
  Chain<Instruction> chain;
  for (size_t i = 0; i < writes.size(); ++i) {
    Instruction* access = AllocateOne(*pool_);
    access->kind = InstructionKind::kAccessBlob;
    access->stream = streams[i];
    access->outputs.push_back(writes[i].blob);
    access->blob_callback = [src = writes[i].src, bytes = writes[i].bytes](void* data, size_t n) {
      if (n > 0) std::memcpy(data, src, std::min(n, bytes));
      return absl::OkStatus();
    };
    chain.PushBack(access);
  }
  SLUICE_RETURN_IF_ERROR(SubmitInternal(std::move(chain), /*after_close=*/false));
  // Only accepted work moves a blob's last use (as in InstructionsBuilder).
  for (size_t i = 0; i < writes.size(); ++i) {
    writes[i].blob->raw_storage()->set_last_used_stream(streams[i]->id());
  }
  // The second lets the caller's bytes go, and makes the copies' errors this call's.
  return Sync(nullptr);
}

absl::Status VmCore::ReadIdle(absl::Span<const IdleCopy> reads) {
  for (const IdleCopy& read : reads) {
    SLUICE_RETURN_IF_ERROR(
        CopyIdle(*read.blob, read.dst, read.src, read.bytes, /*to_device=*/false));
  }
  VmCounters::Add(counters_.device_to_host_copies, static_cast<int64_t>(reads.size()));
  return absl::OkStatus();
}

absl::Status VmCore::CopyIdle(const Blob& blob, void* dst, const void* src, size_t bytes,
                              bool to_device) {
  if (bytes == 0) return absl::OkStatus();
  if (blob.device().type() == DeviceType::kCpu) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  // Memory the host cannot address: a copy on the device's copy stream (ep streams take
  // work from any thread), then an event recorded behind it, synced here. The event's
  // status is the stream's first error, so a failed copy is not taken for a good one.
  SLUICE_ASSIGN_OR_RETURN(
      Stream * stream, GetStream(StreamKey{blob.device(), to_device ? StreamType::kHost2Device
                                                                    : StreamType::kDevice2Host}));
  ep::Stream* ep_stream = stream->ep_stream();
  SLUICE_RETURN_IF_ERROR(ep_stream->Memcpy(
      dst, src, bytes, to_device ? ep::CopyKind::kHostToDevice : ep::CopyKind::kDeviceToHost));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ep::Event> done, ep_stream->device()->CreateEvent());
  SLUICE_RETURN_IF_ERROR(ep_stream->RecordEvent(done.get()));
  return done->Sync();
}

ThreadCtx* VmCore::ThreadCtxFor(const StreamKey& key) {
  std::string name(DeviceTypeName(key.device.type()));
  if (key.device.type() == DeviceType::kCpu && key.type == StreamType::kCompute && key.index > 0) {
    absl::StrAppend(&name, "-c", key.index);
  }
  // A host collective runs on its worker until every rank has joined: cpu ccl streams get
  // a worker of their own, so that compute goes on meanwhile (gradient reduction overlaps
  // the backward pass).
  if (key.device.type() == DeviceType::kCpu && key.type == StreamType::kCcl) {
    absl::StrAppend(&name, "-ccl", key.index);
  }
  for (const std::unique_ptr<ThreadCtx>& ctx : thread_ctxs_) {
    if (ctx->name() == name) return ctx.get();
  }
  thread_ctxs_.push_back(std::make_unique<ThreadCtx>(std::move(name), &executor_, &engine_,
                                                     options_.spin, options_.idle_spin));
  thread_ctxs_.back()->Start();
  return thread_ctxs_.back().get();
}

absl::StatusOr<Stream*> VmCore::GetStream(const StreamKey& key) {
  SLUICE_ASSIGN_OR_RETURN(ep::Stream * ep_stream, runtime_->GetStream(key));
  const StreamId id = ep_stream->id();
  if (Stream* stream = by_id_[id.value()].load(std::memory_order_acquire)) return stream;
  absl::MutexLock lock(&streams_mu_);
  if (Stream* stream = by_id_[id.value()].load(std::memory_order_acquire)) return stream;
  {
    absl::MutexLock shutdown_lock(&shutdown_mu_);
    if (shut_down_) return absl::FailedPreconditionError("the VM is shut down");
  }
  policies_.push_back(CreateStreamPolicy(*ep_stream));
  owned_streams_.push_back(std::make_unique<Stream>(ep_stream, policies_.back().get(),
                                                    ThreadCtxFor(key),
                                                    static_cast<int>(owned_streams_.size())));
  Stream* stream = owned_streams_.back().get();
  by_id_[id.value()].store(stream, std::memory_order_release);
  return stream;
}

absl::StatusOr<Stream*> VmCore::GetStream(StreamId id) {
  if (!id.valid() || id.value() >= runtime_->stream_ids().size()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown stream id ", id.value()));
  }
  if (Stream* stream = by_id_[id.value()].load(std::memory_order_acquire)) return stream;
  return GetStream(runtime_->stream_ids().key(id));
}

std::vector<Stream*> VmCore::streams() const {
  absl::MutexLock lock(&streams_mu_);
  std::vector<Stream*> result;
  for (const auto& stream : owned_streams_) result.push_back(stream.get());
  return result;
}

absl::StatusOr<Blob*> VmCore::NewBlobRaw(Stream* stream, DataType dtype, const Shape& shape,
                                         std::string name, Allocator* allocator) {
  if (stream == nullptr) return absl::InvalidArgumentError("NewBlob: null stream");
  // A parked blob of this stream, dtype and shape comes with its storage (its shape was
  // checked when it was first made): most eager outputs take one, with no copy of the
  // shape; the id is drawn only on a hit.
  if (name.empty() && allocator == nullptr) {
    Blob* parked = blob_pool_->TakeParked(stream->id(), dtype, shape, next_blob_id_);
    if (parked != nullptr) return parked;
  }
  SLUICE_ASSIGN_OR_RETURN(ep::Device * device, runtime_->GetDevice(stream->key().device));
  SLUICE_RETURN_IF_ERROR(Shape::Check(shape.dims()));
  const uint64_t id = next_blob_id_.fetch_add(1, std::memory_order_relaxed);
  Blob* raw = blob_pool_->New(id, stream->key().device, dtype, shape, std::move(name));
  const absl::Status allocated = BlobLifecycle::Worker::AllocateStorage(
      raw, allocator != nullptr ? allocator : &device->allocator(), stream->id());
  if (!allocated.ok()) {
    blob_pool_->Delete(raw);
    return allocated;
  }
  return raw;
}

absl::StatusOr<BlobRef> VmCore::NewBlob(Stream* stream, DataType dtype, Shape shape,
                                        std::string name, Allocator* allocator) {
  SLUICE_ASSIGN_OR_RETURN(Blob * raw, NewBlobRaw(stream, dtype, shape, std::move(name), allocator));
  // One reference count increment for the deleter's copy of the reaper (each is an atomic
  // read-modify-write on the producer's path).
  BlobRef blob(raw, [reaper = reaper_](Blob* b) { reaper->Reap(b); });
  if (observer_ != nullptr) observer_->OnBlobCreated(blob, *stream);
  return blob;
}

absl::StatusOr<OwnedBlob> VmCore::NewOwnedBlob(Stream* stream, DataType dtype, const Shape& shape) {
  if (recorder_ != nullptr) {
    // The recorder follows blobs through weak references: give it a shared one.
    SLUICE_ASSIGN_OR_RETURN(BlobRef shared, NewBlob(stream, dtype, shape, "", nullptr));
    return OwnedBlob(std::move(shared));
  }
  SLUICE_ASSIGN_OR_RETURN(Blob * raw, NewBlobRaw(stream, dtype, shape, std::string()));
  return OwnedBlob(raw, reaper_.get());
}

absl::StatusOr<BlobRef> VmCore::NewLazyBlob(Stream* stream, DataType dtype, Shape shape,
                                            std::string name, Allocator* allocator) {
  if (stream == nullptr) return absl::InvalidArgumentError("NewLazyBlob: null stream");
  for (int64_t dim : shape.dims()) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("NewLazyBlob '", name, "': negative dimension in ", shape.ToString()));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(ep::Device * device, runtime_->GetDevice(stream->key().device));
  std::shared_ptr<BlobReaper> reaper = reaper_;
  BlobRef blob(new Blob(next_blob_id_.fetch_add(1, std::memory_order_relaxed), stream->key().device,
                        dtype, std::move(shape),
                        allocator != nullptr ? allocator : &device->allocator(), std::move(name)),
               [reaper](Blob* b) { reaper->Reap(b); });
  if (observer_ != nullptr) observer_->OnBlobCreated(blob, *stream);
  return blob;
}

void VmCore::AttachBuffer(SubmitBuffer* buffer) {
  if (max_buffered_ <= 1) return;  // nothing is ever held back
  PlainMutexLock lock(&buffers_mu_);
  buffers_.push_back(buffer);
  attached_buffers_.store(static_cast<int>(buffers_.size()), std::memory_order_relaxed);
}

void VmCore::DetachBuffer(SubmitBuffer* buffer) {
  if (max_buffered_ <= 1) return;
  PlainMutexLock lock(&buffers_mu_);
  HandOver(buffer);
  buffers_.erase(std::find(buffers_.begin(), buffers_.end(), buffer));
  attached_buffers_.store(static_cast<int>(buffers_.size()), std::memory_order_relaxed);
}

void VmCore::HandOverBuffers() {
  if (attached_buffers_.load(std::memory_order_relaxed) == 0) return;
  PlainMutexLock lock(&buffers_mu_);
  for (SubmitBuffer* buffer : buffers_) HandOver(buffer);
}

void VmCore::HandOver(SubmitBuffer* buffer) {
  PlainMutexLock buffer_lock(&buffer->mu);
  TakeAndPublish(buffer);
}

void VmCore::TakeAndPublish(SubmitBuffer* buffer) {
  // Under the buffer's lock, by whoever takes the chain (the producer or the scheduler):
  // anyone who finds the buffer empty then finds its instructions submitted. The scheduler
  // relies on it before it deletes a buried blob: a held-back instruction may be the last
  // user of a blob whose last reference went away meanwhile, and publishing after the
  // unlock would let the scheduler's hand-over find neither the chain nor the submission.
  CloseOpenRun(buffer);
  if (!buffer->chain.empty()) Publish(std::exchange(buffer->chain, {}));
}

void VmCore::CloseOpenRun(SubmitBuffer* buffer) {
  if (buffer->tail_open && buffer->chain.tail->fused != nullptr) {
    buffer->chain.tail->fused->Close();
  }
  buffer->tail_open = false;
}

int64_t VmCore::held_back() {
  PlainMutexLock lock(&buffers_mu_);
  int64_t n = 0;
  for (SubmitBuffer* buffer : buffers_) {
    PlainMutexLock buffer_lock(&buffer->mu);
    n += static_cast<int64_t>(buffer->chain.size);
  }
  return n;
}

absl::Status VmCore::SubmitBuffered(SubmitBuffer* buffer, Chain<Instruction> chain, bool open) {
  SLUICE_RETURN_IF_ERROR(ReserveOrFree(chain, /*after_close=*/false));
  if (max_buffered_ <= 1) {
    Publish(std::move(chain));
    return absl::OkStatus();
  }
  PlainMutexLock lock(&buffer->mu);
  CloseOpenRun(buffer);  // its born blobs join its operands before anything queues behind it
  buffer->chain.Append(std::move(chain));
  buffer->tail_open = open && fusion_;
  // WantsWork after the append (both under the lock): either the scheduler's next look at
  // this buffer comes later and finds the chain, or its flag was already up (seq_cst).
  if (static_cast<int64_t>(buffer->chain.size) >= max_buffered_ || engine_.WantsWork()) {
    TakeAndPublish(buffer);
  }
  return absl::OkStatus();
}

bool VmCore::AppendToOpenRun(SubmitBuffer* buffer, const Stream* stream,
                             absl::FunctionRef<void(StepSequence& run, Instruction* head)> add) {
  PlainMutexLock lock(&buffer->mu);
  if (!buffer->tail_open || buffer->chain.tail->stream != stream) return false;
  Instruction* head = buffer->chain.tail;
  if (head->fused == nullptr) {
    head->fused = pool_->TakeFused();
    head->fused->Begin(head);
  }
  add(*head->fused, head);
  // A full run goes now; so does everything while the scheduler is out of work (as in
  // SubmitBuffered: the flag is read after the append, under the buffer's lock).
  if (head->fused->size() >= options_.max_fused_steps || engine_.WantsWork()) {
    TakeAndPublish(buffer);
  }
  return true;
}

absl::Status VmCore::SubmitInternal(Chain<Instruction> chain, bool after_close) {
  if (chain.empty()) return absl::OkStatus();
  // What this thread holds back in a builder was submitted before this chain.
  HandOverBuffers();
  SLUICE_RETURN_IF_ERROR(ReserveOrFree(chain, after_close));
  Publish(std::move(chain));
  return absl::OkStatus();
}

absl::Status VmCore::Reserve(int64_t n, bool after_close) {
  // The kick lets the scheduler make progress while this thread waits for room, also when
  // scheduling runs on producer threads.
  return pool_->Reserve(
      n,
      [this] {
        HandOverBuffers();  // room held back in buffers frees only once it runs
        engine_.Kick();
      },
      after_close);
}

absl::Status VmCore::ReserveOrFree(Chain<Instruction>& chain, bool after_close) {
  const absl::Status reserved = Reserve(static_cast<int64_t>(chain.size), after_close);
  if (!reserved.ok()) pool_->Free(std::exchange(chain, {}));
  return reserved;
}

void VmCore::SubmitBatchPart(Chain<Instruction> part, bool first, bool last) {
  if (part.empty()) return;
  part.head->opens_batch = first;
  part.tail->closes_batch = last;
  Publish(std::move(part));
}

void VmCore::Publish(Chain<Instruction> chain) {
  uint64_t seq = next_seq_.fetch_add(chain.size, std::memory_order_relaxed);
  std::array<int64_t, kInstructionKinds> by_kind{};
  int64_t fused_steps = 0;
  int64_t private_blobs = 0;
  int64_t stepless_releases = 0;
  int64_t host_writes = 0;  // AccessBlob writes: host bytes into a blob
  int64_t host_reads = 0;   // AccessBlob reads: a blob's bytes out to the host
  for (Instruction* i = chain.head; i != nullptr; i = i->next) {
    i->seq = seq++;
    if (observer_ != nullptr) observer_->OnSubmit(i);
    if (i->fused != nullptr) {
      // Counted as the calls and releases it fuses.
      by_kind[static_cast<int>(InstructionKind::kOpCall)] += i->fused->op_calls();
      by_kind[static_cast<int>(InstructionKind::kRelease)] += i->fused->releases();
      fused_steps += i->fused->size();
      private_blobs += i->fused->private_blobs();
      stepless_releases += i->fused->size() - i->fused->steps();
    } else {
      ++by_kind[static_cast<int>(i->kind)];
      if (i->kind == InstructionKind::kAccessBlob) ++(i->inputs.empty() ? host_writes : host_reads);
    }
  }
  if (host_writes != 0) VmCounters::Add(counters_.host_to_device_copies, host_writes);
  if (host_reads != 0) VmCounters::Add(counters_.device_to_host_copies, host_reads);
  if (fused_steps != 0) VmCounters::Add(counters_.fused_steps, fused_steps);
  if (private_blobs != 0) VmCounters::Add(counters_.private_blobs, private_blobs);
  if (stepless_releases != 0) VmCounters::Add(counters_.stepless_releases, stepless_releases);
  // One update per counter and chain: a large batch would otherwise pay an atomic
  // increment per instruction and counter.
  VmCounters::Add(counters_.instructions, static_cast<int64_t>(chain.size));
  for (int kind = 0; kind < kInstructionKinds; ++kind) {
    if (by_kind[kind] != 0) {
      VmCounters::Add(CounterOf(counters_, static_cast<InstructionKind>(kind)), by_kind[kind]);
    }
  }
  if (observer_ != nullptr) observer_->OnChainSubmitted(chain.head);
  engine_.Submit(std::move(chain));
}

void VmCore::NoteHostWaited(const Instruction& instruction) {
  if (observer_ != nullptr) observer_->OnHostWaited(instruction);
}

absl::Status VmCore::Sync(std::vector<absl::Status>* all) {
  SLUICE_RETURN_IF_ERROR(WaitBarrier(/*after_close=*/false));
  // Errors of device work that did not go through LaunchHostWork surface from the streams.
  for (Stream* stream : streams()) {
    if (stream->policy()->synchronous()) continue;
    errors_.Report(stream->ep_stream()->Sync());
  }
  return all != nullptr ? errors_.TakeAll(all) : errors_.Take();
}

absl::Status VmCore::WaitBarrier(bool after_close) {
  Instruction* barrier = AllocateOne(*pool_);
  absl::Notification done;
  barrier->kind = InstructionKind::kBarrier;
  barrier->barrier_callback = [&done] { done.Notify(); };
  Chain<Instruction> chain;
  chain.PushBack(barrier);
  SLUICE_RETURN_IF_ERROR(SubmitInternal(std::move(chain), after_close));
  done.WaitForNotification();
  return absl::OkStatus();
}

absl::Status VmCore::FreeParkedBlobs() {
  if (OnOwnThread()) {
    return absl::FailedPreconditionError(
        "FreeParkedBlobs called on a VM worker or scheduler thread, which the wait for the "
        "work before it would block");
  }
  // The first barrier fires while the scheduler's pass may still be retiring the fused runs
  // before it, whose private blobs die at that pass's end; the second is received in a later
  // pass, so once it fires every blob the earlier work let die is parked.
  SLUICE_RETURN_IF_ERROR(WaitBarrier(/*after_close=*/false));
  SLUICE_RETURN_IF_ERROR(WaitBarrier(/*after_close=*/false));
  blob_pool_->FreeParked();
  return absl::OkStatus();
}

absl::Status VmCore::ReclaimReleases() {
  if (OnOwnThread()) {
    return absl::FailedPreconditionError(
        "the allocation runs on a VM worker or scheduler thread, which runs the queued "
        "Release instructions itself");
  }
  // Fails only once the VM is shut down: its work is then finished or cancelled anyway.
  return WaitBarrier(/*after_close=*/false);
}

bool VmCore::OnOwnThread() const {
  if (engine_.OnSchedulerThread()) return true;
  absl::MutexLock lock(&streams_mu_);
  for (const std::unique_ptr<ThreadCtx>& ctx : thread_ctxs_) {
    if (ctx->OnWorkerThread()) return true;
  }
  return false;
}

absl::Status VmCore::Shutdown(ShutdownMode mode) {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return absl::OkStatus();
    shut_down_ = true;
  }
  // No allocation reaches this VM's reclaimer from here on (a running one finishes first).
  for (ep::Device* device : runtime_->devices()) device->RemoveMemoryReclaimer(reclaimer_.get());
  // New submissions fail from here on; those that already reserved room still land.
  pool_->Close();
  if (mode == ShutdownMode::kCancel) cancel_.store(true, std::memory_order_release);
  absl::Status status = WaitBarrier(/*after_close=*/true);
  pool_->WaitIdle();
  for (Stream* stream : streams()) {
    if (!stream->policy()->synchronous()) errors_.Report(stream->ep_stream()->Sync());
  }
  const absl::Status pending = errors_.Take();
  if (status.ok()) status = pending;
  if (recorder_ != nullptr) {
    // Final contents: every instruction is complete, so host-addressable bytes are final.
    for (const BlobRef& blob : recorder_->LiveBlobs()) {
      TensorStorage* storage = blob->storage();
      if (storage == nullptr || blob->device().type() == DeviceType::kCuda) continue;
      recorder_->RecordChecksum(
          blob->id(), Checksum(absl::MakeConstSpan(static_cast<const uint8_t*>(storage->data()),
                                                   storage->bytes())));
    }
    const absl::Status closed = recorder_->Close();
    if (status.ok()) status = closed;
  }
  // Completion points may still be returning on the ep streams' threads: wait for them
  // before the ThreadCtx they poke goes away.
  for (Stream* stream : streams()) stream->ep_stream()->Sync().IgnoreError();
  engine_.Stop();
  reaper_->Detach();
  blob_pool_->DropParked();  // their bytes go back while the runtime's allocators live
  engine_.DeleteBuried();
  absl::MutexLock lock(&streams_mu_);
  for (auto& ctx : thread_ctxs_) ctx->Stop();
  return status;
}

VmStats VmCore::stats() {
  HandOverBuffers();
  VmStats s;
  auto get = [](const std::atomic<int64_t>& c) { return c.load(std::memory_order_relaxed); };
  s.instructions = get(counters_.instructions);
  s.op_calls = get(counters_.op_calls);
  s.stream_waits = get(counters_.stream_waits);
  s.record_events = get(counters_.record_events);
  s.releases = get(counters_.releases);
  s.barriers = get(counters_.barriers);
  s.access_blobs = get(counters_.access_blobs);
  s.fused_steps = get(counters_.fused_steps);
  s.private_blobs = get(counters_.private_blobs);
  s.stepless_releases = get(counters_.stepless_releases);
  s.recycled_blobs = blob_pool_->recycled();
  s.parked_blobs = blob_pool_->parked();
  s.evicted_blobs = blob_pool_->evicted();
  s.events_created = get(counters_.events_created);
  s.events_reused = get(counters_.events_reused);
  s.skipped = get(counters_.skipped);
  s.errors = errors_.count();
  s.max_in_flight = get(counters_.max_in_flight);
  s.submit_waits = get(counters_.submit_waits);
  s.host_to_device_copies = get(counters_.host_to_device_copies);
  s.device_to_host_copies = get(counters_.device_to_host_copies);
  s.parallel_regions = get(counters_.parallel.regions);
  s.parallel_chunks = get(counters_.parallel.chunks);
  s.parallel_helped_chunks = get(counters_.parallel.helped_chunks);
  s.parallel_skipped_chunks = get(counters_.parallel.skipped_chunks);
  return s;
}

}  // namespace sluice::vm::internal
