// The cuda provider over the CUDA runtime API. Compiled when the toolkit is found; on a
// machine without a driver or GPU, CudaDeviceCount() is 0 and nothing else runs.
#include "ep/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/status.h"
#include "core/status_from_call.h"

namespace sluice::ep {
namespace {

absl::Status CudaError(cudaError_t error, absl::string_view call, sluice::Device device) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(call, " on ", device.ToString(), " failed: ", cudaGetErrorString(error)));
}

class CudaEvent final : public Event {
 public:
  CudaEvent(sluice::Device device, cudaEvent_t event) : Event(device), event_(event) {}
  ~CudaEvent() override {
    cudaSetDevice(device().index());
    cudaEventDestroy(event_);
  }
  cudaEvent_t get() const { return event_; }
  bool Query() override { return cudaEventQuery(event_) != cudaErrorNotReady; }
  absl::Status Sync() override {
    return CudaError(cudaEventSynchronize(event_), "cudaEventSynchronize", device());
  }

 private:
  const cudaEvent_t event_;
};

class CudaStream final : public Stream {
 public:
  CudaStream(Device* device, StreamId id, const StreamKey& key, cudaStream_t stream)
      : Stream(device, id, key), stream_(stream) {}
  ~CudaStream() override {
    cudaSetDevice(device()->id().index());
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }

  bool IsAsync() const override { return true; }
  void* native_handle() const override { return stream_; }

  absl::Status Launch(HostTask task) override {
    auto* boxed = new Boxed{std::move(task), this};
    const cudaError_t error = cudaLaunchHostFunc(stream_, &CudaStream::RunBoxed, boxed);
    if (error != cudaSuccess) delete boxed;
    return CudaError(error, "cudaLaunchHostFunc", device()->id());
  }

  absl::Status RecordEvent(Event* event) override {
    if (event == nullptr || event->device() != device()->id()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stream ", key().ToString(), " cannot record an event of ",
                       event == nullptr ? std::string("nullptr") : event->device().ToString()));
    }
    return CudaError(cudaEventRecord(static_cast<CudaEvent*>(event)->get(), stream_),
                     "cudaEventRecord", device()->id());
  }

  absl::Status WaitEvent(Event* event) override {
    if (event == nullptr) return absl::InvalidArgumentError("WaitEvent: null event");
    if (event->device().type() == DeviceType::kCpu) return absl::OkStatus();
    if (event->device().type() != DeviceType::kCuda) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stream ", key().ToString(), " cannot wait on the device side for an event of ",
          event->device().ToString(), "; synchronize on the host instead"));
    }
    return CudaError(cudaStreamWaitEvent(stream_, static_cast<CudaEvent*>(event)->get(), 0),
                     "cudaStreamWaitEvent", device()->id());
  }

  absl::Status Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    if (bytes == 0) return absl::OkStatus();
    cudaMemcpyKind cuda_kind = cudaMemcpyDefault;
    switch (kind) {
      case CopyKind::kHostToDevice:
        cuda_kind = cudaMemcpyHostToDevice;
        break;
      case CopyKind::kDeviceToHost:
        cuda_kind = cudaMemcpyDeviceToHost;
        break;
      case CopyKind::kDeviceToDevice:
        cuda_kind = cudaMemcpyDeviceToDevice;
        break;
      case CopyKind::kHostToHost:
        cuda_kind = cudaMemcpyHostToHost;
        break;
    }
    return CudaError(cudaMemcpyAsync(dst, src, bytes, cuda_kind, stream_), "cudaMemcpyAsync",
                     device()->id());
  }

  absl::Status Sync() override {
    absl::Status status =
        CudaError(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device()->id());
    absl::MutexLock lock(&mu_);
    status.Update(error_);
    error_ = absl::OkStatus();
    return status;
  }

 private:
  struct Boxed {
    HostTask task;
    CudaStream* stream;
  };

  // Runs on a CUDA runtime thread; exceptions and errors become the stream's pending error.
  static void CUDART_CB RunBoxed(void* arg) {
    std::unique_ptr<Boxed> boxed(static_cast<Boxed*>(arg));
    absl::Status status = StatusFromCall("host task", std::move(boxed->task));
    if (!status.ok()) {
      absl::MutexLock lock(&boxed->stream->mu_);
      if (boxed->stream->error_.ok()) boxed->stream->error_ = status;
    }
  }

  const cudaStream_t stream_;
  absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

class CudaMemory final : public RawAllocator {
 public:
  CudaMemory(sluice::Device device, bool pinned) : device_(device), pinned_(pinned) {}
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    cudaSetDevice(device_.index());
    void* ptr = nullptr;
    const cudaError_t error = pinned_ ? cudaMallocHost(&ptr, bytes) : cudaMalloc(&ptr, bytes);
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the non-sticky error
      return absl::ResourceExhaustedError(
          absl::StrCat(Name(), " exhausted: requested ", bytes, " bytes"));
    }
    SLUICE_RETURN_IF_ERROR(CudaError(error, pinned_ ? "cudaMallocHost" : "cudaMalloc", device_));
    return ptr;
  }
  void Free(void* ptr, size_t) override {
    cudaSetDevice(device_.index());
    if (pinned_) {
      cudaFreeHost(ptr);
    } else {
      cudaFree(ptr);
    }
  }
  std::string Name() const override {
    return absl::StrCat(device_.ToString(), pinned_ ? " pinned memory" : " device memory");
  }

 private:
  const sluice::Device device_;
  const bool pinned_;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int index, StreamIdTable* stream_ids)
      : Device(sluice::Device(DeviceType::kCuda, index), stream_ids),
        memory_(id(), /*pinned=*/false),
        pinned_(id(), /*pinned=*/true) {
    InitAllocator();
  }
  ~CudaDevice() override { Shutdown(); }

  bool IsAsync() const override { return true; }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    SLUICE_RETURN_IF_ERROR(CudaError(cudaSetDevice(id().index()), "cudaSetDevice", id()));
    cudaEvent_t event;
    SLUICE_RETURN_IF_ERROR(CudaError(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                     "cudaEventCreateWithFlags", id()));
    return std::make_unique<CudaEvent>(id(), event);
  }
  RawAllocator& device_memory() override { return memory_; }
  RawAllocator& pinned_memory() override { return pinned_; }

 protected:
  absl::StatusOr<std::unique_ptr<Stream>> NewStream(StreamId stream_id,
                                                    const StreamKey& key) override {
    SLUICE_RETURN_IF_ERROR(CudaError(cudaSetDevice(id().index()), "cudaSetDevice", id()));
    cudaStream_t stream;
    SLUICE_RETURN_IF_ERROR(CudaError(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                     "cudaStreamCreateWithFlags", id()));
    return std::make_unique<CudaStream>(this, stream_id, key, stream);
  }

 private:
  CudaMemory memory_;
  CudaMemory pinned_;
};

}  // namespace

bool CudaProviderBuilt() { return true; }

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error for Sluice
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int index, StreamIdTable* stream_ids) {
  const int count = CudaDeviceCount();
  if (index < 0 || index >= count) {
    return absl::NotFoundError(
        absl::StrCat("device cuda:", index, " is not available: ", count, " CUDA device(s) found"));
  }
  return std::unique_ptr<Device>(std::make_unique<CudaDevice>(index, stream_ids));
}

}  // namespace sluice::ep
