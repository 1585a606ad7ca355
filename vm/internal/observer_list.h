// ObserverList: the ExecutionObserver (vm/execution_observer.h) VmCore hands the engine and
// the executor when more than one observer is on — today the sync checker and the recorder
// together. It passes every event to each observer in the order given at construction:
// VmCore gives the checker first, then the recorder. The two see disjoint events today
// (the checker the engine's and workers' ordering events, the recorder blobs, chains,
// expansions and host writes), so no event's relative order between them is at stake; the
// fixed order keeps it that way should one start to watch the other's events.
//
// With one observer VmCore hands that one over directly, and with none a null pointer, so
// this fan-out costs something only when both are on.
#ifndef SLUICE_VM_INTERNAL_OBSERVER_LIST_H_
#define SLUICE_VM_INTERNAL_OBSERVER_LIST_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "vm/execution_observer.h"

namespace sluice::vm::internal {

// Thread-safe as its observers are: the list itself is fixed at construction and only read
// after. Each method is called on the thread ExecutionObserver names for it and calls every
// observer on that thread, in list order, before it returns. Does not own the observers.
class ObserverList final : public ExecutionObserver {
 public:
  // `observers`: non-null, in the order each event reaches them.
  explicit ObserverList(std::vector<ExecutionObserver*> observers)
      : observers_(std::move(observers)) {}
  ObserverList(const ObserverList&) = delete;
  ObserverList& operator=(const ObserverList&) = delete;

  // Producers.
  void OnBlobCreated(const std::shared_ptr<Blob>& blob, const Stream& stream) override {
    for (ExecutionObserver* o : observers_) o->OnBlobCreated(blob, stream);
  }
  void OnSubmit(Instruction* instruction) override {
    for (ExecutionObserver* o : observers_) o->OnSubmit(instruction);
  }
  void OnChainSubmitted(const Instruction* head) override {
    for (ExecutionObserver* o : observers_) o->OnChainSubmitted(head);
  }
  void OnHostWaited(const Instruction& instruction) override {
    for (ExecutionObserver* o : observers_) o->OnHostWaited(instruction);
  }

  // The scheduler.
  void OnBarrierReceived(const Instruction& barrier) override {
    for (ExecutionObserver* o : observers_) o->OnBarrierReceived(barrier);
  }
  void OnEagerReceived(Instruction* instruction) override {
    for (ExecutionObserver* o : observers_) o->OnEagerReceived(instruction);
  }
  void OnDoneEdge(const Instruction& done, Instruction* successor) override {
    for (ExecutionObserver* o : observers_) o->OnDoneEdge(done, successor);
  }
  void OnRetired(const Instruction& instruction) override {
    for (ExecutionObserver* o : observers_) o->OnRetired(instruction);
  }
  void OnEagerRetired(const Instruction& instruction) override {
    for (ExecutionObserver* o : observers_) o->OnEagerRetired(instruction);
  }
  void OnBarrierFired(const Instruction& barrier) override {
    for (ExecutionObserver* o : observers_) o->OnBarrierFired(barrier);
  }

  // Workers.
  void OnLaunch(Instruction* instruction) override {
    for (ExecutionObserver* o : observers_) o->OnLaunch(instruction);
  }
  void OnStepLaunch(Instruction* outer, const Instruction& step) override {
    for (ExecutionObserver* o : observers_) o->OnStepLaunch(outer, step);
  }
  void OnSharedDrop(Instruction* outer, const Instruction& step) override {
    for (ExecutionObserver* o : observers_) o->OnSharedDrop(outer, step);
  }
  void OnLastDrop(Instruction* outer, const Instruction& step) override {
    for (ExecutionObserver* o : observers_) o->OnLastDrop(outer, step);
  }
  void OnNestedStepsDone(Instruction* outer) override {
    for (ExecutionObserver* o : observers_) o->OnNestedStepsDone(outer);
  }
  void OnControlExpanded(const Instruction& control,
                         absl::Span<const Instruction* const> steps) override {
    for (ExecutionObserver* o : observers_) o->OnControlExpanded(control, steps);
  }

  // The thread that runs an AccessBlob's host code.
  void OnHostWrite(uint64_t seq, absl::Span<const uint8_t> bytes) override {
    for (ExecutionObserver* o : observers_) o->OnHostWrite(seq, bytes);
  }

 private:
  const std::vector<ExecutionObserver*> observers_;
};

}  // namespace sluice::vm::internal

#endif  // SLUICE_VM_INTERNAL_OBSERVER_LIST_H_
