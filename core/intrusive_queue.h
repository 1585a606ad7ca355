// IntrusiveQueue: the multi-producer, single-consumer hand-off between the VM's threads
// (submitters -> scheduler, scheduler -> ThreadCtx workers, workers -> scheduler). Items are
// linked through their own `next` field, so a hand-off never allocates, and a whole batch
// moves with one compare-and-swap (push) or one exchange (take).
#ifndef SLUICE_CORE_INTRUSIVE_QUEUE_H_
#define SLUICE_CORE_INTRUSIVE_QUEUE_H_

#include <atomic>
#include <cstddef>

namespace sluice {

// A chain of items linked through `T::next`, oldest first. Value type; owns nothing.
template <typename T>
struct Chain {
  T* head = nullptr;
  T* tail = nullptr;
  size_t size = 0;

  bool empty() const { return head == nullptr; }
  void PushBack(T* item) {
    item->next = nullptr;
    if (tail == nullptr) {
      head = item;
    } else {
      tail->next = item;
    }
    tail = item;
    ++size;
  }
  // Unlinks and returns the oldest item (its `next` cleared); the chain must not be empty.
  T* PopFront() {
    T* item = head;
    head = item->next;
    if (head == nullptr) tail = nullptr;
    --size;
    item->next = nullptr;
    return item;
  }
  void Append(Chain&& other) {
    if (other.empty()) return;
    if (tail == nullptr) {
      head = other.head;
    } else {
      tail->next = other.head;
    }
    tail = other.tail;
    size += other.size;
    other = Chain();
  }
};

// What the first item of a pushed chain carries while it sits in an IntrusiveQueue: the
// rest of the chain's shape and the chain pushed before it. Items embed one as
// `queue_header` (meaningful only on a chain's first item, only while queued).
template <typename T>
struct QueuedChainHeader {
  T* tail = nullptr;
  T* below = nullptr;  // the first item of the chain pushed before this one
  size_t size = 0;
};

// Push: any thread. TakeAll: one consumer thread at a time. Items pushed by one thread are
// taken in the order they were pushed; pushes from different threads interleave arbitrarily.
//
// Chains keep their own links: the queue is a stack of chains (each chain's first item
// points to the chain below), and TakeAll relinks the chains oldest first by touching each
// chain's first and last items only. Walking every item here would cost a cache miss per
// item on the consumer (each was last written on the producer's core), one after another
// (each miss reveals the next address) — most of a scheduling pass over a large batch; the
// consumer now meets each item once, in its own loop, where the misses can overlap with work.
//
// Memory ordering: Push publishes the chain with a CAS on `top_`; TakeAll acquires it with
// an acquire exchange, so everything the producer wrote into the items before pushing them
// is visible to the consumer. The CAS and empty() are seq_cst because consumers sleep on
// "queue non-empty" through Waker, whose no-lost-wake-up argument needs them in the single
// total order (free on x86, where a CAS is a full barrier anyway).
template <typename T>
class IntrusiveQueue {
 public:
  IntrusiveQueue() = default;
  IntrusiveQueue(const IntrusiveQueue&) = delete;
  IntrusiveQueue& operator=(const IntrusiveQueue&) = delete;

  // Pushes a chain (oldest first). Returns true when the queue was empty before, i.e. when
  // the consumer may need a wake-up.
  bool Push(Chain<T> chain) {
    if (chain.empty()) return false;
    T* head = chain.head;
    chain.tail->next = nullptr;
    head->queue_header.tail = chain.tail;
    head->queue_header.size = chain.size;
    T* top = top_.load(std::memory_order_relaxed);
    do {
      head->queue_header.below = top;
    } while (!top_.compare_exchange_weak(top, head, std::memory_order_seq_cst,
                                         std::memory_order_relaxed));
    return top == nullptr;
  }

  bool Push(T* item) {
    Chain<T> chain;
    chain.PushBack(item);
    return Push(chain);
  }

  // Takes every item, oldest first.
  Chain<T> TakeAll() {
    T* head = top_.exchange(nullptr, std::memory_order_acquire);
    Chain<T> all;
    // Newest chain first: put each in front of what was gathered so far.
    while (head != nullptr) {
      T* below = head->queue_header.below;
      T* tail = head->queue_header.tail;
      tail->next = all.head;
      if (all.tail == nullptr) all.tail = tail;
      all.head = head;
      all.size += head->queue_header.size;
      head = below;
    }
    return all;
  }

  // A hint: may be stale by the time the caller acts on it.
  bool empty() const { return top_.load(std::memory_order_seq_cst) == nullptr; }

 private:
  std::atomic<T*> top_{nullptr};
};

}  // namespace sluice

#endif  // SLUICE_CORE_INTRUSIVE_QUEUE_H_
