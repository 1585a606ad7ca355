// The floor under an asynchronous eager op on this machine: the least any design that runs
// ops on another thread can pay per op, measured with nothing of Sluice in it. Quoted next
// to BM_Eager_TinyAdd in docs/benchmarks.md, to tell how much of TinyAdd is the engine and
// how much is the hand-off between two cores that any such engine pays.
//
//   BM_Machine_AsyncAddFloor   the TinyAdd loop (acc = acc + one, 1-element f32, kOps times,
//                              then wait for the result) over the leanest hand-off we know:
//                              the caller writes 32-byte records into a single-producer
//                              single-consumer ring (no locks, no atomic read-modify-write:
//                              a release store of the tail per record) and a worker thread
//                              runs them; an output buffer comes from a caller-private free
//                              list that the worker refills through a second ring. Per op:
//                              one reference-counted handle (std::shared_ptr, as a user-
//                              facing tensor needs), an `add` record and a `release` record
//                              for the handle the assignment drops. items = ops.
//   Arguments: records_only (0: the handles above; 1: no handles, the ring alone) and
//   publish_every (the tail is published after this many records: 1 hands every record
//   over at once; 16 batches them as eager fusion does, published early whenever the
//   caller would wait).
//
// What is not here and a real engine must do: op lookup and shape inference, dependence
// tracking between streams and producers, errors, counters. So this is a lower bound, not a
// design.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"

namespace sluice::async_floor_benchmark {
namespace {

constexpr int kOps = 100000;

struct Buffer {
  float value = 0;
  Buffer* next_free = nullptr;  // caller side only
};

struct Record {
  enum Kind : uint32_t { kAdd, kRelease, kStop };
  Kind kind;
  Buffer* a;
  Buffer* b;
  Buffer* out;
};
static_assert(sizeof(Record) == 32, "two records per cache line");

// Single producer, single consumer; capacity a power of two. Each side keeps its own index
// and a cached copy of the other's, on lines of their own.
template <typename T, size_t kCapacity>
class SpscRing {
 public:
  // Producer. Publishes and spins while full.
  void Push(const T& item) {
    if (tail_ - cached_head_ == kCapacity) {
      Publish();
      while (tail_ - (cached_head_ = head_.load(std::memory_order_acquire)) == kCapacity) {
      }
    }
    slots_[tail_ & (kCapacity - 1)] = item;
    ++tail_;
    if (tail_ - last_published_ >= publish_every_) Publish();
  }
  // Producer: makes every pushed item visible.
  void Publish() {
    last_published_ = tail_;
    published_tail_.store(tail_, std::memory_order_release);
  }
  // Producer: publish after this many pushes (1: each push).
  void set_publish_every(uint64_t n) { publish_every_ = n; }
  // Consumer. False when empty.
  bool Pop(T* item) {
    if (consumer_head_ == cached_tail_) {
      cached_tail_ = published_tail_.load(std::memory_order_acquire);
      if (consumer_head_ == cached_tail_) return false;
    }
    *item = slots_[consumer_head_ & (kCapacity - 1)];
    ++consumer_head_;
    head_.store(consumer_head_, std::memory_order_release);
    return true;
  }

 private:
  alignas(64) std::atomic<uint64_t> published_tail_{0};
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) uint64_t tail_ = 0;  // producer
  uint64_t cached_head_ = 0;       // producer
  uint64_t last_published_ = 0;    // producer
  uint64_t publish_every_ = 1;     // producer
  alignas(64) uint64_t consumer_head_ = 0;
  uint64_t cached_tail_ = 0;
  alignas(64) T slots_[kCapacity];
};

class Floor {
 public:
  explicit Floor(uint64_t publish_every) : buffers_(kOps + 1024) {
    ops_.set_publish_every(publish_every);
    for (Buffer& b : buffers_) Free(&b);
    worker_ = std::thread([this] { Run(); });
  }
  ~Floor() {
    ops_.Push({Record::kStop, nullptr, nullptr, nullptr});
    ops_.Publish();
    worker_.join();
  }

  Buffer* NewBuffer() {
    if (free_ == nullptr) {
      Buffer* returned;
      ops_.Publish();  // the worker returns buffers only as it runs what holds them
      while (!returned_.Pop(&returned)) {
      }
      Free(returned);
      while (returned_.Pop(&returned)) Free(returned);
    }
    Buffer* b = free_;
    free_ = b->next_free;
    return b;
  }
  void Add(Buffer* a, Buffer* b, Buffer* out) { ops_.Push({Record::kAdd, a, b, out}); }
  void Release(Buffer* b) { ops_.Push({Record::kRelease, nullptr, nullptr, b}); }
  // Waits until the worker ran everything pushed so far.
  void Drain() {
    const uint64_t target = pushed_marks_ + 1;
    ++pushed_marks_;
    ops_.Push({Record::kStop, nullptr, nullptr, reinterpret_cast<Buffer*>(target)});
    ops_.Publish();
    while (done_marks_.load(std::memory_order_acquire) != target) {
    }
  }

 private:
  void Free(Buffer* b) {
    b->next_free = free_;
    free_ = b;
  }
  void Run() {
    Record r;
    while (true) {
      if (!ops_.Pop(&r)) continue;
      switch (r.kind) {
        case Record::kAdd:
          r.out->value = r.a->value + r.b->value;
          break;
        case Record::kRelease:
          returned_.Push(r.out);
          break;
        case Record::kStop:
          if (r.out == nullptr) return;
          done_marks_.store(reinterpret_cast<uint64_t>(r.out), std::memory_order_release);
          break;
      }
    }
  }

  std::vector<Buffer> buffers_;
  Buffer* free_ = nullptr;  // caller side
  uint64_t pushed_marks_ = 0;
  alignas(64) std::atomic<uint64_t> done_marks_{0};
  SpscRing<Record, 4096> ops_;
  SpscRing<Buffer*, 1 << 17> returned_;
  std::thread worker_;
};

// A user-facing handle: releases its buffer through the ring when the last copy goes.
struct Handle {
  Handle(Floor* f, Buffer* b) : floor(f), buffer(b) {}
  ~Handle() { floor->Release(buffer); }
  Floor* floor;
  Buffer* buffer;
};

void BM_Machine_AsyncAddFloor(benchmark::State& state) {
  const bool handles = state.range(0) == 0;
  auto floor = std::make_unique<Floor>(static_cast<uint64_t>(state.range(1)));
  Buffer* one_buffer = floor->NewBuffer();
  one_buffer->value = 1.0f;  // before the worker sees it: published by the first push
  auto one = std::make_shared<Handle>(floor.get(), one_buffer);
  for (auto _ : state) {
    if (handles) {
      std::shared_ptr<Handle> acc = one;
      for (int i = 0; i < kOps; ++i) {
        Buffer* out = floor->NewBuffer();
        floor->Add(acc->buffer, one->buffer, out);
        acc = std::make_shared<Handle>(floor.get(), out);
      }
      floor->Drain();
      state.PauseTiming();
      if (acc->buffer->value != kOps + 1.0f) state.SkipWithError("wrong sum");
      acc.reset();
      floor->Drain();
      state.ResumeTiming();
    } else {
      Buffer* acc = one_buffer;
      for (int i = 0; i < kOps; ++i) {
        Buffer* out = floor->NewBuffer();
        floor->Add(acc, one_buffer, out);
        if (acc != one_buffer) floor->Release(acc);
        acc = out;
      }
      floor->Drain();
      state.PauseTiming();
      if (acc->value != kOps + 1.0f) state.SkipWithError("wrong sum");
      floor->Release(acc);
      floor->Drain();
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations() * kOps);
  one.reset();
  floor->Drain();
}
BENCHMARK(BM_Machine_AsyncAddFloor)
    ->ArgNames({"records_only", "publish_every"})
    ->ArgsProduct({{0, 1}, {1, 16}})
    ->UseRealTime();

}  // namespace
}  // namespace sluice::async_floor_benchmark
