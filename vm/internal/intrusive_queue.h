// IntrusiveQueue: the multi-producer, single-consumer hand-off between the VM's threads
// (submitters -> scheduler, scheduler -> ThreadCtx workers, workers -> scheduler). Items are
// linked through their own `next` field, so a hand-off never allocates, and a whole batch
// moves with one compare-and-swap (push) or one exchange (take).
#ifndef SLUICE_VM_INTERNAL_INTRUSIVE_QUEUE_H_
#define SLUICE_VM_INTERNAL_INTRUSIVE_QUEUE_H_

#include <atomic>
#include <cstddef>

namespace sluice::vm::internal {

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

// Push: any thread. TakeAll: one consumer thread at a time. Items pushed by one thread are
// taken in the order they were pushed; pushes from different threads interleave arbitrarily.
//
// Memory ordering: Push publishes the items with a CAS on `top_`; TakeAll acquires them with
// an acquire exchange, so everything the producer wrote into an item before pushing it is
// visible to the consumer. The CAS and empty() are seq_cst because consumers sleep on
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
    // Stored newest first: reverse the chain so that its tail is on top.
    T* newest = nullptr;
    T* item = chain.head;
    while (item != nullptr) {
      T* next = item->next;
      item->next = newest;
      newest = item;
      item = next;
    }
    T* oldest = chain.head;
    T* top = top_.load(std::memory_order_relaxed);
    do {
      oldest->next = top;
    } while (!top_.compare_exchange_weak(top, newest, std::memory_order_seq_cst,
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
    T* item = top_.exchange(nullptr, std::memory_order_acquire);
    Chain<T> chain;
    chain.tail = item;
    while (item != nullptr) {
      T* next = item->next;
      item->next = chain.head;
      chain.head = item;
      ++chain.size;
      item = next;
    }
    return chain;
  }

  // A hint: may be stale by the time the caller acts on it.
  bool empty() const { return top_.load(std::memory_order_seq_cst) == nullptr; }

 private:
  std::atomic<T*> top_{nullptr};
};

}  // namespace sluice::vm::internal

#endif  // SLUICE_VM_INTERNAL_INTRUSIVE_QUEUE_H_
